"""Length and repetition penalties."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Literal

from referee.errors import NotApplicable
from referee.registry import register
from referee.reward import CheckReward, Need
from referee.rollout import Rollout, token_count
from referee.scores import Score
from referee.workers import RunIn

__all__ = ["Length", "LengthUnit", "Repetition"]

LengthUnit = Literal["tokens", "words", "chars"]
"""What length counts. ``tokens`` reads ``metadata.completion_ids`` (a list of token ids, as
trainers give it) or ``metadata.completion_tokens`` (a count)."""


def measure(rollout: Rollout, unit: LengthUnit) -> int:
    """The completion's length in `unit`."""
    if unit == "chars":
        return len(rollout.completion_text)
    if unit == "words":
        return len(rollout.completion_text.split())
    count = token_count(rollout)
    if count is not None:
        return count
    raise NotApplicable(
        "unit 'tokens' needs metadata.completion_ids or metadata.completion_tokens; "
        "set unit: words or unit: chars to measure the text instead"
    )


@register("length")
@dataclass(kw_only=True)
class Length(CheckReward):
    """DAPO's soft overlong penalty: 0 within budget, falling linearly to -1 at `max_length`.

    The value is 0 up to ``max_length - cache_length``, then falls linearly to -1 at
    `max_length`, and is -1 beyond: a penalty in [-1, 0], to add to a correctness reward
    (``combine: weighted``). Counting tokens needs ``metadata.completion_ids`` (the token
    ids, as trainers give them) or ``metadata.completion_tokens`` (a count); a rollout with
    neither is ``not_applicable``.

    Attributes:
        max_length: The hard limit (DAPO's L_max), in `unit`.
        cache_length: Width of the soft band before it (DAPO's L_cache); 0: a hard step
            from 0 to -1 past `max_length`.
        unit: What length counts: ``tokens`` (from the rollout's metadata, above),
            ``words`` (whitespace-separated) or ``chars``.

    Example:
        ```yaml
        type: length
        max_length: 20480
        cache_length: 4096
        unit: tokens
        ```

    Scores:
        ```yaml
        - prompt: 'Prove that 1 + 2 + ... + n = n(n + 1) / 2.'
          completion: The proof is by induction on n; the base case n = 1 holds.
          metadata: {completion_tokens: 1200}
          value: 0.0
        - prompt: 'Prove that 1 + 2 + ... + n = n(n + 1) / 2.'
          completion: The proof is by induction on n, and then a long detour ...
          metadata: {completion_tokens: 18432}
          value: -0.5
        - prompt: 'Prove that 1 + 2 + ... + n = n(n + 1) / 2.'
          completion: The proof is by induction on n, and then it never stops ...
          metadata: {completion_tokens: 25000}
          value: -1.0
        ```
    """

    default_run_in: ClassVar[RunIn] = "inline"  # its cost is bounded

    max_length: int
    cache_length: int = 0
    unit: LengthUnit = "tokens"
    name: str = "length"

    def __post_init__(self) -> None:
        if self.max_length <= 0:
            raise ValueError(f"max_length must be positive, got {self.max_length}")
        if not 0 <= self.cache_length <= self.max_length:
            raise ValueError(
                f"cache_length must be between 0 and max_length, got {self.cache_length}"
            )

    def needs(self) -> frozenset[Need]:
        """The response's token count, where it counts tokens."""
        return frozenset({"tokens"}) if self.unit == "tokens" else frozenset()

    def check(self, rollout: Rollout) -> Score:
        n = measure(rollout, self.unit)
        soft = self.max_length - self.cache_length
        if n <= soft:
            return Score(value=0.0, reason=f"{n} {self.unit}, within {soft}")
        if n > self.max_length:
            return Score(value=-1.0, reason=f"{n} {self.unit}, over the limit {self.max_length}")
        return Score(
            value=(soft - n) / self.cache_length,
            reason=f"{n} {self.unit}, in the soft band ({soft}, {self.max_length}]",
        )


@register("repetition")
@dataclass(kw_only=True)
class Repetition(CheckReward):
    """A penalty for repeated n-grams: ``max_penalty * (1 - distinct / total)`` (as in open-r1).

    The completion is lowercased and split into words; ``total`` counts its word n-grams and
    ``distinct`` the different ones. The value is in [`max_penalty`, 0]: 0 for a text with
    no n-gram repeated, or shorter than `ngram_size` words, and towards `max_penalty` the
    more it repeats itself.

    Attributes:
        ngram_size: Words per n-gram.
        max_penalty: The value of a completion made of one n-gram repeated (zero or
            negative).

    Example:
        ```yaml
        type: repetition
        ngram_size: 4
        max_penalty: -0.5
        ```

    Scores:
        ```yaml
        - prompt: 'Tell me about your cat.'
          completion: The cat sat on the mat and then it slept all afternoon.
          value: 0.0
        - prompt: 'Tell me about your cat.'
          completion: I think so. I think so. I think so. I think so.
          value: -0.33333333333333337
        ```
    """

    default_run_in: ClassVar[RunIn] = "inline"  # its cost is bounded

    ngram_size: int = 3
    max_penalty: float = -1.0
    name: str = "repetition"

    def __post_init__(self) -> None:
        if self.ngram_size < 1:
            raise ValueError(f"ngram_size must be at least 1, got {self.ngram_size}")
        if self.max_penalty > 0:
            raise ValueError(f"max_penalty must be zero or negative, got {self.max_penalty}")

    def check(self, rollout: Rollout) -> Score:
        words = rollout.completion_text.lower().split()
        total = len(words) - self.ngram_size + 1
        if total <= 0:
            return Score(value=0.0, reason=f"shorter than {self.ngram_size} words")
        distinct = len(set(zip(*(words[i:] for i in range(self.ngram_size)), strict=False)))
        repeated = 1.0 - distinct / total
        return Score(
            value=repeated * self.max_penalty,
            reason=f"{distinct} distinct of {total} {self.ngram_size}-grams",
        )
