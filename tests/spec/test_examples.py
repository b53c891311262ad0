"""Every built-in reward type has a scoring example (its docstring's ``Scores:`` section), and
the example spec gives each of its rollouts the value written with it, through `referee.score`.

A new type without one fails here; the conformance matrix (tests/backends/test_matrix.py) then
sends the same rollouts through every trainer's entry point.
"""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import pytest
import yaml

import referee
from referee.registry import register
from referee.reward import CheckReward, Score
from referee.rollout import Rollout
from referee.spec.examples import ScoringExample, missing, prepared
from referee.spec.model import builtin_types
from referee.spec.reference import type_reference
from tests.support.matrix import docker_for

BUILTIN = builtin_types()


@pytest.mark.parametrize("name", BUILTIN)
def test_every_type_has_a_varied_scoring_example(name: str) -> None:
    ref = type_reference(name)
    assert ref.scores is not None, (
        f"{name}: its docstring has no Scores: section (a ```yaml list of rollouts, each with "
        f"the value its Example spec gives it; see referee.spec.examples)"
    )
    values = [r.value for r in ref.scores.rollouts]
    assert len(values) >= 2, f"{name}: give at least a rollout that scores high and one low"
    assert len(set(values)) >= 2, f"{name}: every rollout of its example scores {values[0]}"
    assert f"{ref.scores.text.rstrip()}" in ref.markdown()  # `referee types NAME` shows it


@pytest.mark.parametrize("name", BUILTIN)
def test_the_example_spec_gives_each_rollout_its_value(
    name: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    ref = type_reference(name)
    assert ref.example is not None and ref.scores is not None
    why = missing(ref.scores.needs)
    if why:
        pytest.skip(f"{name}: {why}")
    with (
        docker_for(ref.scores, request) as engine,
        prepared(yaml.safe_load(ref.example), ref.scores, tmp_path, docker_host=engine) as run,
    ):
        scores = referee.score(referee.load(run.path), run.rollouts)
    for i, (score, want) in enumerate(zip(scores, run.values, strict=True)):
        assert score.failure is None, f"{name}: rollout {i} failed: {score.failure}"
        assert score.value is not None and math.isclose(score.value, want, abs_tol=1e-9), (
            f"{name}: rollout {i} scores {score.value!r}, its example says {want!r} "
            f"({score.reason})"
        )


@pytest.mark.parametrize(
    ("block", "says"),
    [
        ("- completion: x\n", "value must be"),  # no value
        ("- {completion: x, value: true}\n", "value must be"),  # a bool is no value
        ("[]\n", "lists no rollouts"),
        ("{rollouts: [{completion: x, value: 1}], extra: 1}\n", "unknown key 'extra'"),
        ("- {completion: x, value: 1, score: 1}\n", "unknown key 'score'"),
        ("{files: {../up.txt: x}, rollouts: [{value: 1}]}\n", "stay in the folder"),
        ("{judge: [{reply: x}], rollouts: [{value: 1}]}\n", "a judge rule is"),
        ("- {completion: 3, value: 1}\n", "not a rollout"),
    ],
)
def test_a_malformed_scores_block_says_what_is_wrong(block: str, says: str) -> None:
    with pytest.raises(ValueError, match=says):
        ScoringExample.parse(block, "mine")


@dataclasses.dataclass(kw_only=True)
class _Shouts(CheckReward):
    """1.0 when the completion is in capitals.

    Example:
        ```yaml
        type: test_shouts_plugin
        ```

    Scores:
        ```yaml
        - {completion: HELLO, value: 1.0}
        - {completion: hello, value: 0.0}
        ```
    """

    name: str = "shouts"

    def check(self, rollout: Rollout) -> Score:
        return Score(1.0 if rollout.completion_text.isupper() else 0.0)


def test_a_plugins_type_shows_and_runs_its_example_the_same_way(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from referee import registry

    monkeypatch.setattr(registry, "_types", dict(registry._types))
    register("test_shouts_plugin")(_Shouts)
    ref = type_reference("test_shouts_plugin")
    assert ref.plugin and ref.scores is not None
    assert "## Scores" in ref.markdown() and "completion: HELLO" in ref.markdown()
    assert ref.example is not None
    with prepared(yaml.safe_load(ref.example), ref.scores, tmp_path) as run:
        assert [s.value for s in referee.score(referee.load(run.path), run.rollouts)] == [1.0, 0.0]
