from __future__ import annotations

import pytest

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


# --- blame (issue 44) -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kind", "blame"),
    [
        ("not_applicable", "data"),  # the user's reference does not fit
        ("invalid_input", "data"),
        ("error", "data"),  # the reward's own code raised
        ("invalid_value", "data"),
        ("no_score", "data"),
        ("timeout", "infrastructure"),  # a wait ran out: a judge, an engine
        ("judge", "infrastructure"),
        ("sandbox", "infrastructure"),
        ("budget", "infrastructure"),
    ],
)
def test_a_failure_is_blamed_on_the_data_or_the_infrastructure(kind: str, blame: str) -> None:
    failure = Score.failed(kind, "m", "r").failure  # type: ignore[arg-type]
    assert failure is not None and failure.blame == blame
    assert failure.retryable == (blame == "infrastructure")
    assert Failure.from_dict(failure.to_dict()) == failure


def test_an_explicit_blame_wins_and_a_bad_one_is_derived() -> None:
    failure = Score.failed("error", "no worker would start", "r", "infrastructure").failure
    assert failure is not None and failure.blame == "infrastructure" and failure.retryable
    odd = Failure.from_dict({"type": "error", "message": "m", "blame": "the moon"})
    assert odd.blame == "data"


def test_a_policy_fault_is_a_zero_with_its_reason_never_a_failure() -> None:
    score = Score.policy_fault("timeout", "spin ran past its deadline")
    assert (score.value, score.failure, score.fault) == (0.0, None, "timeout")
    assert score.reason == "spin ran past its deadline"
    back = Score.from_dict(score.to_dict())
    assert back == score
    assert Score.from_dict({**score.to_dict(), "fault": "nonsense"}).fault is None


def test_a_component_failure_keeps_its_blame_in_the_total() -> None:
    import referee

    @referee.reward(run_in="inline")
    def judge_down(rollout: referee.Rollout) -> referee.Score:
        return Score.failed("judge", "the judge is down", "judge_down")

    total = referee.weighted({"a": judge_down, "b": referee.load({"type": "json_valid"})})
    [score] = referee.score(total, [referee.Rollout(completion="{}")])
    assert score.failure is not None and score.failure.blame == "infrastructure"
