"""Every number finite, and no YAML bomb: a spec cannot make referee hand a trainer NaN, or
take the process's memory, however it is written.

The spec is the user's; these guard against mistakes and against specs from elsewhere (a
shared recipe, a spec in a dataset card) that a user loads without reading every line.
"""

from __future__ import annotations

import math
import resource
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

import referee
from referee import Component, SpecError
from referee.compose import Combined
from tests.support.hostile import BILLION_LAUGHS
from tests.support.rewards import Fixed, one

NAN, INF = math.nan, math.inf

# --- at load: a spec error naming the key path ---------------------------------------------


@pytest.mark.parametrize(
    ("spec", "path"),
    [
        # a component's weight and threshold
        ({"components": {"a": {"type": "json_valid", "weight": NAN}}}, "components.a.weight"),
        ({"components": {"a": {"type": "json_valid", "weight": INF}}}, "components.a.weight"),
        ({"components": {"a": {"type": "json_valid", "gate": True, "threshold": -INF}}},
         "components.a.threshold"),
        # a combination's floor and none_value
        ({"floor": NAN, "components": {"a": "json_valid"}}, "floor"),
        ({"none_value": INF, "components": {"a": "json_valid"}}, "none_value"),
        # a transform's scale, offset and clip
        ({"type": "json_valid", "scale": NAN}, "scale"),
        ({"type": "json_valid", "offset": -INF}, "offset"),
        ({"type": "json_valid", "clip": [0, NAN]}, "clip"),
        # an integer past float range is infinite as a float
        ({"type": "json_valid", "scale": 10**400}, "scale"),
        # a reward's own numeric option
        ({"type": "tool_use", "tool_error": NAN}, "tool_error"),
        # weights each finite whose sum is not
        ({"components": {"a": {"type": "json_valid", "weight": 1e308},
                         "b": {"type": "json_valid", "weight": 1e308}}}, ""),
    ],
)  # fmt: skip
def test_a_non_finite_number_is_a_spec_error(spec: dict[str, Any], path: str) -> None:
    with pytest.raises(SpecError) as caught:
        referee.load(spec)
    assert ".".join(map(str, caught.value.path)) == path
    assert "finite" in str(caught.value)


def test_yaml_nan_in_a_spec_file_names_the_file_and_key(tmp_path: Path) -> None:
    spec = tmp_path / "spec.yaml"
    spec.write_text("components:\n  valid: {type: json_valid, weight: .nan}\n")
    with pytest.raises(SpecError, match=r"spec\.yaml.*components\.valid\.weight"):
        referee.load(spec)


@pytest.mark.parametrize(
    "build",
    [
        lambda: referee.weighted({"a": (Fixed(value=1.0), NAN)}),
        lambda: Component(name="a", reward=Fixed(value=1.0), threshold=NAN),
        lambda: referee.weighted({"a": Fixed(value=1.0)}, floor=INF),
        lambda: referee.scale(Fixed(value=1.0), NAN),
        lambda: referee.clip(Fixed(value=1.0), low=-INF),
    ],
)
def test_a_non_finite_number_in_python_is_refused(build: Any) -> None:
    with pytest.raises(ValueError, match="must be a finite number"):
        build()


# --- at score time: a total that overflows is a failure naming its component ---------------


def test_an_overflowing_weighted_total_is_a_failure_naming_the_component() -> None:
    s = one(referee.weighted({"big": (Fixed(value=1e308), 10.0), "ok": (Fixed(value=1.0), 1.0)}))
    assert s.value is None and s.failure is not None
    assert (s.failure.type, s.failure.where) == ("invalid_value", "big")


def test_an_overflowing_scale_is_a_failure() -> None:
    s = one(referee.scale(Fixed(value=1e308, name="big"), 10.0))
    assert s.value is None and s.failure is not None
    assert (s.failure.type, s.failure.where) == ("invalid_value", "big")


def test_an_overflowing_product_is_a_failure() -> None:
    s = one(referee.product({"a": Fixed(value=1e200), "b": Fixed(value=1e200)}))
    assert s.value is None and s.failure is not None and s.failure.type == "invalid_value"


finite = st.floats(allow_nan=False, allow_infinity=False)
anything = st.floats()  # NaN and the infinities included


