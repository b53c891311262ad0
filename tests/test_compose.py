from __future__ import annotations

import math
import pickle
import re
from dataclasses import dataclass, field

import pytest
from hypothesis import given
from hypothesis import strategies as st

import referee
from referee import Component, Rollout, Score
from referee.compose import Combined
from tests.support.rewards import Fixed, one


def test_weighted_reports_total_and_every_component() -> None:
    s = one(referee.weighted({"a": (Fixed(value=1.0), 0.2), "b": (Fixed(value=0.5), 0.8)}))
    assert s.value == pytest.approx(0.2 * 1.0 + 0.8 * 0.5)
    assert s.components == {"a": 1.0, "a.inner": 1.0, "b": 0.5, "b.inner": 0.5}
    assert s.reason == "a: fixed ok; b: fixed ok"


def test_failed_gate_sets_floor_and_skips_later_components() -> None:
    judge = Fixed(value=1.0)
    reward = Combined(
        components=[
            Component(name="valid", reward=Fixed(value=0.0), weight=0.2, gate=True),
            Component(name="judge", reward=judge, weight=0.8),
        ],
        floor=-1.0,
    )
    s = one(reward)
    assert s.value == -1.0
    assert s.skipped == ("judge",)
    assert "judge" not in s.components
    assert judge.calls == []  # the expensive component was never run
    assert s.failure is None  # a failed gate is a real score, not a failure


def test_gate_threshold() -> None:
    reward = referee.gate(Fixed(value=0.7), Fixed(value=0.3, name="then"), threshold=0.6)
    assert one(reward).value == 0.3


@pytest.mark.parametrize(
    ("policy", "expected_value", "expected_failure"),
    [
        ("omit", 0.5, None),  # b missing: a's weight renormalised to the whole
        ("fail", None, "timeout"),  # the component's failure type carries through
        ("value", 0.5 * 0.5 + 0.5 * -1.0, None),  # counted as failure_value
    ],
)
def test_failure_policies(
    policy: str, expected_value: float | None, expected_failure: str | None
) -> None:
    reward = Combined(
        components=[
            Component(name="a", reward=Fixed(value=0.5), weight=0.5),
            Component(name="b", reward=Fixed(value=None), weight=0.5),
        ],
        on_failure=policy,  # type: ignore[arg-type]
        failure_value=-1.0,
    )
    s = one(reward)
    assert s.value == (pytest.approx(expected_value) if expected_value is not None else None)
    assert (s.failure.type if s.failure else None) == expected_failure
    assert s.components["b"] is None


@pytest.mark.parametrize(
    ("on_none", "policy"), [("skip", "omit"), ("fail", "fail"), ("value", "value")]
)
def test_on_none_is_the_deprecated_spelling_of_on_failure(on_none: str, policy: str) -> None:
    parts = {"a": (Fixed(value=0.5), 0.5), "b": (Fixed(value=None), 0.5)}
    with pytest.warns(DeprecationWarning, match=rf"on_none='{on_none}'.*on_failure='{policy}'"):
        old = referee.weighted(parts, on_none=on_none, none_value=-1.0)  # type: ignore[arg-type]
    new = referee.weighted(parts, on_failure=policy, failure_value=-1.0)  # type: ignore[arg-type]
    assert (old.on_failure, old.failure_value) == (policy, -1.0)
    assert one(old).value == one(new).value
    with pytest.warns(DeprecationWarning, match="on_none='skip' is deprecated") as caught:
        Combined(components=[Component(name="a", reward=Fixed(value=1.0))], on_none="skip")
    assert caught[0].filename == __file__  # the warning points at the caller's line
    with pytest.raises(ValueError, match="give on_failure='omit' alone"):
        referee.mean(parts, on_failure="omit", on_none="fail")


def test_a_missing_component_fails_the_total_by_default() -> None:
    """The fix of the silent pass: a 0.1 bonus was the whole reward where the 0.9 component
    had no value (its weight renormalised away); now the total fails, naming it."""
    parts = {"answer": (Fixed(value=None), 0.9), "bonus": (Fixed(value=1.0), 0.1)}
    s = one(referee.weighted(parts))
    assert s.value is None and s.failure is not None
    assert (s.failure.type, s.failure.where) == ("timeout", "answer")
    assert s.failure.message == "answer: no value"
    assert s.skipped == ("bonus",)  # stopped there, as under on_none: fail


