"""`text_similarity`: a completion against reference texts by BLEU, chrF, TER, ROUGE or fuzzy ratio.

Every number comes from the metric's own library, called as its sentence-level entry point
would call it, so referee's value is the library's on the same texts (``tests/rewards/text/
test_similarity.py`` checks each against a direct call):

=============  ==============================================  ===============================
metric         library call                                    reward
=============  ==============================================  ===============================
``bleu``       sacrebleu ``sentence_bleu`` (exp smoothing,     ``score / 100``
               effective order)
``chrf``       sacrebleu ``sentence_chrf`` (chrF2)             ``score / 100``
``chrf++``     sacrebleu ``sentence_chrf``, ``word_order=2``   ``score / 100``
``ter``        sacrebleu ``sentence_ter``                      ``max(0, 1 - score / 100)``
``rouge1``,    rouge-score ``RougeScorer.score`` (one          the F-measure (or
``rouge2``,    reference) or ``score_multi`` (several)         `rouge_measure`), already
``rougeL``,                                                    in [0, 1]
``rougeLsum``
``fuzzy``      rapidfuzz ``fuzz.ratio``                        ``ratio / 100``
=============  ==============================================  ===============================

TER is an error rate (edits per 100 reference words, 0 best, unbounded above); as a reward it
becomes ``max(0, 1 - TER / 100)``: 1 for an exact match, 0 at 100 edits per 100 reference
words or more. Every reward is then clamped to [0, 1], which only ever removes float noise
(sacrebleu's BLEU of an exact match can be 100.00000000000004). The reason carries the
library's raw number.

rouge-score's tokenizer keeps only ASCII letters and digits (and lowercases): ROUGE of text in
another script is 0 whatever it says; use chrF there.

Semantics are sentence level: a reward scores one rollout, so corpus BLEU (a statistic of a
whole set, not a mean of per-sentence values) has no per-rollout meaning. Several references
are the library's multi-reference scoring (BLEU's clipped counts over all references, chrF's
and TER's best reference, rouge-score's ``score_multi``: the reference with the best
F-measure); for ``fuzzy``, the best ratio over the references.

Bounds. The policy's text is hostile, and these metrics are not linear: ROUGE-L is a
quadratic longest-common-subsequence table in Python and TER's shift search is worse (two
dissimilar 800-word texts take about 17 s). So:

- an answer longer than `max_chars` characters scores 0.0, with a reason, without running the
  metric (no metric gives such an answer more than a sliver against a shorter reference; a
  reference of that size is a `Failure("not_applicable")`: raise `max_chars` for it);
- for TER, an answer whose word count differs from every reference's by at least the mean
  reference length has TER >= 100 (each surplus or missing word is an edit), so its reward is
  exactly 0 and TER's search is skipped;
- anything still slow meets the reward's deadline: 0 with the reason (``fault: timeout``), the
  policy's verdict, never a masked Failure.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from referee.errors import MissingDependency, NotApplicable
from referee.registry import register
from referee.reward import Need
from referee.rewards._common import reference_of, short
from referee.rewards.text.matching import _Extracting
from referee.rollout import Rollout
from referee.scores import Score

__all__ = [
    "BleuTokenizer",
    "RougeMeasure",
    "SimilarityMetric",
    "TextSimilarity",
]

SimilarityMetric = Literal[
    "bleu", "chrf", "chrf++", "ter", "rouge1", "rouge2", "rougeL", "rougeLsum", "fuzzy"
]
"""A metric `text_similarity` computes (see the module's table)."""

BleuTokenizer = Literal["13a", "intl", "zh", "char", "none"]
"""sacrebleu's BLEU tokenizers that need no extra package (``13a`` is its default)."""

RougeMeasure = Literal["fmeasure", "precision", "recall"]
"""Which of rouge-score's three numbers is the reward."""

_SACREBLEU = frozenset({"bleu", "chrf", "chrf++", "ter"})
_ROUGE = frozenset({"rouge1", "rouge2", "rougeL", "rougeLsum"})
# sacrebleu caches every tokenized line (an lru_cache of 65,536 entries per tokenizer
# class); rollouts never repeat, so past this many entries it only holds memory.
_TOKENIZER_CACHE_LIMIT = 4096

# (hypothesis, references) -> (reward in [0, 1], the library's own number, for the reason)
_Metric = Callable[[str, Sequence[str]], tuple[float, float]]


def _import(module: str, package: str) -> Any:
    try:
        return importlib.import_module(module)
    except ImportError:
        raise MissingDependency(package, "similarity", "text_similarity") from None


def _ter_bound_applies(preprocess: Callable[[str], str]) -> Callable[[str, Sequence[str]], bool]:
    """Whether TER is at least 100 on word counts alone, with TER's own tokenization."""

    def applies(hypothesis: str, references: Sequence[str]) -> bool:
        hyp = len(preprocess(hypothesis).split())
        refs = [len(preprocess(r).split()) for r in references]
        mean = sum(refs) / len(refs)
        return mean > 0 and min(abs(hyp - r) for r in refs) >= mean

    return applies


def _clear_when_full(tokenizer: object) -> Callable[[], None] | None:
    """A function that empties a sacrebleu tokenizer's line cache once it grows large."""
    cached = type(tokenizer).__call__  # sacrebleu's tokenizers cache it with lru_cache
    info = getattr(cached, "cache_info", None)
    clear = getattr(cached, "cache_clear", None)
    if info is None or clear is None:
        return None

    def trim() -> None:
        if info().currsize > _TOKENIZER_CACHE_LIMIT:
            clear()

    return trim


@register("text_similarity")
@dataclass(kw_only=True)
class TextSimilarity(_Extracting):
    """How close the (extracted) completion is to the reference text(s), in [0, 1].

    The reference is a string, or a list of strings (several acceptable references); a
    rollout without one is ``not_applicable``. Every number comes from the metric's own
    library, called as its sentence-level entry point would call it: BLEU (sacrebleu's
    ``sentence_bleu``, exp smoothing, effective order), chrF and chrF++ (``sentence_chrf``)
    become ``score / 100``; TER, an error rate, becomes ``max(0, 1 - TER / 100)`` (1 for an
    exact match, 0 at 100 edits per 100 reference words or more); ROUGE (rouge-score) gives
    its F-measure, or `rouge_measure`, already in [0, 1]; ``fuzzy`` is rapidfuzz's
    ``fuzz.ratio / 100``. The reason carries the library's raw number. Several references
    are the library's multi-reference scoring (for ``fuzzy``, the best ratio).

    rouge-score's tokenizer keeps only ASCII letters and digits: ROUGE of text in another
    script is 0 whatever it says; use chrF there. The metrics are not linear in the text
    (ROUGE-L is quadratic, TER worse), so an answer longer than `max_chars` scores 0.0
    without running the metric, and anything still slow meets the reward's deadline (0 with
    the reason, ``fault: timeout``).

    Attributes:
        metric: Which metric: ``bleu``, ``chrf``, ``chrf++``, ``ter``, ``rouge1``, ``rouge2``,
            ``rougeL``, ``rougeLsum`` or ``fuzzy``.
        extract: Which part of the completion is compared: ``full``, ``last_line``,
            ``answer_tag``, ``boxed`` or ``last_number`` (as for `exact_match`); no answer
            found scores 0.0.
        pattern: A regex whose last match (its first group, if any) is compared; wins over
            `extract`.
        lowercase: Compare lowercased text. None: the library's default (BLEU, chrF and
            fuzzy compare case; TER ignores it; rouge-score always lowercases, so False is
            refused for ROUGE). Fuzzy lowercases both texts with `str.lower`.
        tokenize: BLEU's tokenizer (sacrebleu's name: ``13a``, ``intl``, ``zh``, ``char`` or
            ``none``); None: sacrebleu's default, ``13a``.
        use_stemmer: ROUGE: Porter-stem words first (rouge-score's option). None: False.
        rouge_measure: ROUGE: which number is the reward: ``fmeasure``, ``precision`` or
            ``recall``. None: the F-measure.
        max_chars: Longest answer that is scored (longer: 0.0 without running the metric),
            and longest reference (longer: ``Failure("not_applicable")``).
        reference_key: Take the reference text(s) from this key of an object reference.

    Example:
        ```yaml
        type: text_similarity
        metric: rougeL
        use_stemmer: true
        extract: answer_tag
        ```

    Scores:
        ```yaml
        - prompt: Summarise the report in one sentence, inside <answer></answer>.
          completion: <answer>Sales rose ten percent in the third quarter.</answer>
          reference: Sales rose by ten percent in the third quarter.
          value: 0.9411764705882353
        - prompt: Summarise the report in one sentence, inside <answer></answer>.
          completion: <answer>The weather was mild this autumn.</answer>
          reference: Sales rose by ten percent in the third quarter.
          value: 0.13333333333333333
        ```
    """

    metric: SimilarityMetric
    lowercase: bool | None = None
    tokenize: BleuTokenizer | None = None
    use_stemmer: bool | None = None
    rouge_measure: RougeMeasure | None = None
    max_chars: int = 20_000
    reference_key: str | None = None
    name: str = "text_similarity"
    _measure: _Metric = field(init=False, repr=False, compare=False)
    _skip: Callable[[str, Sequence[str]], bool] | None = field(
        init=False, repr=False, compare=False, default=None
    )
    _trim: Callable[[], None] | None = field(init=False, repr=False, compare=False, default=None)
    _label: str = field(init=False, repr=False, compare=False, default="")

    def needs(self) -> frozenset[Need]:
        """The reference text(s)."""
        return frozenset({"reference"})

    def __post_init__(self) -> None:
        super().__post_init__()
        self._check_options()
        self._label = _LABELS[self.metric]
        if self.metric in _SACREBLEU:
            self._measure = self._sacrebleu()
        elif self.metric in _ROUGE:
            self._measure = self._rouge()
        else:
            self._measure = self._fuzzy()

    def _check_options(self) -> None:
        if self.max_chars < 1:
            raise ValueError(f"max_chars must be at least 1, got {self.max_chars}")
        only = {
            "tokenize": (self.tokenize, {"bleu"}),
            "use_stemmer": (self.use_stemmer, _ROUGE),
            "rouge_measure": (self.rouge_measure, _ROUGE),
        }
        for option, (value, metrics) in only.items():
            if value is not None and self.metric not in metrics:
                raise ValueError(
                    f"{option}={value!r} applies to {', '.join(sorted(metrics))} only, "
                    f"not to metric {self.metric!r}"
                )
        if self.metric in _ROUGE and self.lowercase is False:
            raise ValueError(
                "rouge-score's tokenizer always lowercases: lowercase=False cannot be had "
                "for ROUGE (leave lowercase unset)"
            )

    def _sacrebleu(self) -> _Metric:
        metrics = _import("sacrebleu.metrics", "sacrebleu")
        lowercase = bool(self.lowercase)
        if self.metric == "bleu":
            # What sacrebleu.sentence_bleu builds for each call, built once.
            scorer = metrics.BLEU(
                lowercase=lowercase,
                tokenize=self.tokenize,
                force=False,
                smooth_method="exp",
                smooth_value=None,
                effective_order=True,
            )
            self._trim = _clear_when_full(scorer.tokenizer)
        elif self.metric == "ter":
            # sacrebleu's TER ignores case unless told otherwise (its own default).
            scorer = metrics.TER(case_sensitive=self.lowercase is False)
            self._trim = _clear_when_full(scorer.tokenizer)
            self._skip = _ter_bound_applies(scorer._preprocess_segment)
        else:
            word_order = 2 if self.metric == "chrf++" else 0
            scorer = metrics.CHRF(word_order=word_order, lowercase=lowercase)
        sentence_score = scorer.sentence_score
        if self.metric == "ter":
            return lambda h, refs: _ter_reward(sentence_score(h, refs).score)
        return lambda h, refs: ((s := sentence_score(h, refs).score) / 100.0, s)

    def _rouge(self) -> _Metric:
        rouge_scorer = _import("rouge_score.rouge_scorer", "rouge-score")
        scorer = rouge_scorer.RougeScorer([self.metric], use_stemmer=bool(self.use_stemmer))
        metric, measure = self.metric, self.rouge_measure or "fmeasure"

        def rouge(hypothesis: str, references: Sequence[str]) -> tuple[float, float]:
            if len(references) == 1:
                result = scorer.score(references[0], hypothesis)[metric]
            else:
                result = scorer.score_multi(list(references), hypothesis)[metric]
            value = float(getattr(result, measure))
            return value, value

        return rouge

    def _fuzzy(self) -> _Metric:
        fuzz = _import("rapidfuzz.fuzz", "rapidfuzz")
        ratio = fuzz.ratio
        processor = str.lower if self.lowercase else None

        def fuzzy(hypothesis: str, references: Sequence[str]) -> tuple[float, float]:
            if processor is None and len(references) == 1:  # the common case, at its cost
                best = ratio(hypothesis, references[0])
            else:
                best = max(ratio(hypothesis, r, processor=processor) for r in references)
            return best / 100.0, best

        return fuzzy

    def check(self, rollout: Rollout) -> Score:
        references = self._references(rollout)
        answer = self.answer(rollout)
        if answer is None:
            return Score(value=0.0, reason="no answer found")
        if len(answer) > self.max_chars:
            return Score(
                value=0.0,
                reason=f"answer is {len(answer):,} characters, over max_chars "
                f"({self.max_chars:,}): scored 0 without running {self.metric}",
            )
        if self._skip is not None and self._skip(answer, references):
            return Score(value=0.0, reason="TER >= 100: the word counts alone differ that much")
        try:
            value, raw = self._measure(answer, references)
        finally:
            if self._trim is not None:
                self._trim()
        # Clamped: sacrebleu's BLEU for an exact match can be 100.00000000000004.
        value = 0.0 if value < 0.0 else 1.0 if value > 1.0 else value
        if len(references) == 1:
            return Score(value=value, reason=f"{self._label} {raw:.4g} against the reference")
        of = f"{len(references)} references"
        return Score(value=value, reason=f"{self._label} {raw:.4g} against {of}")

    def _references(self, rollout: Rollout) -> list[str]:
        ref = rollout.reference
        if self.reference_key is None and type(ref) is str and len(ref) <= self.max_chars:
            return [ref]  # the common case, checked at once
        ref = reference_of(rollout, self.reference_key)
        where = f"reference[{self.reference_key!r}]" if self.reference_key else "reference"
        items = ref if isinstance(ref, list) else [ref]
        if not items:
            raise NotApplicable(f"{where} is an empty list: give at least one reference text")
        out = []
        for item in items:
            if isinstance(item, str):
                out.append(item)
            elif isinstance(item, (int, float)) and not isinstance(item, bool):
                out.append(str(item))
            else:
                raise NotApplicable(f"{where} must be a text or a list of texts, got {short(item)}")
            if len(out[-1]) > self.max_chars:
                raise NotApplicable(
                    f"{where} has a text of {len(out[-1]):,} characters, over max_chars "
                    f"({self.max_chars:,}); raise max_chars to score against it"
                )
        return out


def _ter_reward(ter: float) -> tuple[float, float]:
    return max(0.0, 1.0 - ter / 100.0), ter


_LABELS = {
    "bleu": "BLEU",
    "chrf": "chrF",
    "chrf++": "chrF++",
    "ter": "TER",
    "rouge1": "ROUGE-1",
    "rouge2": "ROUGE-2",
    "rougeL": "ROUGE-L",
    "rougeLsum": "ROUGE-Lsum",
    "fuzzy": "fuzzy ratio",
}
