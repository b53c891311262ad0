"""No silent pass: a rollout missing what a component needs is never paid by the others alone.

The bug (issue 26): with the demo's math spec (`math_answer` 0.9, `format` 0.1), a rollout
with no reference, or its answer under another key, scored 1.0 with no failure: `math_answer`
had no value, the old default ``on_none: skip`` dropped it, and the weights were renormalised
over the 0.1 format bonus. The same everywhere the spec goes.

The table: specs (weighted, mean, min, cascade, gated) x inputs (no reference, reference
under another key, a reference of the wrong shape, a check that fails on its reference) x
entry points (Python, `referee score`, TRL's reward function, verl's `compute_score`, HTTP
``/score``). Each case gets no value and a Failure naming the component (TRL: None, which TRL
turns into NaN; verl: its `failure_value` with ``referee_failed`` set), or, where the spec
says ``on_failure: omit`` or ``value`` in so many words, what it chose.
"""

from __future__ import annotations

import asyncio
import json
import math
import os
import re
import signal
import subprocess
import sys
import urllib.request
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

import referee
from referee import Component, Rollout, Score
from referee.cli import main
from referee.errors import MissingInput
from referee.reward import Part, needs
from referee.rollouts.jsonl import RowOk
from referee.rollouts.needs import check_rows
from referee.rollouts.run import score_file, score_to_path

ROOT = Path(__file__).resolve().parents[1]
DEMO_MATH = ROOT / "referee" / "data" / "demo" / "math.yaml"

# --- the specs ------------------------------------------------------------------------------

ANSWER = {"type": "math_answer", "answer": "latex_or_expr", "timeout": 5}
FORMAT = {"type": "format", "preset": "think"}


def spec(kind: str, policy: str | None = None) -> dict[str, Any]:
    """One spec of the table; `policy` is the combination's on_failure, where said."""
    if kind == "weighted":  # the demo's own file, as `referee demo` scores it
        out: dict[str, Any] = yaml.safe_load(DEMO_MATH.read_text())
    elif kind in ("mean", "min"):
        out = {"name": kind, "combine": kind, "components": {"answer": ANSWER, "format": FORMAT}}
    elif kind == "cascade":  # a strict pattern first; the plain check decides where it cannot
        strict = {**ANSWER, "pattern": r"ANSWER:\s*(\S+)", "no_answer": "fail"}
        out = {"name": kind, "combine": "cascade",
               "components": {"strict": strict, "answer": ANSWER}}  # fmt: skip
    else:  # gated: the format is a gate, which alone paid 1.0
        out = {"name": kind, "combine": "weighted", "components": {
            "format": {**FORMAT, "gate": True, "weight": 0.2},
            "answer": {**ANSWER, "weight": 0.8},
        }}  # fmt: skip
    if policy is not None:
        out["on_failure"] = policy
    return out


SPECS = ["weighted", "mean", "min", "cascade", "gated"]
COMPLETION = "<think>2 + 2 = 4</think> The answer is $\\boxed{4}$."  # right, and well formed

# --- the inputs: what each row carries besides the completion -----------------------------

INPUTS: dict[str, tuple[Any, dict[str, Any], str]] = {
    # name: (reference, other columns, what the component's failure says)
    "no reference": (None, {}, "no reference to compare against"),
    "reference under another key": (None, {"answer": "4"}, "no reference to compare against"),
    "wrong shape": ({"value": 4}, {}, "needs a text or number reference"),
    "check fails": ("$$", {}, "could not be parsed"),  # a reference math-verify cannot read
}


def rollout(name: str) -> Rollout:
    reference, columns, _ = INPUTS[name]
    return Rollout(id="r", prompt="2 + 2?", completion=COMPLETION, reference=reference,
                   metadata=columns)  # fmt: skip


def assert_names_answer(value: float | None, failure: dict[str, Any] | None, why: str) -> None:
    """No value, and a Failure that names `answer` and says what it missed."""
    assert value is None, f"paid {value} with a component that could not score"
    assert failure is not None
    assert failure["where"] == "answer", failure
    assert failure["message"].startswith("answer: ") and why in failure["message"], failure


