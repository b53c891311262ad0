"""`text_similarity` graders' metrics, from the libraries referee already depends on.

=================  =========================================================================
metric             how referee computes it (a value in [0, 1])
=================  =========================================================================
``fuzzy_match``    rapidfuzz ``fuzz.WRatio(input, reference, processor=default_process) / 100``
                   (the fuzzy match of OpenAI's own python-grader example)
``bleu``           sacrebleu ``sentence_bleu(input, [reference]).score / 100``
``gleu``           NLTK ``sentence_gleu([reference.split()], input.split())``
``rouge_1`` ..     rouge-score ``RougeScorer(["rougeN"]).score(reference, input)``: the
``rouge_5``        F-measure
``rouge_l``        the same with ``rougeL``
``meteor``         refused when the spec loads: NLTK's METEOR needs the WordNet corpus, which
                   no installed package ships (it is a download)
``cosine``         refused when the spec loads: OpenAI computes it over its own embeddings
                   (``text-embedding-3-large``), which are not here
=================  =========================================================================

OpenAI does not publish its tokenisation or smoothing; these are the libraries' sentence-level
defaults, so a value may differ from OpenAI's in the last digits (the guide's examples agree).

The completion is hostile and ROUGE-L is quadratic: an input (the graded text) longer than
``max_chars`` characters scores 0 with the length in the reason (`SampleLacks`), and a reference
that long is a `NotApplicable`; neither is measured.
"""

from __future__ import annotations

import importlib
import math
from collections.abc import Callable
from typing import Any

from referee.errors import MissingDependency, NotApplicable
from referee.rewards.judged.openai_graders.templating import SampleLacks

__all__ = ["METRICS", "UNAVAILABLE", "metric"]

METRICS = (
    "fuzzy_match", "bleu", "gleu", "meteor", "cosine",
    "rouge_1", "rouge_2", "rouge_3", "rouge_4", "rouge_5", "rouge_l",
)  # fmt: skip
"""OpenAI's ``evaluation_metric`` values."""

UNAVAILABLE = {
    "cosine": "it needs OpenAI's embeddings (text-embedding-3-large), which referee cannot call "
    "offline; use a score_model grader, or another metric",
    "meteor": "NLTK's METEOR needs the WordNet corpus, which is a download (nltk.download("
    "'wordnet')) that no installed package ships; use rouge_l or bleu",
}
"""Metrics refused at load, and why."""


def _module(module: str, package: str, extra: str) -> Any:
    try:
        return importlib.import_module(module)
    except ImportError:
        raise MissingDependency(package, extra, "openai_grader text_similarity") from None


def _fuzzy(text: str, reference: str) -> float:
    from rapidfuzz import fuzz, utils

    return float(fuzz.WRatio(text, reference, processor=utils.default_process)) / 100.0


def _bleu(text: str, reference: str) -> float:
    sacrebleu = _module("sacrebleu", "sacrebleu", "similarity")
    return float(sacrebleu.sentence_bleu(text, [reference]).score) / 100.0


def _gleu(text: str, reference: str) -> float:
    gleu = _module("nltk.translate.gleu_score", "nltk", "ifeval")
    return float(gleu.sentence_gleu([reference.split()], text.split()))


def _rouge(kind: str) -> Callable[[str, str], float]:
    def score(text: str, reference: str) -> float:
        rouge_scorer = _module("rouge_score.rouge_scorer", "rouge-score", "similarity")
        scorer = rouge_scorer.RougeScorer([kind])
        return float(scorer.score(reference, text)[kind].fmeasure)

    return score


_FUNCTIONS: dict[str, Callable[[str, str], float]] = {
    "fuzzy_match": _fuzzy,
    "bleu": _bleu,
    "gleu": _gleu,
    **{f"rouge_{n}": _rouge(f"rouge{n}") for n in range(1, 6)},
    "rouge_l": _rouge("rougeL"),
}


def metric(name: str, text: str, reference: str, max_chars: int) -> float:
    """`name`'s value of `text` against `reference`, clamped to [0, 1] (float noise only).

    Raises:
        SampleLacks: The input (the graded text) is longer than `max_chars`: a 0, since
            masking it would let a policy escape a low score by writing more.
        NotApplicable: The reference is longer than `max_chars`.
    """
    for what, string, error in (
        ("input", text, SampleLacks),
        ("reference", reference, NotApplicable),
    ):
        if len(string) > max_chars:
            raise error(
                f"text_similarity {name}: the {what} is {len(string)} characters, over "
                f"max_chars ({max_chars})"
            )
    value = _FUNCTIONS[name](text, reference)
    if not math.isfinite(value):  # pragma: no cover - the libraries return finite values
        raise NotApplicable(f"text_similarity {name} gave {value}")
    return float(min(1.0, max(0.0, value)))
