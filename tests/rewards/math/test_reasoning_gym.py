"""reasoning_gym: referee's value is the task's own score_answer, on every task family."""

from __future__ import annotations

import copy
import inspect
import json
import pickle
import re
import sys
from decimal import Decimal
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

import referee
from referee.rewards import ReasoningGym
from referee.rewards.math.reasoning_gym import EVALS_ANSWER, entry_reference
from tests.support.hostile import HOSTILE, score_guarded
from tests.support.rollouts import make

rg = pytest.importorskip("reasoning_gym")
from reasoning_gym.composite import DatasetSpec  # noqa: E402 - after the skip
from reasoning_gym.factory import DATASETS  # noqa: E402
from reasoning_gym.utils import extract_answer  # noqa: E402

TASKS = sorted(name for name in DATASETS if name != "composite")
ENTRIES_PER_TASK = 4


def _completion(answer: str | None) -> str:
    if answer is None:
        return "<think>I give up</think> no tagged answer"
    return f"<think>working it out</think>\n<answer> {answer} </answer>"


def _direct(score_answer: Any, completion: str, entry: dict[str, Any]) -> tuple[float | None, str]:
    """reasoning-gym alone: its extract_answer, then the task's score_answer (or what it raised)."""
    try:
        return float(score_answer(extract_answer(completion), entry)), ""
    except Exception as exc:
        return None, f"{type(exc).__name__}: {exc}"


@pytest.mark.parametrize("task", TASKS)
def test_every_task_scores_as_its_score_answer(task: str) -> None:
    """Right answers (the entry's), wrong ones (another entry's, text), empty and missing ones.

    The rollout carries the entry's JSON copy, as a rollout file does; reasoning-gym scores the
    entry as it made it (tuples and all), with the dataset instance that made it.
    """
    dataset = rg.create_dataset(task, seed=11, size=ENTRIES_PER_TASK)
    entries = [dataset[i] for i in range(ENTRIES_PER_TASK)]
    answers = {str(e["answer"]) for e in entries if e["answer"] is not None}
    candidates: list[str | None] = [*sorted(answers), "", "not an answer", None]
    reward = ReasoningGym(allow_eval=True)
    for entry in entries:
        reference = entry_reference(entry)
        before = copy.deepcopy(reference)
        for answer in candidates:
            completion = _completion(answer)
            expected, raised = _direct(dataset.score_answer, completion, entry)
            score = referee.score(reward, [make(completion, reference)])[0]
            if raised:  # the scorer raised: a Failure with its message, never a number
                assert score.failure is not None and score.failure.type == "error", score
                assert raised.split(":")[0] in score.failure.message
            else:
                assert score.failure is None, score.failure
                assert score.value == expected, (task, answer, score.reason)
        assert reference == before, "scoring changed the rollout's reference"


def test_the_right_answer_scores_one_on_most_tasks() -> None:
    """A sanity floor under the agreement test: it compares real verdicts, not zeros."""
    ones = 0
    answered = 0
    reward = ReasoningGym(allow_eval=True)
    for task in TASKS:
        entry = rg.create_dataset(task, seed=2, size=1)[0]
        if entry["answer"] is None:
            continue  # tasks with many right answers (graph_color, rush_hour, ...) give none
        answered += 1
        s = referee.score(reward, [make(_completion(str(entry["answer"])), entry_reference(entry))])
        ones += s[0].value == 1.0
    assert answered > 90 and ones >= answered - 3, (ones, answered)


def test_arc_right_answers_score_one_on_the_json_copy() -> None:
    # reasoning-gym alone gives 0.05 here: its grids are tuples, JSON's are lists.
    for task in ("arc_agi", "rearc"):
        entry = rg.create_dataset(task, seed=1, size=1)[0]
        copy_ = entry_reference(entry)
        assert rg.get_score_answer_fn(task)(entry["answer"], copy_) == 0.05
        s = referee.score(ReasoningGym(), [make(_completion(entry["answer"]), copy_)])[0]
        assert s.value == 1.0


def test_composite_entries_score_with_their_own_task() -> None:
    specs = [DatasetSpec("chain_sum", 1.0, {}), DatasetSpec("leg_counting", 1.0, {})]
    composite = rg.create_dataset("composite", size=8, seed=5, datasets=specs)
    reward = ReasoningGym()
    for i in range(8):
        entry = composite[i]
        for answer in (entry["answer"], "7"):
            completion = _completion(answer)
            s = referee.score(reward, [make(completion, entry_reference(entry))])[0]
            assert s.value == composite.score_answer(extract_answer(completion), entry)


def test_configs_build_the_scorer_the_entries_were_made_with() -> None:
    # decimal_arithmetic's tolerance is its config's max_num_decimal_places.
    config = {"min_num_decimal_places": 1, "max_num_decimal_places": 1, "precision": 6}
    dataset = rg.create_dataset("decimal_arithmetic", seed=3, size=1, **config)
    entry = dataset[0]
    near = str(Decimal(entry["answer"]) + Decimal("0.05"))
    rollout = make(_completion(near), entry_reference(entry))
    configured = ReasoningGym(configs={"decimal_arithmetic": config})
    assert referee.score(configured, [rollout])[0].value == dataset.score_answer(near, entry) == 1
    # with reasoning-gym's defaults (get_score_answer_fn), as without configs: 0
    assert referee.score(ReasoningGym(), [rollout])[0].value == 0.0