@pytest.mark.parametrize(
    ("combinator", "kwargs"),
    [
        (referee.weighted, {}),
        (referee.mean, {}),
        (referee.minimum, {}),
        (referee.maximum, {}),
        (referee.product, {}),
    ],
)
def test_every_combinator_fails_by_default(combinator, kwargs) -> None:  # type: ignore[no-untyped-def]
    s = one(combinator({"a": Fixed(value=None), "b": Fixed(value=1.0, name="b")}, **kwargs))
    assert s.value is None and s.failure is not None and s.failure.where == "a"


def test_a_component_policy_wins_over_the_combination_default() -> None:
    judge = Component(name="judge", reward=Fixed(value=None), weight=0.5, on_failure="omit")
    score_ = Component(name="score", reward=Fixed(value=None), weight=0.5,
                       on_failure="value", failure_value=0.25)  # fmt: skip
    kept = Component(name="kept", reward=Fixed(value=1.0), weight=1.0)
    s = one(Combined(components=[judge, score_, kept]))  # the default is "fail"
    assert s.value == pytest.approx((0.5 * 0.25 + 1.0) * 2.0 / 1.5)  # judge's weight spread
    assert s.failure is None
    assert s.reason is not None and s.reason.startswith(
        "judge omitted (no value; on_failure: omit); score counted as 0.25"
    )
    # and the other way round: an omitting combination, one component that must not be missing
    must = Component(name="must", reward=Fixed(value=None), on_failure="fail")
    s = one(Combined(components=[must, kept], on_failure="omit"))
    assert s.value is None and s.failure is not None and s.failure.where == "must"


def test_component_policy_options_are_checked() -> None:
    with pytest.raises(ValueError, match="a gate cannot be omitted"):
        Component(name="g", reward=Fixed(value=1.0), gate=True, on_failure="omit")
    with pytest.raises(ValueError, match=r"failure_value 0\.5 is counted only under"):
        Component(name="c", reward=Fixed(value=1.0), on_failure="omit", failure_value=0.5)
    with pytest.raises(ValueError, match="failure_value must be a finite number"):
        Component(name="c", reward=Fixed(value=1.0), failure_value=math.nan)
    one_of = re.escape("on_failure must be one of fail | omit | value")
    with pytest.raises(ValueError, match=one_of):
        Component(name="c", reward=Fixed(value=1.0), on_failure="skip")  # type: ignore[arg-type]


def test_a_gate_with_no_value_fails_unless_its_policy_is_value() -> None:
    def gated(**options: object) -> Combined:
        return Combined(
            components=[
                Component(
                    name="g",
                    reward=Fixed(value=None),
                    weight=0.0,
                    gate=True,
                    threshold=0.5,
                    **options,
                ),  # type: ignore[arg-type]
                Component(name="then", reward=Fixed(value=1.0)),
            ],
            on_failure="omit",  # a gate ignores "omit": with no value it cannot decide
            floor=-1.0,
        )

    s = one(gated())
    assert s.value is None and s.failure is not None and s.failure.where == "g"
    assert one(gated(on_failure="value", failure_value=0.0)).value == -1.0  # decided: shut
    assert one(gated(on_failure="value", failure_value=1.0)).value == 1.0  # decided: open


def test_a_cascade_falls_through_and_fails_only_when_none_decides() -> None:
    first, last = Fixed(value=None, name="first"), Fixed(value=None, name="last")
    s = one(referee.cascade(first, last))
    assert s.value is None and s.failure is not None and s.failure.where == "last"
    assert first.calls == ["r1"] and last.calls == ["r1"]  # "fail" did not stop at the first
    s = one(referee.cascade(Fixed(value=None, name="a"), Fixed(value=0.3, name="b")))
    assert s.value == 0.3 and s.failure is None
    s = one(referee.cascade(Fixed(value=None, name="a"), Fixed(value=None, name="b"),
                            on_failure="value", failure_value=0.1))  # fmt: skip
    assert s.value == 0.1 and s.failure is None


def test_all_components_failing_fails_the_total() -> None:
    s = one(referee.weighted({"a": Fixed(value=None), "b": Fixed(value=None)}))
    assert s.value is None and s.failure is not None and s.failure.type == "timeout"


def test_gate_without_value_fails_the_total() -> None:
    s = one(referee.gate(Fixed(value=None), Fixed(value=1.0, name="then")))
    assert s.value is None and s.failure is not None


def test_zero_weight_component_alone_is_not_a_silent_zero() -> None:
    # gate passes (weight 0) but the only weighted component has no value
    s = one(referee.gate(Fixed(value=1.0), Fixed(value=None, name="then")))
    assert s.value is None and s.failure is not None