# --- the entry points: each scores one rollout and says what the trainer or user gets -----


def by_python(spec_: dict[str, Any], name: str, tmp: Path) -> tuple[float | None, Any]:
    [s] = referee.score(referee.load(spec_), [rollout(name)])
    return s.value, None if s.failure is None else s.failure.to_dict()


def by_cli(spec_: dict[str, Any], name: str, tmp: Path) -> tuple[float | None, Any]:
    spec_path = tmp / "spec.yaml"
    spec_path.write_text(yaml.safe_dump(spec_, sort_keys=False))
    r = rollout(name)
    good = {"id": "good", "prompt": r.prompt, "completion": COMPLETION, "reference": "4"}
    row = {"id": "r", "prompt": r.prompt, "completion": COMPLETION, "reference": r.reference,
           **r.metadata}  # fmt: skip
    src = tmp / "in.jsonl"
    # One row that has its reference: the file as a whole passes the check before scoring,
    # and the rule for each rollout is what is tested (a file with none: see below).
    src.write_text(json.dumps(good) + "\n" + json.dumps(row) + "\n")
    out = tmp / "out.jsonl"
    result = CliRunner().invoke(main, ["score", str(src), "--spec", str(spec_path), "-o",
                                       str(out), "-q"])  # fmt: skip
    assert result.exit_code == 0, result.output
    first, second = (json.loads(line) for line in out.read_text().splitlines())
    assert first["reward"] is not None  # the row with its reference scores
    return second["reward"], second["failure"]


def by_trl(spec_: dict[str, Any], name: str, tmp: Path) -> tuple[float | None, Any]:
    pytest.importorskip("trl", reason="the trl extra is not installed")
    from referee.backends.trl import reward_funcs

    r = rollout(name)
    [fn] = reward_funcs(spec_)
    columns = {"reference": [r.reference]} | {k: [v] for k, v in r.metadata.items()}
    extra: list[Any] = []
    out = fn(prompts=[r.prompt], completions=[COMPLETION], completion_ids=None,
             log_extra=lambda column, values: extra.extend(values) if column ==
             "referee_failure" else None, **columns)  # fmt: skip
    [value] = asyncio.run(out) if asyncio.iscoroutine(out) else out
    # None is what TRL turns into NaN and masks out of the group's mean.
    failure = None
    if extra[0] is not None:
        kind, message = extra[0].split(": ", 1)
        failure = {"type": kind, "message": message, "where": "answer" if message.startswith(
            "answer: ") else None}  # fmt: skip
    return value, failure


FAILURE_VALUE = -7.0  # verl's fallback, set apart from every real value


def by_verl(spec_: dict[str, Any], name: str, tmp: Path) -> tuple[float | None, Any]:
    pytest.importorskip("verl", reason="the verl extra is not installed")
    from referee.backends import verl

    r = rollout(name)
    result = verl.compute_score("math", COMPLETION, r.reference, {"index": 0, **r.metadata},
                                spec=spec_, failure_value=FAILURE_VALUE)  # fmt: skip
    if result["referee_failed"] == 1.0:
        assert result["score"] == FAILURE_VALUE  # the documented fallback, never 1.0
        return None, {"where": "answer", "message": "answer: " + INPUTS[name][2], "type": "?"}
    return result["score"], None


class Serve:
    """`referee serve` in its own process, as users run it; one per spec."""

    def __init__(self, spec_path: Path) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "referee.cli", "serve", "--spec", str(spec_path), "--port",
             "0"], stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        assert self.proc.stderr is not None
        line = self.proc.stderr.readline()
        match = re.search(r"on (http://\S+)", line)
        if match is None:
            self.proc.kill()
            raise AssertionError(f"the server did not start: {line}")
        self.url = match.group(1)

    def post(self, path: str, body: Any) -> Any:
        request = urllib.request.Request(self.url + path, data=json.dumps(body).encode(),
                                         headers={"content-type": "application/json"})  # fmt: skip
        with urllib.request.urlopen(request, timeout=60) as response:
            return json.loads(response.read())

    def stop(self) -> None:
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(timeout=60)


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Callable[[str], Serve]]:
    pytest.importorskip("aiohttp", reason="the serve extra is not installed")
    started: dict[str, Serve] = {}

    def get(kind: str) -> Serve:
        if kind not in started:
            path = tmp_path_factory.mktemp("serve") / f"{kind}.yaml"
            path.write_text(yaml.safe_dump(spec(kind), sort_keys=False))
            started[kind] = Serve(path)
        return started[kind]

    yield get
    for server in started.values():
        server.stop()