@given(
    values=st.lists(finite, min_size=1, max_size=4),
    weights=st.lists(anything, min_size=4, max_size=4),
    mode=st.sampled_from(["weighted", "mean", "min", "max", "product"]),
    factor=anything,
)
def test_a_total_is_a_finite_number_or_a_failure(
    values: list[float], weights: list[float], mode: str, factor: float
) -> None:
    """Whatever the numbers: the reward is refused when built, or every total it gives is a
    finite number or a Failure, never NaN or an infinity."""
    parts = [
        Component(name=f"c{i}", reward=Fixed(value=v), weight=w)
        for i, (v, w) in enumerate(zip(values, weights, strict=False))
    ] if all(map(math.isfinite, weights)) else None  # fmt: skip
    if parts is None:
        with pytest.raises(ValueError, match="must be a finite number"):
            Component(name="c", reward=Fixed(value=1.0), weight=next(
                w for w in weights if not math.isfinite(w)))  # fmt: skip
        return
    try:
        reward: referee.Reward = Combined(components=parts, mode=mode)  # type: ignore[arg-type]
        reward = referee.scale(reward, factor)
    except ValueError:
        assert not math.isfinite(factor) or mode in ("weighted", "mean")  # refused when built
        return
    s = one(reward)
    if s.value is None:
        assert s.failure is not None
    else:
        assert math.isfinite(s.value)


# --- YAML bombs -----------------------------------------------------------------------------


def _load_capped(spec: Path) -> subprocess.CompletedProcess[str]:
    """Load `spec` in a child process held to 2 GB of address space: a bomb that expands
    ends it (a MemoryError), not the test run."""

    def cap() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (2 * 2**30, 2 * 2**30))

    code = "import sys, referee\ntry:\n    referee.load(sys.argv[1])\n" \
           "except referee.SpecError as e:\n    print(e)\n"  # fmt: skip
    return subprocess.run(
        [sys.executable, "-c", code, str(spec)],
        capture_output=True, text=True, timeout=120, preexec_fn=cap,
    )  # fmt: skip


def test_a_billion_laughs_spec_is_refused_before_it_expands(tmp_path: Path) -> None:
    spec = tmp_path / "bomb.yaml"
    spec.write_text(BILLION_LAUGHS)
    done = _load_capped(spec)
    assert done.returncode == 0, done.stderr[-2000:]
    assert str(spec) in done.stdout and "billion laughs" in done.stdout


def test_a_recursive_alias_is_refused(tmp_path: Path) -> None:
    spec = tmp_path / "loop.yaml"
    spec.write_text("type: json_valid\nextra: &x [1, *x]\n")
    with pytest.raises(SpecError, match="refer to themselves"):
        referee.load(spec)


def test_a_few_aliases_still_load(tmp_path: Path) -> None:
    spec = tmp_path / "ok.yaml"
    spec.write_text(
        "components:\n"
        "  a: &valid {type: json_valid, weight: 0.5}\n"
        "  b: *valid\n"
    )  # fmt: skip
    s = one(referee.load(spec))
    assert s.value == 0.0 and set(s.components) == {"a", "b"}


def test_a_key_given_twice_is_refused_naming_both_lines(tmp_path: Path) -> None:
    """YAML keeps the last of two equal keys: two components named `answer` became one."""
    spec = tmp_path / "twice.yaml"
    spec.write_text(
        "components:\n"
        "  answer: {type: math_answer}\n"
        "  fmt: {type: json_valid}\n"
        "  answer: {type: exact_match}\n"
    )  # fmt: skip
    with pytest.raises(SpecError, match=r"twice.yaml:4: the key 'answer' is given twice .*2 and 4"):
        referee.load(spec)
    (tmp_path / "j.json").write_text('{"type": "json_valid", "type": "math_answer"}')
    with pytest.raises(SpecError, match="the key 'type' is given twice"):
        referee.load(tmp_path / "j.json")


def test_a_merge_key_and_equal_values_under_different_keys_still_load(tmp_path: Path) -> None:
    spec = tmp_path / "merge.yaml"
    spec.write_text(
        "components:\n"
        "  a: &base {type: json_valid, weight: 0.5}\n"
        "  b: {<<: *base, weight: 0.25}\n"
    )  # fmt: skip
    assert set(one(referee.load(spec)).components) == {"a", "b"}


def test_weights_whose_sum_overflows_are_refused_only_where_weights_count() -> None:
    """Found by the property above: mode min with two weights near the float maximum was
    refused ("the sum of the weights must be a finite number"), though min never weighs."""
    parts = [Component(name=f"c{i}", reward=Fixed(value=0.5), weight=1.7e308) for i in range(2)]
    assert one(Combined(components=parts, mode="min")).value == 0.5
    with pytest.raises(ValueError, match="the sum of the weights must be a finite number"):
        Combined(components=parts, mode="weighted")