# -- the answer -------------------------------------------------------------------------------

_PIECES = st.sampled_from(
    [
        "<answer>",
        "</answer>",
        "<answer",
        "answer>",
        "</ANSWER>",
        " ",
        "\n",
        "\t",
        "\u2003",
        "x",
        "42",
    ]
)


@given(st.lists(_PIECES, max_size=12).map("".join))
def test_answer_tag_extraction_is_reasoning_gyms(text: str) -> None:
    assert ReasoningGym()._answer(text) == extract_answer(text)


@given(st.lists(st.sampled_from(["<answer>", "</answer>", " x ", "\n"]), min_size=30).map("".join))
def test_many_tags_take_the_linear_engine_to_the_same_answer(text: str) -> None:
    # More than four opening tags: the same pattern on RE2 rather than reasoning-gym's `re`.
    assert ReasoningGym()._answer(text) == extract_answer(text)


def test_extract_full_passes_the_whole_completion() -> None:
    entry = rg.create_dataset("chain_sum", seed=1, size=1)[0]
    reward = ReasoningGym(extract="full")
    s = referee.score(reward, [make(str(entry["answer"]), entry_reference(entry))])[0]
    assert s.value == 1.0


def test_an_answer_over_max_answer_chars_scores_zero_without_the_scorer() -> None:
    entry = rg.create_dataset("chain_sum", seed=1, size=1)[0]
    reward = ReasoningGym(max_answer_chars=10)
    s = referee.score(reward, [make(_completion("1" * 11), entry_reference(entry))])[0]
    assert s.value == 0.0 and s.reason is not None and "over max_answer_chars (10)" in s.reason


# -- the reference ----------------------------------------------------------------------------


def _entry(task: str = "chain_sum") -> dict[str, Any]:
    return entry_reference(rg.create_dataset(task, seed=1, size=1)[0])  # type: ignore[no-any-return]


def _anonymous(task: str = "chain_sum") -> dict[str, Any]:
    entry = _entry(task)
    del entry["metadata"]["source_dataset"]
    return entry


@pytest.mark.parametrize(
    ("options", "reference"),
    [
        ({}, _entry()),  # the entry names its task
        ({}, {"dataset": "chain_sum", "entry": _anonymous()}),
        ({}, {"dataset": "chain_sum", "entry": _entry()}),  # both, agreeing
        ({"dataset": "chain_sum"}, _anonymous()),  # the spec names it
        ({"reference_key": "task"}, {"task": _entry(), "id": 1}),
    ],
)
def test_reference_shapes(options: dict[str, Any], reference: Any) -> None:
    entry = reference.get("task", reference)
    entry = entry.get("entry", entry)
    s = referee.score(ReasoningGym(**options), [make(_completion(entry["answer"]), reference)])[0]
    assert s.value == 1.0, s


def test_a_json_string_reference_is_read_as_its_object() -> None:
    entry = _entry()
    completion = _completion(entry["answer"])
    for reference in (json.dumps(entry), json.dumps({"dataset": "chain_sum", "entry": entry})):
        assert referee.score(ReasoningGym(), [make(completion, reference)])[0].value == 1.0


@pytest.mark.parametrize(
    ("options", "reference", "message"),
    [
        ({}, None, "no reference"),
        ({}, "{not json", "reference is a string but not a JSON object"),
        ({}, "12", "reference must be a reasoning-gym entry"),
        ({}, {"entry": "12"}, "reference.entry must be an object (the entry), got '12'"),
        ({}, {"answer": "1"}, "reference has no 'metadata': not a reasoning-gym entry"),
        ({}, {"question": "q"}, "has no 'answer' or 'metadata'"),
        ({}, {"answer": "1", "metadata": [1]}, "reference.metadata must be an object"),
        ({}, _anonymous(), "no reasoning-gym task named: reference.metadata has no"),
        (
            {},
            {"dataset": "chain_summ", "entry": _anonymous()},
            "reference.dataset: 'chain_summ' is not a reasoning-gym task (did you mean "
            "'chain_sum'?)",
        ),
        (
            {},
            {"answer": "1", "metadata": {"source_dataset": 5}},
            "reference.metadata.source_dataset must be a task name, got 5",
        ),
        (
            {"dataset": "leg_counting"},
            _entry(),
            "the task names disagree: reference.metadata.source_dataset is 'chain_sum', "
            "the spec's dataset is 'leg_counting'",
        ),
        (
            {"reference_key": "task"},
            {"entry": _entry()},
            "reference has no key 'task'",
        ),
        (
            {"reference_key": "task"},
            {"task": {"dataset": "x", "entry": _anonymous()}},
            "reference['task'].dataset: 'x' is not a reasoning-gym task",
        ),
    ],
)
def test_a_bad_reference_is_not_applicable_naming_the_key(
    options: dict[str, Any], reference: Any, message: str
) -> None:
    s = referee.score(ReasoningGym(**options), [make("<answer>1</answer>", reference)])[0]
    assert s.value is None and s.failure is not None
    assert s.failure.type == "not_applicable"
    assert message in s.failure.message, s.failure.message


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"dataset": "chain_summ"}, "did you mean 'chain_sum'"),
        ({"dataset": "composite"}, "composite entries name their task"),
        ({"configs": {"nope": {}}}, "'nope' is not a reasoning-gym task"),
        ({"configs": {"chain_sum": {"bogus": 1}}}, "configs['chain_sum']: TypeError"),
        ({"configs": {"chain_sum": {"min_terms": 5, "max_terms": 2}}}, "configs['chain_sum']"),
        ({"dataset": "puzzle24"}, "set allow_eval: true"),
        ({"max_answer_chars": 0}, "max_answer_chars must be at least 1"),
        ({"extract": "boxed"}, "extract"),
    ],
)
def test_bad_options_fail_at_load(options: dict[str, Any], message: str) -> None:
    with pytest.raises(referee.SpecError, match="reasoning_gym") as info:
        referee.load({"type": "reasoning_gym", **options})
    assert message in str(info.value)


