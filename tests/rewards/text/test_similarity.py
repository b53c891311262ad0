"""text_similarity: every number is its library's on the same texts, bounded on hostile ones."""

from __future__ import annotations

import pickle
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

import referee
from referee.rewards import TextSimilarity
from tests.support.hostile import HOSTILE, score_guarded
from tests.support.rollouts import make

sacrebleu = pytest.importorskip("sacrebleu")
rouge_scorer = pytest.importorskip("rouge_score.rouge_scorer")
from rapidfuzz import fuzz, process  # noqa: E402 - after the skips, like the libraries above

# (hypothesis, references): one or several references, case and punctuation differences,
# reordering, no overlap, empty sides, non-Latin text.
PAIRS: list[tuple[str, list[str]]] = [
    ("the cat sat on the mat", ["the cat sat on the mat"]),
    ("The cat sat on the mat.", ["the cat is sitting on a mat"]),
    ("on the mat the cat sat", ["the cat sat on the mat", "a cat was on the mat"]),
    ("completely unrelated words here", ["the cat sat on the mat"]),
    ("", ["the cat sat on the mat"]),
    ("the cat", [""]),
    ("Running runners ran quickly", ["the runner runs quick", "runners running"]),
    ("Le chat est assis sur le tapis.", ["Le chat s'est assis sur le tapis."]),
    ("猫坐在垫子上", ["猫坐在垫子上了"]),
    ("THE CAT SAT ON THE MAT", ["the cat sat on the mat"]),
    ("a b c d e f g h i j", ["a b c d e f g h i k", "j i h g f e d c b a"]),
]


def _value(reward: TextSimilarity, hypothesis: str, references: list[str]) -> float:
    score = referee.score(reward, [make(hypothesis, references)])[0]
    assert score.failure is None, score.failure
    assert score.value is not None
    return score.value


def _direct(hyp: str, refs: list[str], metric: str, **options: Any) -> float:
    """The value by calling the library the way its users do, referee nowhere, clamped to
    [0, 1] as referee documents (float noise: BLEU of an exact match is 100.00000000000004)."""
    return min(1.0, max(0.0, _library(hyp, refs, metric, **options)))


def _library(hyp: str, refs: list[str], metric: str, **options: Any) -> float:
    lowercase = options.get("lowercase")
    if metric == "bleu":
        tokenize = options.get("tokenize") or "13a"
        return float(
            sacrebleu.sentence_bleu(hyp, refs, lowercase=bool(lowercase), tokenize=tokenize).score
            / 100
        )
    if metric in ("chrf", "chrf++"):
        word_order = 2 if metric == "chrf++" else 0
        if lowercase:  # sentence_chrf has no lowercase argument; CHRF does
            chrf = sacrebleu.metrics.CHRF(word_order=word_order, lowercase=True)
            return float(chrf.sentence_score(hyp, refs).score / 100)
        return float(sacrebleu.sentence_chrf(hyp, refs, word_order=word_order).score / 100)
    if metric == "ter":
        ter = float(sacrebleu.sentence_ter(hyp, refs, case_sensitive=lowercase is False).score)
        return max(0.0, 1 - ter / 100)
    if metric.startswith("rouge"):
        scorer = rouge_scorer.RougeScorer([metric], use_stemmer=bool(options.get("use_stemmer")))
        measure = options.get("rouge_measure") or "fmeasure"
        result = scorer.score(refs[0], hyp) if len(refs) == 1 else scorer.score_multi(refs, hyp)
        return float(getattr(result[metric], measure))
    processor = str.lower if lowercase else None
    best = process.extractOne(hyp, refs, scorer=fuzz.ratio, processor=processor)
    return float(best[1] / 100)


