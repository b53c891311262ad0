"""Text rewards: exact match, contains, regex, and output format."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

from referee.errors import NotApplicable
from referee.registry import register
from referee.reward import CheckReward, Need
from referee.rewards._common import Normalize, normalize, reference_of, short
from referee.rewards._extract import AnswerExtract, extract_answer
from referee.rollout import Rollout
from referee.scores import Score
from referee.verifiers.patterns import Pattern, compile_pattern
from referee.workers import RunIn

__all__ = ["Contains", "ExactMatch", "Format", "Regex", "RegexFlag"]

RegexFlag = Literal["IGNORECASE", "DOTALL", "MULTILINE"]


def _compile(pattern: str, flags: tuple[RegexFlag, ...] = ()) -> Pattern:
    value = 0
    for flag in flags:
        value |= getattr(re, flag)
    return compile_pattern(pattern, value)


def _answers(ref: Any) -> list[str]:
    """Acceptable answers: a string, a number, or a list of them."""
    items = ref if isinstance(ref, list) else [ref]
    out = []
    for item in items:
        if isinstance(item, (str, int, float)) and not isinstance(item, bool):
            out.append(str(item))
        else:
            raise NotApplicable(f"reference answer must be text or a number, got {short(item)}")
    if not out:
        raise NotApplicable("reference lists no acceptable answer")
    return out


@dataclass(kw_only=True)
class _Extracting(CheckReward):
    """What the rewards that read an answer out of the completion share: where it is.

    Attributes:
        extract: Which part of the completion is the answer: ``full`` (all of it, stripped),
            ``last_line`` (its last non-empty line), ``answer_tag`` (the text of the last
            ``<answer>...</answer>``), ``boxed`` (the content of the last ``\\boxed{...}``)
            or ``last_number`` (the last number in the text, thousands commas removed). A
            completion without that part has no answer, and scores 0.0.
        pattern: A regex (Python syntax, DOTALL) whose last match is the answer: its first
            group, or the whole match when it has none; wins over `extract`. It runs on RE2,
            in time linear in the text, unless it needs backtracking; then a match that runs
            past 2 s scores 0 with the reason (``fault: timeout``).
    """

    default_run_in: ClassVar[RunIn] = "inline"  # its cost is bounded

    extract: AnswerExtract = "full"
    pattern: str | None = None
    _pattern: Pattern | None = field(init=False, repr=False, compare=False, default=None)

    def __post_init__(self) -> None:
        self._pattern = None if self.pattern is None else _compile(self.pattern, ("DOTALL",))

    def answer(self, rollout: Rollout) -> str | None:
        return extract_answer(rollout.completion_text, self.extract, self._pattern)


@register("exact_match")
@dataclass(kw_only=True)
class ExactMatch(_Extracting):
    """1.0 when the extracted answer equals the reference (or one of a list of references).

    The reference is the accepted answer: a string or a number, or a list of them (any one
    matches). The value is 1.0 or 0.0; a completion with no answer (see `extract`) scores
    0.0. A rollout without a reference, or with one of another shape, is ``not_applicable``.

    Attributes:
        normalize: How both sides are normalised before comparing: ``none`` (as they are),
            ``strip`` (surrounding whitespace removed) or ``text`` (Unicode NFKC, case-folded,
            whitespace collapsed, surrounding punctuation removed).
        reference_key: Take the answer from this key of an object reference (a rollout
            whose reference is not an object, or lacks the key, is ``not_applicable``).

    Example:
        ```yaml
        type: exact_match
        extract: answer_tag
        normalize: text
        ```

    Scores:
        ```yaml
        - prompt: What is the capital of France? Answer in <answer></answer> tags.
          completion: |-
            France's capital is on the Seine.
            <answer>paris</answer>
          reference: Paris
          value: 1.0
        - prompt: What is the capital of France? Answer in <answer></answer> tags.
          completion: <answer>Lyon</answer>
          reference: Paris
          value: 0.0
        - prompt: What is the capital of France? Answer in <answer></answer> tags.
          completion: Paris, of course.
          reference: Paris
          value: 0.0
        ```
    """

    normalize: Normalize = "strip"
    reference_key: str | None = None
    name: str = "exact_match"

    def needs(self) -> frozenset[Need]:
        """The accepted answer(s)."""
        return frozenset({"reference"})

    def check(self, rollout: Rollout) -> Score:
        accepted = _answers(reference_of(rollout, self.reference_key))
        answer = self.answer(rollout)
        if answer is None:
            return Score(value=0.0, reason="no answer found")
        got = normalize(answer, self.normalize)
        if any(got == normalize(a, self.normalize) for a in accepted):
            return Score(value=1.0, reason=f"answer {short(answer)} matches")
        return Score(value=0.0, reason=f"answer {short(answer)} != {short(accepted[0])}")


@register("contains")
@dataclass(kw_only=True)
class Contains(_Extracting):
    """1.0 when the (extracted) completion contains `value`, or else the reference answer.

    A substring search, after both sides are normalised: the value is 1.0 when the text is
    found, else 0.0 (also for a completion with no answer, see `extract`). Without `value`,
    the reference is a string or a number, or a list of them (any one found is enough); a
    rollout without one is ``not_applicable``.

    Attributes:
        value: The text to look for, the same for every rollout; when omitted, the reference.
        normalize: How both sides are normalised before searching: ``none``, ``strip`` or
            ``text`` (Unicode NFKC, case-folded, whitespace collapsed, surrounding
            punctuation removed).
        reference_key: Take the text from this key of an object reference.

    Example:
        ```yaml
        type: contains
        extract: last_line
        reference_key: city
        normalize: text
        ```

    Scores:
        ```yaml
        - prompt: Where is the meeting? End with the city on a line of its own.
          completion: |-
            The invitation names the venue.
            New York City
          reference: {city: new york}
          value: 1.0
        - prompt: Where is the meeting? End with the city on a line of its own.
          completion: |-
            It was in New York last year.
            Boston
          reference: {city: new york}
          value: 0.0
        ```
    """

    value: str | None = None
    normalize: Normalize = "text"
    reference_key: str | None = None
    name: str = "contains"

    def needs(self) -> frozenset[Need]:
        """The reference, unless `value` is given."""
        return frozenset() if self.value is not None else frozenset({"reference"})

    def check(self, rollout: Rollout) -> Score:
        needles = (
            [self.value]
            if self.value is not None
            else _answers(reference_of(rollout, self.reference_key))
        )
        text = self.answer(rollout)
        if text is None:
            return Score(value=0.0, reason="no answer found")
        hay = normalize(text, self.normalize)
        for needle in needles:
            if normalize(needle, self.normalize) in hay:
                return Score(value=1.0, reason=f"contains {short(needle)}")
        return Score(value=0.0, reason=f"does not contain {short(needles[0])}")


@register("regex")
@dataclass(kw_only=True)
class Regex(CheckReward):
    """1.0 when `regex` matches the completion (anywhere, or in full).

    The value is 1.0 on a match, else 0.0 (also when the part named by `extract` is not
    there). It needs nothing of the rollout but its completion.

    Attributes:
        regex: The regular expression (Python `re` syntax and meaning). It runs on RE2, in
            time linear in the text, unless it needs backtracking (backreferences,
            lookaround, ...); then a match that runs past 2 s scores 0 with the reason
            (``fault: timeout``). See `referee.verifiers.patterns`.
        mode: ``search`` finds it anywhere; ``fullmatch`` requires the whole text to match.
        flags: Regex flags, any of ``IGNORECASE``, ``DOTALL`` (``.`` matches a newline too)
            and ``MULTILINE`` (``^`` and ``$`` match at every line).
        extract: Apply it to this part of the completion only: ``full``, ``last_line``,
            ``answer_tag``, ``boxed`` or ``last_number`` (as for `exact_match`).

    Example:
        ```yaml
        type: regex
        regex: '^Final answer: [A-D]$'
        flags: [MULTILINE]
        ```

    Scores:
        ```yaml
        - prompt: Is a reaction that releases heat (A) endothermic or (B) exothermic?
          completion: |-
            The reaction releases heat, so it is exothermic.
            Final answer: B
          value: 1.0
        - prompt: Is a reaction that releases heat (A) endothermic or (B) exothermic?
          completion: "Final answer: B, because it releases heat"
          value: 0.0
        - prompt: Is a reaction that releases heat (A) endothermic or (B) exothermic?
          completion: "final answer: b"
          value: 0.0
        ```
    """

    default_run_in: ClassVar[RunIn] = "inline"  # its cost is bounded

    regex: str
    mode: Literal["search", "fullmatch"] = "search"
    flags: tuple[RegexFlag, ...] = ()
    extract: AnswerExtract = "full"
    name: str = "regex"
    _regex: Pattern = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        self._regex = _compile(self.regex, self.flags)

    def check(self, rollout: Rollout) -> Score:
        text = extract_answer(rollout.completion_text, self.extract)
        if text is None:
            return Score(value=0.0, reason="no answer found")
        found = self._regex.search(text) if self.mode == "search" else self._regex.fullmatch(text)
        if found:
            return Score(value=1.0, reason=f"matches /{self.regex}/")
        return Score(value=0.0, reason=f"does not match /{self.regex}/")


# Presets follow the common R1-style templates (open-r1's format reward).
_PRESETS: dict[str, tuple[str, tuple[str, ...]]] = {
    "think_answer": (
        r"\s*<think>.*?</think>\s*<answer>.*?</answer>\s*",
        ("<think>", "</think>", "<answer>", "</answer>"),
    ),
    "think": (r"\s*<think>.*?</think>.*", ("<think>", "</think>")),
    "answer": (r".*<answer>.*?</answer>\s*", ("<answer>", "</answer>")),
    "boxed": (r".*\\boxed\{.+\}.*", ("\\boxed{",)),
}


@register("format")
@dataclass(kw_only=True)
class Format(CheckReward):
    """1.0 when the completion has the required shape, such as think-then-answer tags.

    The R1-style format reward (open-r1's): the whole completion must match the preset's
    pattern or `pattern`, and each of its tags must appear exactly once; the value is 1.0,
    else 0.0 with the reason (the tags missing or repeated, or parts out of order). Give
    exactly one of `preset` and `pattern`.

    Attributes:
        preset: A named template: ``think_answer`` (``<think>...</think>`` then
            ``<answer>...</answer>``, nothing else around them but whitespace), ``think``
            (starts with ``<think>...</think>``), ``answer`` (an ``<answer>...</answer>``
            that ends the completion) or ``boxed`` (one ``\\boxed{...}``, anywhere). Each comes
            with its tags, which must appear once each.
        pattern: Or a regex the whole completion must match (DOTALL; run as `Regex.regex`
            is).
        tags: Tags that must each appear exactly once (checked on top of the pattern; the
            reason names the ones missing or repeated); given, they replace the preset's.

    Example:
        ```yaml
        type: format
        preset: think_answer
        ```

    Scores:
        ```yaml
        - prompt: 'What is 17 * 3? Think in <think></think>, then answer in <answer></answer>.'
          completion: |-
            <think>17 * 3 = 51</think>
            <answer>51</answer>
          value: 1.0
        - prompt: 'What is 17 * 3? Think in <think></think>, then answer in <answer></answer>.'
          completion: |-
            <answer>51</answer>
            <think>17 * 3 = 51</think>
          value: 0.0
        - prompt: 'What is 17 * 3? Think in <think></think>, then answer in <answer></answer>.'
          completion: <think>17 * 3</think><think>= 51</think><answer>51</answer>
          value: 0.0
        ```
    """

    default_run_in: ClassVar[RunIn] = "inline"  # its cost is bounded

    preset: Literal["think_answer", "think", "answer", "boxed"] | None = None
    pattern: str | None = None
    tags: tuple[str, ...] | None = None
    name: str = "format"
    _regex: Pattern = field(init=False, repr=False, compare=False)
    _tags: tuple[str, ...] = field(init=False, repr=False, compare=False, default=())

    def __post_init__(self) -> None:
        if (self.preset is None) == (self.pattern is None):
            raise ValueError("give exactly one of preset or pattern")
        pattern, tags = _PRESETS[self.preset] if self.preset else (self.pattern or "", ())
        self._regex = _compile(pattern, ("DOTALL",))
        self._tags = self.tags if self.tags is not None else tags

    def check(self, rollout: Rollout) -> Score:
        text = rollout.completion_text
        problems = []
        for tag in self._tags:
            count = text.count(tag)
            if count != 1:
                problems.append(f"{tag} appears {count} times")
        if not problems and self._regex.fullmatch(text) is None:
            problems.append("parts are out of order or malformed")
        if problems:
            return Score(value=0.0, reason="; ".join(problems))
        return Score(value=1.0, reason="format ok")
