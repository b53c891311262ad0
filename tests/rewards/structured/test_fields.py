from __future__ import annotations

import json
from typing import Any

import pytest

import referee
from referee.rewards import FieldMatch, FieldRule
from tests.support.rollouts import make

REF = {
    "company": "Acme Corp.",
    "amount": 1_250_000,
    "date": "2025-03-03",
    "provinces": ["Ontario", "Quebec"],
}
RULES: dict[str, Any] = {
    "company": "text",
    "amount": {"number": {"rel_tol": 0.01}},
    "date": "date",
    "provinces": "set_f1",
}


def score(pred: Any, ref: Any = REF, **kw: Any) -> referee.Score:
    text = pred if isinstance(pred, str) else json.dumps(pred)
    reward = FieldMatch(fields=kw.pop("fields", RULES), **kw)
    return referee.score(reward, [make(text, ref)])[0]


@pytest.mark.parametrize(
    ("change", "value", "field", "field_value"),
    [
        ({}, 1.0, "company", 1.0),  # the reference itself
        ({"company": "ACME CORP"}, 1.0, "company", 1.0),  # text: case and edge punctuation
        ({"amount": "1,250,000"}, 1.0, "amount", 1.0),  # number: a numeric string counts
        ({"amount": "$1,260,000"}, 1.0, "amount", 1.0),  # within rel_tol 1%
        ({"amount": 1_300_000}, 0.75, "amount", 0.0),  # outside tolerance
        ({"amount": "about a million"}, 0.75, "amount", 0.0),  # not a number
        ({"date": "March 3, 2025"}, 1.0, "date", 1.0),  # date: any supported format
        ({"date": "2025-03-04"}, 0.75, "date", 0.0),
        ({"date": "soon"}, 0.75, "date", 0.0),
        ({"provinces": ["quebec", "Ontario"]}, 1.0, "provinces", 1.0),  # set: order and case free
        (
            {"provinces": ["Ontario"]},
            0.75 + 0.25 * (2 / 3),
            "provinces",
            2 / 3,
        ),  # missed one: recall 1/2
        (
            {"provinces": ["Ontario", "Quebec", "Yukon", "Nunavut"]},
            0.75 + 0.25 * (2 / 3),
            "provinces",
            2 / 3,
        ),  # invented: precision 1/2
        ({"provinces": "Ontario"}, 0.75, "provinces", 0.0),  # not a list
    ],
)
def test_field_matchers(
    change: dict[str, Any], value: float, field: str, field_value: float
) -> None:
    s = score({**REF, **change})
    assert s.value == pytest.approx(value)
    assert s.components[field] == pytest.approx(field_value)
    assert set(s.components) == set(RULES)


def test_missing_field_scores_zero_and_says_so() -> None:
    pred = dict(REF)
    del pred["date"]
    s = score(pred)
    assert s.value == 0.75 and s.components["date"] == 0.0
    assert s.reason is not None and "date: missing" in s.reason


@pytest.mark.parametrize(
    ("policy", "value"),
    [("penalize", 4 / 6), ("ignore", 1.0)],  # two invented fields weigh 1 each against 4 real ones
)
def test_invented_fields(policy: str, value: float) -> None:
    s = score({**REF, "ceo": "x", "hq": "y"}, extra_fields=policy)
    assert s.value == pytest.approx(value)
    if policy == "penalize":
        assert s.reason is not None and "invented fields ['ceo', 'hq']" in s.reason


def test_field_weights() -> None:
    fields = {"company": {"match": "text", "weight": 3}, "amount": "number"}
    s = score(
        {"company": "Acme Corp", "amount": 1}, {"company": "Acme Corp", "amount": 2}, fields=fields
    )
    assert s.value == pytest.approx(0.75)


def test_nested_paths_and_list_indices() -> None:
    ref = {"address": {"city": "Paris", "zip": "75001"}, "items": [{"sku": "A1"}]}
    fields = {"address.city": "text", "address.zip": "exact", "items.0.sku": "exact"}
    s = score(
        {"address": {"city": "paris", "zip": "75002"}, "items": [{"sku": "A1"}]}, ref, fields=fields
    )
    assert s.components == {"address.city": 1.0, "address.zip": 0.0, "items.0.sku": 1.0}
    assert s.value == pytest.approx(2 / 3)


def test_all_reference_keys_by_default() -> None:
    s = referee.score(FieldMatch(), [make('{"a": 1, "b": 2}', {"a": 1, "b": 3})])[0]
    assert s.components == {"a": 1.0, "b": 0.0}