# Every metric, and each option that changes what the library computes.
SETUPS: list[dict[str, Any]] = [
    {"metric": "bleu"},
    {"metric": "bleu", "lowercase": True},
    {"metric": "bleu", "tokenize": "intl"},
    {"metric": "bleu", "tokenize": "char"},
    {"metric": "bleu", "tokenize": "zh"},
    {"metric": "chrf"},
    {"metric": "chrf", "lowercase": True},
    {"metric": "chrf++"},
    {"metric": "ter"},  # case-insensitive, sacrebleu's default
    {"metric": "ter", "lowercase": False},  # case-sensitive
    {"metric": "rouge1"},
    {"metric": "rouge2", "use_stemmer": True},
    {"metric": "rougeL"},
    {"metric": "rougeL", "rouge_measure": "recall"},
    {"metric": "rougeLsum", "rouge_measure": "precision"},
    {"metric": "fuzzy"},
    {"metric": "fuzzy", "lowercase": True},
]


@pytest.mark.parametrize("setup", SETUPS, ids=[str(s) for s in SETUPS])
def test_values_equal_the_library(setup: dict[str, Any]) -> None:
    reward = TextSimilarity(**setup)
    for hyp, refs in PAIRS:
        expected = _direct(hyp, refs, **setup)
        assert _value(reward, hyp, refs) == expected, (hyp, refs)
        assert 0.0 <= expected <= 1.0


_WORDS = st.sampled_from(["the", "cat", "sat", "on", "mat", "The", "a", "dog", ".", ",", "é"])
_TEXT = st.lists(_WORDS, max_size=25).map(" ".join)


@given(hyp=_TEXT, refs=st.lists(_TEXT, min_size=1, max_size=3))
@pytest.mark.parametrize("metric", ["bleu", "chrf", "ter", "rougeL", "fuzzy"])
def test_random_texts_equal_the_library(metric: str, hyp: str, refs: list[str]) -> None:
    # TER here includes the cases its word-count bound decides without running TER.
    reward = referee.load({"type": "text_similarity", "metric": metric})
    assert _value(reward, hyp, refs) == _direct(hyp, refs, metric)  # type: ignore[arg-type]


def test_a_single_reference_string_is_one_reference() -> None:
    reward = TextSimilarity(metric="bleu")
    hyp, ref = "the cat sat on the mat", "the cat is on the mat"
    assert _value(reward, hyp, ref) == _value(reward, hyp, [ref])  # type: ignore[arg-type]


def test_ter_as_a_reward_is_one_minus_the_rate_floored_at_zero() -> None:
    reward = TextSimilarity(metric="ter")
    assert _value(reward, "the cat sat on the mat", ["the cat sat on the mat"]) == 1.0
    # 3 edits for 6 reference words: TER 50
    assert _value(reward, "the dog sat in the hat", ["the cat sat on the mat"]) == 0.5
    # far more words than the reference: TER over 100, reward 0 (and TER's search skipped)
    s = referee.score(reward, [make("word " * 1000, ["the cat sat"])])[0]
    assert s.value == 0.0 and s.reason is not None and "TER >= 100" in s.reason
    assert sacrebleu.sentence_ter("word " * 50, ["the cat sat"]).score >= 100


def test_reason_carries_the_library_number() -> None:
    s = referee.score(TextSimilarity(metric="bleu"), [make("the cat sat", ["the cat sat"])])[0]
    assert s.reason == "BLEU 100 against the reference"


@pytest.mark.parametrize(
    ("options", "completion", "value"),
    [
        ({"extract": "answer_tag"}, "<think>x</think><answer>the cat sat</answer>", 1.0),
        ({"extract": "answer_tag"}, "no tags at all", 0.0),  # no answer: 0, with a reason
        ({"pattern": r"Summary: (.*)"}, "notes\nSummary: the cat sat", 1.0),
        ({}, "  the cat sat \n", 1.0),  # the whole completion, stripped
    ],
)
def test_which_text_is_compared(options: dict[str, Any], completion: str, value: float) -> None:
    reward = TextSimilarity(metric="chrf", **options)
    assert referee.score(reward, [make(completion, "the cat sat")])[0].value == value


def test_reference_key() -> None:
    reward = TextSimilarity(metric="fuzzy", reference_key="summary")
    s = referee.score(reward, [make("abc", {"summary": ["abc", "xyz"], "id": 3})])[0]
    assert s.value == 1.0


