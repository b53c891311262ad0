from __future__ import annotations

from referee import Failure, Score


def test_round_trip_through_dict() -> None:
    s = Score(
        value=0.5,
        components={"a": 1.0, "b": None},
        reason="why",
        skipped=("c",),
        steps=(0.1, 0.2),
        cost=0.01,
        latency=1.5,
        tokens=123,
    )
    assert Score.from_dict(s.to_dict()) == s


def test_failed_score_has_no_value_and_says_why() -> None:
    s = Score.failed("timeout", "too slow", "math")
    assert s.value is None and not s.ok
    assert s.failure == Failure("timeout", "too slow", "math")
    assert Score.from_dict(s.to_dict()) == s


def test_unknown_failure_type_from_a_file_becomes_error() -> None:
    assert Failure.from_dict({"type": "martian", "message": "m"}).type == "error"
