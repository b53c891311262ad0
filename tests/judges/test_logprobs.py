"""Reading scores from logprobs: where each value of a reply starts, the candidates there, and
their expected score."""

from __future__ import annotations

import math
from typing import Any

import pytest

from referee.judges.logprobs import BOOLEAN, candidates_at_values, expected, pointer, scale


def tokens(*parts: str | tuple[str, dict[str, float]]) -> list[dict[str, Any]]:
    """``logprobs.content`` in OpenAI's shape: a plain part is certain; (token, {candidate:
    probability}) has alternatives."""
    out = []
    for part in parts:
        text, top = (part, {part: 1.0}) if isinstance(part, str) else part
        out.append({
            "token": text,
            "logprob": math.log(top.get(text, 1e-9)),
            "bytes": list(text.encode()),
            "top_logprobs": [{"token": t, "logprob": math.log(p)} for t, p in top.items()],
        })  # fmt: skip
    return out


def spelled(content: list[dict[str, Any]]) -> str:
    return "".join(t["token"] for t in content)


def test_candidates_at_each_value_with_the_prefix_taken_off() -> None:
    content = tokens(
        '{"', "criteria", '":', ' {"', "accuracy", '":',
        (" 4", {" 4": 0.5, " 5": 0.3, "3": 0.2}),  # "3" without the space: still a 3
        ',', ' "', "ok", '":', (" true", {" true": 0.9, " false": 0.1}),
        '},', ' "', "reasoning", '":', ' "', "fine", '"}',
    )  # fmt: skip
    found = candidates_at_values(spelled(content), content)
    assert found is not None
    assert set(found) == {"/criteria/accuracy", "/criteria/ok", "/reasoning"}
    assert [t for t, _ in found["/criteria/accuracy"]] == ["4", "5", "3"]  # sampled first
    assert expected(found["/criteria/accuracy"], scale(1, 5)) == pytest.approx(
        0.5 * 0.75 + 0.3 * 1.0 + 0.2 * 0.5
    )
    assert expected(found["/criteria/ok"], BOOLEAN) == pytest.approx(0.9)


def test_a_value_inside_a_token_and_chatty_text_before_the_json() -> None:
    content = tokens("Sure! ```json\n", '{"score":', ("3}", {"3}": 0.7, "2}": 0.3}), "\n```")
    found = candidates_at_values(spelled(content), content)
    assert found is not None
    # the literal is read up to its delimiter: "3}" is a 3
    assert expected(found["/score"], scale(1, 3)) == pytest.approx(0.7 * 1.0 + 0.3 * 0.5)


def test_items_of_an_array_by_index() -> None:
    content = tokens('{"items": [', ("true", {"true": 0.6, "false": 0.4}), ", ",
                     ("false", {"false": 1.0}), "]}")  # fmt: skip
    found = candidates_at_values(spelled(content), content)
    assert found is not None
    assert expected(found[pointer("items", 0)], BOOLEAN) == pytest.approx(0.6)
    assert expected(found[pointer("items", 1)], BOOLEAN) == 0.0


def test_tokens_that_split_a_character_are_aligned_by_their_bytes() -> None:
    # "é" arrives as two byte-level tokens whose strings are not text
    content = tokens('{"why": "caf', "?", "?", '", "score":', (" 2", {" 2": 0.5, " 1": 0.5}), "}")
    content[1]["bytes"], content[2]["bytes"] = [0xC3], [0xA9]
    text = '{"why": "café", "score": 2}'
    found = candidates_at_values(text, content)
    assert found is not None and expected(found["/score"], scale(1, 2)) == pytest.approx(0.5)


@pytest.mark.parametrize(
    ("text", "content"),
    [
        ('{"score": 2}', None),  # the server gave no logprobs
        ('{"score": 2}', []),
        ('{"score": 2}', tokens('{"score": 3}')),  # tokens that spell another text
        ("no JSON here", tokens("no JSON here")),
    ],
)
def test_nothing_to_read(text: str, content: list[dict[str, Any]] | None) -> None:
    assert candidates_at_values(text, content) is None


@pytest.mark.parametrize(
    ("candidates", "literals", "value"),
    [
        # each candidate read as the literal it is, or holds before a delimiter
        ((("4", 0.0),), scale(1, 5), 0.75),
        ((("4,", math.log(0.5)), ("2}", math.log(0.5))), scale(1, 5), 0.5),
        # "4." could begin 4.5: not a 4, left out and the rest renormalised
        ((("3", math.log(0.5)), ("4.", math.log(0.5))), scale(1, 5), 0.5),
        # "1" could begin 1 or 10 on a 1..10 scale: left out
        ((("9", math.log(0.5)), ("1", math.log(0.5))), scale(1, 10), 8 / 9),
        # OpenAI's -9999 for "very unlikely" weighs nothing
        ((("true", 0.0), ("false", -9999.0)), BOOLEAN, 1.0),
        # "t" can only begin true
        ((("t", math.log(0.25)), ("false", math.log(0.75))), BOOLEAN, 0.25),
        # the sampled token cannot be read (a value spanning tokens): no expectation
        ((("1", math.log(0.6)), ("9", math.log(0.4))), scale(1, 10), None),
        ((('"', 0.0),), scale(1, 5), None),  # a quoted value
        ((), scale(1, 5), None),
        (None, BOOLEAN, None),
    ],
)
def test_expected(candidates: Any, literals: dict[str, float], value: float | None) -> None:
    assert expected(candidates, literals) == (value if value is None else pytest.approx(value))


def test_pointer_escapes() -> None:
    assert pointer("criteria", "a/b~c") == "/criteria/a~1b~0c"
    assert pointer("items", 3) == "/items/3"