@pytest.mark.parametrize(
    ("reference", "options", "message"),
    [
        (None, {}, "no reference"),
        ({"a": "x"}, {}, "reference must be a text or a list of texts, got {'a': 'x'}"),
        (["ok", {"a": 1}], {}, "reference must be a text or a list of texts, got {'a': 1}"),
        ([], {}, "reference is an empty list"),
        ("x", {"reference_key": "summary"}, "reference_key 'summary' needs an object"),
        ({"text": "x"}, {"reference_key": "summary"}, "reference has no key 'summary'"),
        ({"summary": [True]}, {"reference_key": "summary"}, "reference['summary'] must be"),
        ("r" * 101, {"max_chars": 100}, "over max_chars (100); raise max_chars"),
    ],
)
def test_a_bad_reference_is_not_applicable_and_says_why(
    reference: Any, options: dict[str, Any], message: str
) -> None:
    s = referee.score(TextSimilarity(metric="bleu", **options), [make("x", reference)])[0]
    assert s.value is None and s.failure is not None
    assert s.failure.type == "not_applicable"
    assert message in s.failure.message


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"metric": "bleu", "use_stemmer": True}, "use_stemmer=True applies to rouge1"),
        ({"metric": "chrf", "tokenize": "intl"}, "tokenize='intl' applies to bleu only"),
        ({"metric": "fuzzy", "rouge_measure": "recall"}, "applies to rouge1"),
        ({"metric": "rougeL", "lowercase": False}, "always lowercases"),
        ({"metric": "bleu", "max_chars": 0}, "max_chars must be at least 1"),
        ({"metric": "blue"}, "metric"),
        ({"metric": "bleu", "tokenize": "ja-mecab"}, "tokenize"),
    ],
)
def test_bad_options_fail_at_load_naming_them(options: dict[str, Any], message: str) -> None:
    with pytest.raises(referee.SpecError, match="text_similarity") as info:
        referee.load({"type": "text_similarity", **options})
    assert message in str(info.value)


def test_an_answer_over_max_chars_scores_zero_without_the_metric() -> None:
    reward = TextSimilarity(metric="rougeL", max_chars=1000)
    s = referee.score(reward, [make("the cat " * 200, "the cat")])[0]
    assert s.value == 0.0 and s.reason is not None and "over max_chars (1,000)" in s.reason
    inside = referee.score(reward, [make("the cat " * 100, "the cat")])[0]
    assert inside.value is not None and 0 < inside.value < 0.1  # the library's sliver


def test_sacrebleu_line_cache_stays_bounded() -> None:
    # sacrebleu caches each tokenized line (65,536 of them); rollouts never repeat.
    from sacrebleu.tokenizers.tokenizer_13a import Tokenizer13a

    from referee.rewards.text.similarity import _TOKENIZER_CACHE_LIMIT

    reward = TextSimilarity(metric="bleu")
    referee.score(reward, [make(f"line {i}", "line") for i in range(_TOKENIZER_CACHE_LIMIT + 10)])
    assert Tokenizer13a.__call__.cache_info().currsize <= _TOKENIZER_CACHE_LIMIT + 2


@pytest.mark.parametrize("setup", SETUPS[::2], ids=[str(s) for s in SETUPS[::2]])
def test_pickle_round_trip(setup: dict[str, Any]) -> None:
    reward = TextSimilarity(**setup)
    clone = pickle.loads(pickle.dumps(reward))
    assert clone == reward
    rollouts = [make(h, r) for h, r in PAIRS]
    assert referee.score(clone, rollouts) == referee.score(reward, rollouts)


# The hostile battery of test_hostile, against a real reference and with every metric (the
# battery itself runs one setup, from tests.support.options).
@pytest.mark.parametrize(
    "metric", ["bleu", "chrf", "chrf++", "ter", "rouge1", "rouge2", "rougeL", "rougeLsum", "fuzzy"]
)
@pytest.mark.parametrize("label", sorted(HOSTILE))
def test_hostile_completions_get_a_value(metric: str, label: str) -> None:
    reward = referee.load({"type": "text_similarity", "metric": metric})
    score = score_guarded(reward, HOSTILE[label], ["the cat sat on the mat", "a boxed 1"])
    assert score.failure is None, score.failure
    assert score.value is not None and 0.0 <= score.value <= 1.0