@pytest.mark.parametrize(
    ("combinator", "expected"),
    [
        (referee.minimum, 0.2),
        (referee.maximum, 0.9),
        (referee.product, 0.2 * 0.9 * 0.5),
        (referee.mean, (0.2 + 0.9 + 0.5) / 3),
    ],
)
def test_simple_combinators(combinator, expected: float) -> None:  # type: ignore[no-untyped-def]
    reward = combinator({"a": Fixed(value=0.2), "b": Fixed(value=0.9), "c": Fixed(value=0.5)})
    assert one(reward).value == pytest.approx(expected)


def test_cascade_runs_fallback_only_where_needed() -> None:
    cheap, judge = Fixed(value=None, name="cheap"), Fixed(value=0.7, name="judge")
    s = one(referee.cascade(cheap, judge))
    assert s.value == 0.7 and cheap.calls == ["r1"] and judge.calls == ["r1"]
    cheap2, judge2 = Fixed(value=1.0, name="cheap"), Fixed(value=0.7, name="judge")
    s2 = one(referee.cascade(cheap2, judge2))
    assert s2.value == 1.0 and judge2.calls == [] and s2.skipped == ("judge",)


@pytest.mark.parametrize(
    ("value", "kwargs", "expected"),
    [
        (0.5, {"low": 0.0, "high": 1.0}, 0.5),
        (1.5, {"low": 0.0, "high": 1.0}, 1.0),
        (-3.0, {"low": -1.0}, -1.0),
    ],
)
def test_clip(value: float, kwargs: dict[str, float], expected: float) -> None:
    assert one(referee.clip(Fixed(value=value), **kwargs)).value == expected


def test_scale_keeps_none() -> None:
    assert one(referee.scale(Fixed(value=0.5), 2.0, offset=1.0)).value == 2.0
    assert one(referee.scale(Fixed(value=None), 2.0)).value is None


def test_duplicate_component_names_are_rejected() -> None:
    with pytest.raises(ValueError, match="unique"):
        Combined(
            components=[
                Component(name="a", reward=Fixed(value=1)),
                Component(name="a", reward=Fixed(value=1)),
            ]
        )


def test_combination_pickles() -> None:
    reward = referee.weighted({"a": (Fixed(value=0.5), 2.0)})
    assert one(pickle.loads(pickle.dumps(reward))).value == 1.0


# --- properties ----------------------------------------------------------------------------

values = st.one_of(st.none(), st.floats(-10, 10, allow_nan=False))
weights = st.floats(0.01, 10)


@given(st.lists(st.tuples(values, weights), min_size=1, max_size=6))
def test_weighted_omit_is_renormalised_sum(parts: list[tuple[float | None, float]]) -> None:
    reward = referee.weighted(
        {f"c{i}": (Fixed(value=v), w) for i, (v, w) in enumerate(parts)}, on_failure="omit"
    )
    s = one(reward)
    present = [(v, w) for v, w in parts if v is not None]
    if not present:
        assert s.value is None and s.failure is not None
        return
    expected = (
        sum(v * w for v, w in present) * sum(w for _, w in parts) / sum(w for _, w in present)
    )
    assert s.value is not None and math.isclose(s.value, expected, rel_tol=1e-9, abs_tol=1e-9)
    assert len(s.components) == 2 * len(parts) - (len(parts) - len(present))


@given(
    st.lists(st.tuples(values, weights, st.booleans()), min_size=1, max_size=6), st.floats(-1, 0)
)
def test_gates_stop_at_first_failing_gate(
    parts: list[tuple[float | None, float, bool]], floor: float
) -> None:
    rewards = [Fixed(value=v, name=f"c{i}") for i, (v, _, _) in enumerate(parts)]
    reward = Combined(
        components=[
            Component(name=f"c{i}", reward=r, weight=w, gate=g, threshold=0.0)
            for i, (r, (_, w, g)) in enumerate(zip(rewards, parts, strict=True))
        ],
        floor=floor,
        on_failure="omit",  # a non-gate's None is left out: only the gates stop a rollout
    )
    s = one(reward)
    stop = next((i for i, (v, _, g) in enumerate(parts) if g and (v is None or v < 0.0)), None)
    if stop is None:
        assert all(r.calls == ["r1"] for r in rewards)
        assert s.skipped == ()
        return
    assert all(r.calls == ["r1"] for r in rewards[: stop + 1])
    assert all(r.calls == [] for r in rewards[stop + 1 :])
    assert s.skipped == tuple(f"c{i}" for i in range(stop + 1, len(parts)))
    if parts[stop][0] is None:
        assert s.value is None and s.failure is not None
    else:
        assert s.value == floor