# -- scorers that run the answer as code -------------------------------------------------------

_RUNS_TEXT = {"eval", "exec", "parse_expr", "sympify", "S", "simplify", "expand", "nsimplify"}
# These eval the entry (the task's own data), never the answer.
_EVALS_ENTRY_ONLY = {"bitwise_arithmetic", "number_sorting"}


def _runs_text_as_code(cls: type[Any]) -> bool:
    """Whether score_answer, or reasoning-gym code it calls, calls eval or sympy's parsers."""
    seen: set[object] = set()
    stack: list[Any] = [cls.score_answer]
    while stack:
        fn = stack.pop()
        try:
            source = inspect.getsource(fn)
        except (OSError, TypeError):
            continue
        module = sys.modules.get(fn.__module__)
        for name in set(re.findall(r"\b(\w+)\(", source)):
            target = getattr(cls, name, None) or (vars(module).get(name) if module else None)
            if inspect.isfunction(target) and target.__module__.startswith("reasoning_gym"):
                if target not in seen:  # its own helper (propositional_logic's parse_expr)
                    seen.add(target)
                    stack.append(target)
            elif name in _RUNS_TEXT:
                return True
    return False


def test_evals_answer_is_the_installed_reasoning_gyms_list() -> None:
    found = {name for name in TASKS if _runs_text_as_code(DATASETS[name][0])}
    assert found - _EVALS_ENTRY_ONLY == EVALS_ANSWER


@pytest.mark.parametrize("task", sorted(EVALS_ANSWER))
def test_tasks_that_eval_the_answer_fail_closed(task: str) -> None:
    entry = entry_reference(rg.create_dataset(task, seed=1, size=1)[0])
    s = referee.score(ReasoningGym(), [make("<answer>__import__('os')</answer>", entry)])[0]
    assert s.value is None and s.failure is not None and s.failure.type == "sandbox"
    assert "allow_eval: true" in s.failure.message


# -- hostile completions, pickling, the missing package ----------------------------------------

HOSTILE_TASKS = [
    "arc_agi",
    "chain_sum",
    "knights_knaves",
    "prime_factorization",  # raises on a non-number
    "propositional_logic",
    "tower_of_hanoi",
    "word_sorting",
]


@pytest.mark.parametrize("extract", ["answer_tag", "full"])
@pytest.mark.parametrize("task", HOSTILE_TASKS)
def test_hostile_completions_score_as_reasoning_gym_or_fail_cleanly(
    task: str, extract: str
) -> None:
    dataset = rg.create_dataset(task, seed=4, size=1)
    entry = dataset[0]
    reward = ReasoningGym(extract=extract)  # type: ignore[arg-type]
    for label, text in HOSTILE.items():
        score = score_guarded(reward, text, entry_reference(entry))
        assert (score.value is None) == (score.failure is not None), label
        answer = reward._answer(text)  # reasoning-gym's extract_answer (tested above)
        if answer is not None and len(answer) > reward.max_answer_chars:
            assert score.value == 0.0, label  # the documented bound
            continue
        if score.failure is not None and score.failure.type == "timeout":
            continue  # past the deadline: a Failure, and the battery moves on
        try:
            expected = float(dataset.score_answer(answer, entry))
        except Exception:
            assert score.failure is not None and score.failure.type == "error", label
            continue
        assert score.value == expected, label


def test_pickle_round_trip_with_configs() -> None:
    reward = ReasoningGym(configs={"chain_sum": {"seed": 3}}, dataset="chain_sum")
    clone = pickle.loads(pickle.dumps(reward))
    assert clone == reward
    entry = _entry()
    rollouts = [make(_completion(a), entry) for a in (entry["answer"], "0", None)]
    assert referee.score(clone, rollouts) == referee.score(reward, rollouts)


def test_a_missing_reasoning_gym_says_which_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "reasoning_gym.factory", None)
    with pytest.raises(referee.MissingDependency, match=r'pip install "referee\[reasoning\]"'):
        ReasoningGym()
