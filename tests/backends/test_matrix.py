"""Every reward type through every door: the same number, or a clear refusal at load.

A type is done when it gives the same number through every entry point. The cells come from the
registry: each registered type's scoring example (its docstring's ``Scores:`` section) crossed with
each door of `tests.support.doors` (the Python API, the CLI, ``referee serve`` and its protocols,
TRL, verl's functions and managers, OpenRLHF, Ray), so a new type joins by being registered, with no
test written here. Each cell checks the door's value for every rollout of the example against the
value the example states, to 1e-9 (after a cast to float32 where the trainer keeps float32: verl's
managers), with no failure flag; a spec that needs what a door cannot carry (a group reward where
rollouts come one at a time, a trajectory reward where the response arrives as text, a token count
where none arrives) must be refused at load instead, with an error saying so. Each door runs all
selected types once (`tests.support.matrix.Context`), each type under a timeout, so a door that
hangs fails its cells and not the suite.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("trl", reason="the trl extra is not installed")
pytest.importorskip("aiohttp", reason="the serve extra is not installed")

from tests.support.doors import DOORS, Door, cell, refusal_words
from tests.support.extras import needs
from tests.support.matrix import Case, Context, Outcome, example_types, grouped_type, prepared_cases

pytestmark = needs("verl", reason="the verl extra is not installed")

TYPES = example_types()
CELLS = [pytest.param(name, door, id=f"{name}-{door.name}") for name in TYPES for door in DOORS]


@pytest.fixture(scope="module")
def matrix(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, local_ray: None
) -> Iterator[Context]:
    """Every selected type's example prepared, and the doors' outcomes as they are asked."""
    selected = {
        (item.callspec.params["name"], item.callspec.params["door"].name)
        for item in request.session.items
        if item.module is request.module and hasattr(item, "callspec")
    }
    names = sorted({name for name, _ in selected})
    root = tmp_path_factory.mktemp("matrix")
    with prepared_cases(names, root / "cases", request) as cases:
        context = Context(cases, root, selected)
        context.start()
        context.run_in_process(DOORS)
        yield context
        context.close()


def _equal(got: float | None, want: float, f32: bool) -> bool:
    if got is None or math.isnan(got):
        return False
    if f32:
        return bool(np.float32(got) == np.float32(want))
    return math.isclose(got, want, rel_tol=0.0, abs_tol=1e-9)


def _why(case: Case, door: Door, outcome: Outcome, i: int) -> str:
    """What the door could not carry of rollout `i`, where that explains a difference."""
    rollout = case.rollouts[i]
    lost = []
    if "messages" in door.loses and not isinstance(rollout.completion, str):
        lost.append("its completion is a trajectory (chat messages), sent as text")
    tokens = {"completion_tokens", "completion_ids"} & set(rollout.metadata)
    if "tokens" in door.loses and tokens:
        lost.append("no token count of the response reaches the reward here")
    rest = sorted(set(rollout.metadata) - tokens)
    if "metadata" in door.loses and rest:
        lost.append(f"the door carries no metadata ({rest})")
    note = outcome.notes[i] if outcome.notes and i < len(outcome.notes) else ""
    return "; ".join([*lost, *([note] if note else [])])


@pytest.mark.parametrize(("name", "door"), CELLS)
def test_the_same_number_through_every_door(matrix: Context, name: str, door: Door) -> None:
    case = matrix.cases[name]
    if case.skip is not None:
        pytest.skip(f"{name}: {case.skip}")
    outcome = matrix.outcome(door, name)
    if outcome.skipped is not None:
        pytest.skip(outcome.skipped)
    wants = case.needs | ({"group"} if grouped_type(name) else set())
    if cell(door, wants) == "refused":
        words = refusal_words(door, wants)
        assert outcome.refused is not None, (
            f"{name}'s example needs {sorted(wants)}, and {door.title} cannot carry "
            f"{words}: it must refuse the spec at load; it gave {outcome}"
        )
        said = outcome.refused.lower()
        assert all(w in said for w in words), f"the refusal does not say why ({words}): {outcome}"
        return
    assert outcome.error is None, f"{door.title} broke on {name}: {outcome.error}"
    assert outcome.refused is None, f"{door.title} refused {name}: {outcome.refused}"
    assert outcome.values is not None and outcome.failed is not None
    want = case.values
    assert len(outcome.values) == len(want), f"{len(outcome.values)} values for {len(want)}"
    wrong = [
        f"rollout {i}: {got!r}, not {w!r}{' (failed)' if failed else ''}"
        f"{f' [{why}]' if (why := _why(case, door, outcome, i)) else ''}"
        for i, (got, w, failed) in enumerate(zip(outcome.values, want, outcome.failed, strict=True))
        if failed or not _equal(got, w, door.f32)
    ]
    assert not wrong, f"{name} through {door.title}:\n  " + "\n  ".join(wrong)


def test_every_door_has_a_runner_and_every_type_is_a_case() -> None:
    from referee.spec.model import builtin_types
    from tests.support.matrix import FUNCTIONS, SERVE
    from tests.support.matrix_doors import DOORS_RUN

    assert {d.name for d in DOORS} == set(DOORS_RUN) | set(SERVE) | set(FUNCTIONS)
    assert set(builtin_types()) <= set(TYPES)  # tests/spec/test_examples.py says which lacks one


def test_the_docs_table_is_the_matrix() -> None:
    from docs.hooks import matrix_page

    page = matrix_page()
    for name in TYPES:
        assert f"[`{name}`]" in page
    for door in DOORS:
        if door.name != "api":
            assert door.title in page
    assert Path("docs/trainers/index.md").read_text().count("matrix.md") >= 1