@given(st.lists(values, min_size=1, max_size=6))
def test_fail_policy_fails_iff_any_component_fails(vals: list[float | None]) -> None:
    # "fail" is the default: nothing to say
    s = one(referee.Combined(
        components=[Component(name=f"c{i}", reward=Fixed(value=v)) for i, v in enumerate(vals)],
    ))  # fmt: skip
    assert (s.value is None) == (None in vals)
    if None in vals:  # named: the first component with no value
        assert s.failure is not None and s.failure.where == f"c{vals.index(None)}"


@given(
    st.lists(st.floats(-5, 5, allow_nan=False), min_size=1, max_size=5),
    st.floats(-2, 2),
    st.floats(-2, 2),
)
def test_clip_bounds_hold(vals: list[float], low: float, high: float) -> None:
    low, high = min(low, high), max(low, high)
    s = one(
        referee.clip(referee.mean({f"c{i}": Fixed(value=v) for i, v in enumerate(vals)}), low, high)
    )
    assert s.value is not None and low <= s.value <= high


@dataclass(kw_only=True)
class Waits(referee.AsyncReward):
    """An async component (a judge stands behind such): records the order it saw rollouts."""

    name: str = "waits"
    seen: list[str] = field(default_factory=list)

    async def evaluate(self, rollout: Rollout) -> Score:
        self.seen.append(rollout.id)
        return Score(value=0.5)


def test_sync_runs_in_a_mixed_combination_score_rollout_by_rollout(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """With an async component, the sync ones before it still score each rollout in turn,
    so they share its parse: 300 trajectories (more than the parse cache holds) are parsed
    300 times, not once per component."""
    import referee.trajectory as trajectory_module

    parsed: list[str] = []
    real_parse = trajectory_module._parse

    def counted(rollout: Rollout) -> trajectory_module.Trajectory:
        parsed.append(rollout.id)
        return real_parse(rollout)

    monkeypatch.setattr(trajectory_module, "_parse", counted)
    tools = [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]
    call = {"id": "1", "type": "function", "function": {"name": "f", "arguments": "{}"}}

    def agent(i: int) -> Rollout:
        turns = [{"role": "assistant", "content": "", "tool_calls": [call]},
                 {"role": "assistant", "content": str(i)}]  # fmt: skip
        return Rollout(id=str(i), completion=turns, reference=str(i), metadata={"tools": tools})  # type: ignore[arg-type]

    rollouts = [agent(i) for i in range(300)]
    waits = Waits()
    answer = {"type": "final_answer", "reward": {"type": "exact_match"}, "weight": 1.0}
    reward = referee.load({"combine": "weighted", "components": {
        "process": {"type": "tool_use", "weight": 1.0}, "answer": answer}})  # fmt: skip
    assert isinstance(reward, Combined)
    mixed = Combined(components=[*reward.components, Component(name="waits", reward=waits)])
    scores = referee.score(mixed, rollouts)
    assert sorted(parsed, key=int) == [str(i) for i in range(300)]  # each parsed once
    assert all(s.value == pytest.approx(1.0 + 1.0 + 0.5) for s in scores)
    assert sorted(waits.seen, key=int) == [str(i) for i in range(300)]


@pytest.mark.parametrize("weights", [(0.6, 0.3, 0.1), (0.1, 0.2, 0.7), (0.05, 0.15, 0.8)])
def test_a_perfect_weighted_score_is_one_not_float_noise(weights: tuple[float, ...]) -> None:
    """Weights that add to 1 and components that all give 1 total 1.0, not 0.9999999999999999
    (what TRL received, issue 46); per-step totals too. A total near, not at, a whole number
    is left alone."""
    full = referee.reward(lambda r: 1.0)
    combined = referee.weighted({f"c{i}": (full, w) for i, w in enumerate(weights)})
    [score] = referee.score(combined, [Rollout(id="1", completion="x")])
    assert score.value == 1.0
    assert referee.compose.tidy(1 - 1e-9) == 1 - 1e-9 and referee.compose.tidy(2.2e-17) == 0.0


@pytest.mark.parametrize("weight", ["0.5", "high", True, None])
def test_a_weight_that_is_no_number_is_refused_naming_the_component(weight: object) -> None:
    """Python refuses what YAML refuses (issue 46: ``"0.5"`` was accepted, ``"high"`` gave a
    bare ValueError from float())."""
    full = referee.reward(lambda r: 1.0)
    with pytest.raises(ValueError, match=r"component a: weight must be a number, got "):
        referee.weighted({"a": (full, weight)})  # type: ignore[dict-item]