ENTRY_POINTS = ["python", "cli", "trl", "verl", "http"]


@pytest.mark.parametrize("entry", ENTRY_POINTS)
@pytest.mark.parametrize("name", list(INPUTS))
@pytest.mark.parametrize("kind", SPECS)
def test_a_component_that_cannot_score_fails_the_rollout(
    kind: str, name: str, entry: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    if entry == "http":
        r = rollout(name)
        body = {"rollouts": [{"id": "r", "prompt": r.prompt, "completion": COMPLETION,
                              "reference": r.reference, "metadata": r.metadata}]}  # fmt: skip
        [scored] = request.getfixturevalue("servers")(kind).post("/score", body)["scores"]
        value, failure = scored["reward"], scored["failure"]
    else:
        run = {"python": by_python, "cli": by_cli, "trl": by_trl, "verl": by_verl}[entry]
        value, failure = run(spec(kind), name, tmp_path)
    assert_names_answer(value, failure, INPUTS[name][2])


# What the spec chose, in so many words: the component left out, or counted as 0.0.
CHOSEN = {  # kind: (value under omit, value under value with failure_value 0)
    "weighted": (1.0, 0.1),  # format alone, renormalised; or 0.9 * 0 + 0.1 * 1
    "mean": (1.0, 0.5),
    "min": (1.0, 0.0),
    "cascade": (None, 0.0),  # no component gave a value: omitted or not, it fails
    "gated": (1.0, 0.2),
}


@pytest.mark.parametrize("entry", ["python", "cli", "trl", "verl"])
@pytest.mark.parametrize("policy", ["omit", "value"])
@pytest.mark.parametrize("kind", SPECS)
def test_the_specs_explicit_choice_is_what_it_gets(
    kind: str, policy: str, entry: str, tmp_path: Path
) -> None:
    run = {"python": by_python, "cli": by_cli, "trl": by_trl, "verl": by_verl}[entry]
    value, failure = run(spec(kind, policy), "wrong shape", tmp_path)
    want = CHOSEN[kind][0 if policy == "omit" else 1]
    if want is None:
        assert value is None and failure is not None
    else:
        assert value == pytest.approx(want) and failure is None


def test_the_reason_says_what_was_omitted_and_why() -> None:
    [s] = referee.score(referee.load(spec("weighted", "omit")), [rollout("no reference")])
    assert s.value == 1.0 and s.failure is None
    assert s.reason is not None
    assert s.reason.startswith("answer omitted (no value; on_failure: omit)")
    assert "answer: rollout has no reference to compare against" in s.reason


# --- say it before scoring ------------------------------------------------------------------


def write_rows(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_referee_score_stops_before_scoring_a_file_with_no_reference(tmp_path: Path) -> None:
    rows = [{"id": str(i), "prompt": "2 + 2?", "completion": COMPLETION, "answer": "4"}
            for i in range(3)]  # fmt: skip
    src = write_rows(tmp_path / "in.jsonl", rows)
    out = tmp_path / "out.jsonl"
    result = CliRunner().invoke(main, ["score", str(src), "--spec", str(DEMO_MATH), "-o", str(out)])
    assert result.exit_code == 2, result.output
    message = result.output
    assert "component 'answer' needs a reference" in message
    assert "none of the 3 rows has one" in message
    assert "their keys: id, prompt, completion, answer" in message
    assert "--map reference=answer" in message and "on_failure: omit" in message
    assert not out.exists() and not (tmp_path / "out.jsonl.partial").exists()  # nothing written
    # The fix it names works.
    result = CliRunner().invoke(main, ["score", str(src), "--spec", str(DEMO_MATH), "-o",
                                       str(out), "--map", "reference=answer"])  # fmt: skip
    assert result.exit_code == 0, result.output
    assert [json.loads(line)["reward"] for line in out.read_text().splitlines()] == [1.0] * 3
    # And so does the other: the spec says the component may go without one.
    lenient = tmp_path / "lenient.yaml"
    data = yaml.safe_load(DEMO_MATH.read_text())
    data["components"]["answer"]["on_failure"] = "omit"
    lenient.write_text(yaml.safe_dump(data, sort_keys=False))
    result = CliRunner().invoke(main, ["score", str(src), "--spec", str(lenient), "-q"])
    assert result.exit_code == 0, result.output


def test_referee_score_to_stdout_stops_too(tmp_path: Path) -> None:
    src = write_rows(tmp_path / "in.jsonl", [{"completion": COMPLETION}])
    proc = subprocess.run(
        [sys.executable, "-m", "referee.cli", "score", str(src), "--spec", str(DEMO_MATH)],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert proc.returncode == 2 and proc.stdout == ""
    assert "the only row has none" in proc.stderr and "--map reference=<column>" in proc.stderr


def test_one_row_with_a_reference_is_enough_and_the_others_fail_each(tmp_path: Path) -> None:
    rows = [{"id": "a", "completion": COMPLETION}, {"id": "b", "completion": COMPLETION,
                                                   "reference": "4"}]  # fmt: skip
    src = write_rows(tmp_path / "in.jsonl", rows)
    out = tmp_path / "out.jsonl"
    result = CliRunner().invoke(main, ["score", str(src), "--spec", str(DEMO_MATH), "-o", str(out)])
    assert result.exit_code == 0, result.output
    a, b = (json.loads(line) for line in out.read_text().splitlines())
    assert_names_answer(a["reward"], a["failure"], "no reference")
    assert b["reward"] == 1.0


def test_the_check_reads_ahead_at_most_a_sample_and_loses_no_row(tmp_path: Path) -> None:
    rows = [{"id": str(i), "completion": COMPLETION} for i in range(5)]
    rows.append({"id": "5", "completion": COMPLETION, "reference": "4"})
    src = write_rows(tmp_path / "in.jsonl", rows)
    reward = referee.load(DEMO_MATH)
    with pytest.raises(MissingInput, match="none of the first 5 rows has one"):
        check_rows(reward, referee.rollouts.read_rollouts(src), source=src, sample=5)
    kept = list(check_rows(reward, referee.rollouts.read_rollouts(src), source=src, sample=6))
    assert [r.rollout.id for r in kept if isinstance(r, RowOk)] == [str(i) for i in range(6)]


def test_the_python_file_paths_check_too(tmp_path: Path) -> None:
    src = write_rows(tmp_path / "in.jsonl", [{"completion": COMPLETION, "solution": "4"}])
    reward = referee.load(DEMO_MATH)
    with pytest.raises(MissingInput, match="--map reference=solution") as info:
        score_file(src, reward, open(os.devnull, "w"))  # noqa: SIM115
    assert info.value.missing == [("answer", "reference")]
    out = tmp_path / "out.jsonl"
    rows = referee.rollouts.read_rollouts(src)
    with pytest.raises(MissingInput):
        score_to_path(src, rows, reward, out, spec_text="x")
    assert list(tmp_path.iterdir()) == [src]  # no partial run left behind
    with open(os.devnull, "w") as sink:  # the check can be turned off
        assert score_file(src, reward, sink, check_inputs=False).summary.failures == {
            "not_applicable": 1
        }


def test_a_group_reward_on_rows_without_groups_stops_too(tmp_path: Path) -> None:
    ranked = {"components": {"ranked": {"type": "group_rank", "model": "openai/judge",
                                        "api_base": "http://127.0.0.1:9/v1"}}}  # fmt: skip
    spec_path = tmp_path / "spec.yaml"
    spec_path.write_text(yaml.safe_dump(ranked))
    src = write_rows(tmp_path / "in.jsonl", [{"completion": "a", "prompt_id": 1}])
    result = CliRunner().invoke(main, ["score", str(src), "--spec", str(spec_path)])
    assert result.exit_code == 2
    assert "component 'ranked' needs a group" in result.output
    assert "--map group=prompt_id" in result.output


# --- what each reward needs -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("reward_spec", "want"),
    [
        ({"type": "math_answer"}, {"reference"}),
        ({"type": "exact_match"}, {"reference"}),
        ({"type": "contains"}, {"reference"}),
        ({"type": "contains", "value": "x"}, set()),  # its own value: no reference
        ({"type": "field_match"}, {"reference"}),
        ({"type": "tool_call_match"}, {"reference", "messages"}),
        ({"type": "text_similarity", "metric": "chrf"}, {"reference"}),
        ({"type": "retrieval"}, {"reference", "messages"}),
        ({"type": "io_tests"}, {"reference"}),
        ({"type": "function_tests"}, {"reference"}),
        ({"type": "python_tests"}, {"reference"}),
        ({"type": "json_valid"}, set()),
        ({"type": "format", "preset": "think"}, set()),
        ({"type": "length", "max_length": 10}, {"tokens"}),
        ({"type": "length", "max_length": 10, "unit": "words"}, set()),
        ({"type": "tool_use"}, {"messages"}),
        ({"type": "final_answer", "reward": {"type": "exact_match"}}, {"reference"}),
        ({"type": "reference_judge", "model": "openai/j"}, {"reference"}),
        ({"type": "rubric_judge", "rubric": "helpfulness", "model": "openai/j"}, set()),
        (
            {"type": "rubric_judge", "rubric": "factual-correctness", "model": "openai/j"},
            {"reference"},
        ),  # a rubric that asks for a reference answer
        ({"type": "group_rank", "model": "openai/j"}, {"group"}),
        ({"type": "pairwise_tournament", "model": "openai/j"}, {"group"}),
        ({"type": "reference_judge", "models": ["openai/a", "openai/b"]}, {"reference"}),
        (
            {
                "type": "openai_grader",
                "grader": {
                    "type": "string_check",
                    "input": "{{item.x}}",
                    "reference": "a",
                    "operation": "eq",
                },
            },
            {"reference"},
        ),  # a template reads the item (the reference)
        (
            {
                "type": "openai_grader",
                "grader": {
                    "type": "string_check",
                    "input": "a",
                    "reference": "{{sample.output_text}}",
                    "operation": "ne",
                },
            },
            set(),
        ),
    ],
)
def test_each_builtin_says_what_it_needs(reward_spec: dict[str, Any], want: set[str]) -> None:
    assert {n for _, n in needs(referee.load(reward_spec))} == want


def test_needs_walks_the_tree_and_skips_what_may_go_without() -> None:
    reward = referee.load({
        "name": "agent", "combine": "weighted", "components": {
            "answer": {"type": "final_answer", "reward": {"type": "exact_match"}},
            "judge": {"type": "reference_judge", "model": "openai/j", "on_failure": "omit"},
            "nested": {"combine": "mean", "components": {"f": {"type": "field_match"}}},
            "first": {"combine": "cascade", "components": {
                "cheap": {"type": "math_answer"}, "fallback": {"type": "json_valid"}}},
        },
    })  # fmt: skip
    assert needs(reward) == [("answer", "reference"), ("nested.f", "reference")]
    assert needs(reward, optional=True) == [
        ("answer", "reference"), ("judge", "reference"), ("nested.f", "reference"),
        ("first.cheap", "reference"),
    ]  # fmt: skip


def test_a_users_composite_is_seen_through_its_parts() -> None:
    @referee.reward
    def anything(r: Rollout) -> float:
        return 1.0

    class Mine(referee.CheckReward):
        name = "mine"

        def needs(self) -> frozenset[str]:  # type: ignore[override]
            return frozenset({"reference", "not a need"})  # unknown needs are ignored

        def check(self, rollout: Rollout) -> float:
            return 1.0

    class Wrapper(referee.CheckReward):
        name = "wrapper"

        def children(self) -> list[Part]:
            return [Part("inner", Mine(), reported=True),
                    Part("spare", Mine(), reported=True, required=False)]  # fmt: skip

        def check(self, rollout: Rollout) -> float:
            return 1.0

    assert needs(Wrapper()) == [("inner", "reference")]
    assert needs(anything) == []


# --- the same rule on every path, with the demo's spec --------------------------------------


def test_verl_compute_score_gives_its_fallback_and_flag_never_one() -> None:
    pytest.importorskip("verl", reason="the verl extra is not installed")
    from referee.backends import verl

    for ground_truth in (None, {"answer": "4"}):
        result = verl.compute_score("math", COMPLETION, ground_truth, {"index": 0},
                                    spec=str(DEMO_MATH))  # fmt: skip
        assert result["score"] == verl.DEFAULT_FAILURE_VALUE and result["referee_failed"] == 1.0
        assert result["referee/answer"] == verl.DEFAULT_FAILURE_VALUE  # ran and failed
        assert result["referee/format"] is None and result["referee/format/skipped"] == 1.0
    result = asyncio.run(verl.compute_score_async("math", COMPLETION, None, {}, spec=str(DEMO_MATH),
                                                  failure_value=-1.0))  # fmt: skip
    assert result["score"] == -1.0 and result["referee_failed"] == 1.0


def test_openrlhf_reward_func_gives_its_failure_value_and_flag() -> None:
    pytest.importorskip("aiohttp", reason="the serve extra is not installed")
    from referee.backends.openrlhf import RewardFunc

    func = RewardFunc(str(DEMO_MATH), failure_value=-1.0)
    prompt = "Q: 2 + 2?\nA: "
    out = func([prompt + COMPLETION, prompt + COMPLETION], [prompt, prompt], [None, "4"])
    assert out["rewards"] == [-1.0, 1.0]
    assert out["extra_logs"]["referee_failed"] == [1.0, 0.0]


def test_axolotl_reward_fails_the_rollout_and_names_the_column(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    pytest.importorskip("trl", reason="the trl extra is not installed")
    monkeypatch.setenv("REFEREE_SPEC", str(DEMO_MATH))
    monkeypatch.delenv("REFEREE_REFERENCE", raising=False)
    from referee.backends import axolotl

    monkeypatch.setattr(axolotl, "_loaded", {})
    fn = axolotl.reward
    # Async: math_answer runs in a worker process (TRL, and so Axolotl, awaits it).
    values = asyncio.run(
        fn(prompts=["p", "p"], completions=[COMPLETION] * 2, reference=[None, "4"])
    )
    assert values == [None, 1.0]
    with pytest.raises(MissingInput, match="REFEREE_REFERENCE=answer"):
        asyncio.run(fn(prompts=["p"], completions=[COMPLETION], answer=["4"]))


def test_serve_applies_the_rule_per_request(servers: Callable[[str], Serve]) -> None:
    """`referee serve` has no dataset to check at start: each request gets the rule."""
    server = servers("weighted")  # the demo's spec
    scored = server.post("/score", {"rollouts": [
        {"id": "a", "completion": COMPLETION},
        {"id": "b", "completion": COMPLETION, "reference": "4"},
    ]})["scores"]  # fmt: skip
    assert_names_answer(scored[0]["reward"], scored[0]["failure"], "no reference")
    assert scored[1]["reward"] == 1.0
    prompt = "Q: 2 + 2?\nA: "
    body = server.post("/get_reward", {"query": [prompt + COMPLETION], "prompts": [prompt],
                                       "labels": [None]})  # fmt: skip
    assert body["rewards"] == [0.0] and body["extra_logs"]["referee_failed"] == [1.0]


# --- other traps ----------------------------------------------------------------------------


def test_scoring_one_rollout_instead_of_a_list_is_a_type_error() -> None:
    reward = referee.load(DEMO_MATH)
    with pytest.raises(TypeError, match="got one Rollout: pass \\[rollout\\]"):
        referee.score(reward, rollout("no reference"))  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="of dict"):
        referee.score(reward, [{"completion": "x"}])  # type: ignore[list-item]


def test_a_reward_model_that_could_not_load_is_named_not_the_gate_before_it(
    tmp_path: Path,
) -> None:
    """It was reported as the `format` component: the first component that ran, which had a
    value, was taken for the one that failed."""
    pytest.importorskip("transformers", reason="the models extra is not installed")
    broken = tmp_path / "model"
    broken.mkdir()
    (broken / "config.json").write_text("{}")
    reward = referee.load({"on_failure": "omit", "components": {
        "format": {**FORMAT, "gate": True, "weight": 0.0, "threshold": 0.5},
        "rm": {"type": "reward_model", "model": str(broken)},
    }})  # fmt: skip
    [s] = referee.score(reward, [Rollout(prompt="p", completion=COMPLETION)])
    assert s.value is None and s.failure is not None
    assert s.failure.where == "rm" and s.failure.message.startswith("rm: ")


def test_a_failure_inside_a_nested_combination_is_named_by_its_path() -> None:
    reward = referee.load({"components": {
        "quality": {"combine": "mean", "components": {"answer": ANSWER, "format": FORMAT}},
        "format": FORMAT,
    }})  # fmt: skip
    [s] = referee.score(reward, [rollout("no reference")])
    assert s.failure is not None and s.failure.where == "quality.answer"
    assert s.failure.message == "quality: answer: rollout has no reference to compare against"


def test_report_shows_what_had_no_value_and_why(tmp_path: Path) -> None:
    from referee.report.diagnostics import ReportRow, build_report, missing_lines
    from referee.report.html import render_html
    from referee.report.results import Report
    from referee.rollouts.scored import ScoredRow

    omit = referee.load(spec("weighted", "omit"))
    fail = referee.load(DEMO_MATH)
    rows = []
    for reward, name in [(fail, "no reference"), (fail, "wrong shape"), (omit, "no reference")]:
        [s] = referee.score(reward, [rollout(name)])
        rows.append(ReportRow.of(ScoredRow.of(1, "r", None, s)))
    good = referee.score(fail, [Rollout(completion=COMPLETION, reference="4")])[0]
    rows.append(ReportRow.of(ScoredRow.of(2, "g", None, good)))
    report = build_report(rows)
    missing = report.missing["answer"]
    assert missing.rows == 3 and missing.skipped == 0
    assert missing.reasons == {
        "rollout has no reference to compare against": 2,
        "math_answer needs a text or number reference, got {'value': 4}": 1,
    }
    assert "format" not in report.missing  # skipped after the failure: not "missing"
    assert missing_lines(report) == [
        "answer: no value on 3 of 4 rollouts (rollout has no reference to compare against 2, "
        "math_answer needs a text or number reference, got {'value': 4} 1)"
    ]
    page = render_html(report)
    first_screen = page[: page.index("<h2>Reward</h2>")]
    assert "Components with no value" in first_screen and "no reference to compare" in first_screen
    assert Report.model_validate_json(report.to_json()) == report  # read back
    assert "missing" not in build_report([rows[-1]]).to_dict()  # absent when nothing is


def test_report_in_the_terminal_says_what_had_no_value_first(tmp_path: Path) -> None:
    scored = tmp_path / "scored.jsonl"
    [s] = referee.score(referee.load(DEMO_MATH), [rollout("no reference")])
    from referee.rollouts.scored import row_json

    scored.write_text(row_json(1, "r", None, s) + "\n")
    result = CliRunner().invoke(main, ["report", str(scored)])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[1].startswith("answer: no value on 1 of 1 rollouts"), result.output


# --- the spec's words ------------------------------------------------------------------------


def test_on_none_still_loads_with_a_warning_naming_file_key_and_new_spelling(
    tmp_path: Path,
) -> None:
    old = yaml.safe_load(DEMO_MATH.read_text())
    old["on_none"] = "skip"
    old["none_value"] = 0.25
    path = tmp_path / "old.yaml"
    path.write_text(yaml.safe_dump(old, sort_keys=False))
    with pytest.warns(FutureWarning) as caught:
        reward = referee.load(path)
    [warning] = caught
    message = str(warning.message)
    assert message.startswith(f"{path}: on_none: on_none and none_value is deprecated")
    assert "write on_failure: omit, failure_value: 0.25" in message
    line = path.read_text().splitlines().index("on_none: skip") + 1
    assert warning.filename == str(path) and warning.lineno == line  # shown at the spec's line
    assert isinstance(reward, referee.Combined)
    assert (reward.on_failure, reward.failure_value) == ("omit", 0.25)
    [s] = referee.score(reward, [rollout("no reference")])
    assert s.value == 1.0  # what the old spec said, and says still


def test_spec_policy_options_are_checked_with_their_key_path() -> None:
    base = yaml.safe_load(DEMO_MATH.read_text())
    cases = [
        ({"on_failure": "skip"}, "on_failure", "fail | omit | value"),
        ({"on_failure": "omit", "on_none": "skip"}, "on_none", "give on_failure alone"),
        ({"failure_value": math.inf}, "failure_value", "finite"),
    ]
    for extra, key, words in cases:
        with pytest.raises(referee.SpecError) as info:
            referee.load({**base, **extra})
        assert info.value.path[-1] == key and words in str(info.value), str(info.value)
    gated = {"components": {"g": {"type": "json_valid", "gate": True, "on_failure": "omit"},
                            "x": "json_valid"}}  # fmt: skip
    with pytest.raises(referee.SpecError, match="a gate cannot be omitted") as info:
        referee.load(gated)
    assert info.value.path == ("components", "g", "on_failure")


def test_on_failure_on_a_nested_combination_is_its_default_and_its_parents_policy() -> None:
    reward = referee.load({"components": {
        "optional": {"combine": "mean", "on_failure": "omit", "weight": 0.5,
                     "components": {"answer": ANSWER, "format": FORMAT}},
        "format": {**FORMAT, "weight": 0.5},
    }})  # fmt: skip
    [s] = referee.score(reward, [rollout("no reference")])
    assert s.value == 1.0 and s.components["optional"] == 1.0  # answer left out inside
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the new spelling warns of nothing
        assert isinstance(reward, referee.Combined)
    inner = referee.load({"components": {
        "optional": {"combine": "mean", "on_failure": "omit", "weight": 0.5,
                     "components": {"answer": ANSWER}},
        "format": {**FORMAT, "weight": 0.5},
    }})  # fmt: skip
    [s] = referee.score(inner, [rollout("no reference")])
    assert s.value == 1.0 and s.failure is None  # the parent omits it in turn


def test_python_component_options_round_trip_through_pickle() -> None:
    import pickle

    answer = referee.load(ANSWER)
    reward = referee.weighted({
        "answer": Component(name="answer", reward=answer, weight=0.9, on_failure="value",
                            failure_value=-1.0),
        "format": (referee.load(FORMAT), 0.1),
    })  # fmt: skip
    again = pickle.loads(pickle.dumps(reward))
    [a] = referee.score(reward, [rollout("no reference")])
    [b] = referee.score(again, [rollout("no reference")])
    assert a.value == b.value == pytest.approx(-0.9 + 0.1)
    assert isinstance(a, Score)


def test_a_length_in_tokens_stops_on_a_file_without_token_counts(tmp_path: Path) -> None:
    # Every row would be not_applicable: said before scoring, with the column to map.
    src = write_rows(tmp_path / "in.jsonl", [{"completion": COMPLETION, "n_tokens": 12}])
    spec = tmp_path / "len.yaml"
    spec.write_text("type: length\nmax_length: 10\n")
    result = CliRunner().invoke(main, ["score", str(src), "--spec", str(spec)])
    assert result.exit_code == 2, result.output
    assert "token count" in result.output and "metadata.completion_tokens" in result.output
    out = tmp_path / "out.jsonl"
    mapped = ["score", str(src), "--spec", str(spec), "-o", str(out),
              "--map", "metadata.completion_tokens=n_tokens"]  # fmt: skip
    result = CliRunner().invoke(main, mapped)
    assert result.exit_code == 0, result.output
    assert json.loads(out.read_text().splitlines()[0])["reward"] == -1.0