@pytest.mark.parametrize(
    ("pred", "ref", "value"),
    [
        (1, 1.0, 1.0),  # exact: 1 == 1.0
        (True, 1, 0.0),  # exact: true is not 1
        (None, None, 1.0),  # expected null, got null
        ("x", None, 0.0),
    ],
)
def test_exact_and_null(pred: Any, ref: Any, value: float) -> None:
    s = referee.score(FieldMatch(), [make(json.dumps({"a": pred}), {"a": ref})])[0]
    assert s.value == value


def test_fuzzy_threshold() -> None:
    fields = {"name": {"match": "fuzzy", "threshold": 0.8}}
    near = score({"name": "Jonathan Smith"}, {"name": "Jonathon Smith"}, fields=fields)
    far = score({"name": "Bob"}, {"name": "Jonathon Smith"}, fields=fields)
    assert 0.9 < near.value < 1.0  # type: ignore[operator]
    assert far.value == 0.0


@pytest.mark.parametrize(
    ("text", "ref", "failure"),
    [
        ('{"a": 1}', "not an object", "not_applicable"),  # the reference has the wrong shape
        ('{"a": 1}', None, "not_applicable"),  # no reference at all
    ],
)
def test_reference_problems_are_failures_not_zeros(text: str, ref: Any, failure: str) -> None:
    s = referee.score(FieldMatch(), [make(text, ref)])[0]
    assert s.value is None and s.failure is not None and s.failure.type == failure


@pytest.mark.parametrize(
    ("text", "why"),
    [("not json", "invalid JSON"), ("[1, 2]", "expected a JSON object")],
)
def test_bad_completions_score_zero(text: str, why: str) -> None:
    s = score(text)
    assert s.value == 0.0 and s.reason is not None and why in s.reason


def test_reference_key() -> None:
    s = referee.score(FieldMatch(reference_key="gold"), [make('{"a": 1}', {"gold": {"a": 1}})])[0]
    assert s.value == 1.0


@pytest.mark.parametrize(
    "form",
    [
        {"number": {"rel_tol": 0.1}},
        {"match": "number", "rel_tol": 0.1},
        {"number": {"rel_tol": 0.1}, "weight": 1.0},
    ],
)
def test_rule_short_forms(form: dict[str, Any]) -> None:
    assert FieldRule.model_validate(form) == FieldRule(match="number", rel_tol=0.1)


# -- numbers of any size ----------------------------------------------------------------------

BIG = "9" * 5_000  # past Python's 4300-digit limit on int("...")
HUGE = "9" * 100_000
LONG_DECIMAL = "0." + "3" * 5_000


@pytest.mark.parametrize(
    ("number", "expected", "rule", "value", "why"),
    [
        (BIG, 5, "number", 0.0, "!= 5 (beyond float range: compared exactly)"),
        (HUGE, 5, "number", 0.0, "1.00000000000e+100000 != 5 (beyond float range"),
        ("1e400", 5, "number", 0.0, "1e+400 != 5 (beyond float range"),
        ("-1e400", "-1e400", "number", 1.0, None),  # a numeric string reference, same number
        (BIG, 10**5000 - 1, "number", 1.0, None),  # equal, to the last digit
        (BIG, 10**5000, "number", 0.0, "beyond float range"),
        (BIG, 10**5000, {"number": {"rel_tol": 1e-9}}, 1.0, None),  # tolerances still apply
        (LONG_DECIMAL, 1 / 3, "number", 1.0, None),  # a float, as before
        (BIG, 10**5000 - 1, "exact", 1.0, None),
        (BIG, 5, "exact", 0.0, "!= 5"),
        ("[1e400, 1]", [1, 2], "set_f1", 0.5, "invented ['1E+400']"),
        (BIG, "x", "text", 0.0, "!= 'x'"),
    ],
    # str() of a 5000-digit int raises, so pytest cannot name those cases itself
    ids=lambda case: "big-int" if isinstance(case, int) and case > 10**300 else None,
)
def test_numbers_of_any_size_get_a_verdict(
    number: str, expected: Any, rule: Any, value: float, why: str | None
) -> None:
    s = score(f'{{"n": {number}}}', {"n": expected}, fields={"n": rule})
    assert s.failure is None and s.value == pytest.approx(value)
    assert why is None or (s.reason is not None and why in s.reason), s.reason
