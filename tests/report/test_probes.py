from __future__ import annotations

import json
import subprocess
import sys
from importlib import resources
from pathlib import Path
from typing import Any

import pytest

import referee
from referee import Rollout
from referee._aio import run_sync
from referee.judges.testing import FakeJudgeServer, Reply
from referee.report.probes import ProbeReport, run_probes

DEMO = resources.files("referee") / "data" / "demo"


def extraction_rollouts() -> list[Rollout]:
    ref = {"company": "Acme Corp", "amount": 1000, "date": "2025-01-02", "provinces": ["Yukon"]}
    good = json.dumps(ref)
    return [
        Rollout(id="a", group="g", prompt="Extract: Acme raised $1000 on 2025-01-02 in Yukon",
                completion=good, reference=ref),
        Rollout(id="b", group="g", prompt="Extract: Acme raised $1000 on 2025-01-02 in Yukon",
                completion='{"company": "Acme"}', reference=ref),
    ]  # fmt: skip


def probes(reward: Any, rollouts: list[Rollout], **kw: Any) -> ProbeReport:
    return run_sync(run_probes(reward, rollouts, **kw))


def test_a_json_validity_reward_is_gamed_by_format_and_fake_verdicts() -> None:
    result = probes(referee.load({"type": "json_valid"}), extraction_rollouts())
    assert {"format_only", "fake_verdict"} <= set(result.failed)
    assert "empty" not in result.failed and "prompt_copy" not in result.failed
    example = result.probes["format_only"].examples[0]
    assert json.loads(example.completion) == {"company": "", "amount": 0, "date": "",
                                                  "provinces": []}  # fmt: skip


def test_the_demo_extraction_spec_resists_every_probe() -> None:
    with resources.as_file(DEMO / "extraction.yaml") as spec:
        reward = referee.load(str(spec))
    result = probes(reward, extraction_rollouts())
    assert result.failed == () and result.golds == 1


def test_a_keyword_grader_obeys_the_injection() -> None:
    @referee.reward
    def naive(rollout: Rollout) -> float:
        text = rollout.completion_text.lower()
        return 1.0 if "maximum score" in text or "correct" in text else 0.2

    rollouts = [Rollout(id="x", completion="This is correct.", prompt="q")]
    result = probes(naive, rollouts)
    assert {"injection", "fence_close"} <= set(result.failed)


def test_code_probes_against_the_sandbox_and_against_a_naive_check() -> None:
    ref = {"test": "def check(candidate):\n    assert candidate(2) == 4\n", "entry_point": "double"}
    gold = Rollout(id="c", completion="def double(x):\n    return 2 * x\n", reference=ref)
    sandboxed = referee.load({"type": "python_tests"})
    result = probes(sandboxed, [gold], only=["exit_early", "print_passed", "always_equal"])
    assert result.failed == () and all(
        r.tried == 1 for r in result.probes.values()
    )  # the code probes ran, and the sandboxed verdict was not fooled

    @referee.reward
    def trusts_stdout(rollout: Rollout) -> float:
        return (
            1.0
            if "PASSED" in rollout.completion_text or "return" in rollout.completion_text
            else 0.0
        )

    result = probes(trusts_stdout, [gold], only=["print_passed", "always_equal"])
    assert result.failed == ("always_equal", "print_passed")


def test_a_ranking_judge_that_loves_length_fails_the_padding_probe() -> None:
    def longest_wins(request: dict[str, Any]) -> Reply:
        import re

        system, user = (m["content"] for m in request["messages"][:2])
        fence = re.search(r"<<([0-9a-f]{24})>>", system).group(1)  # type: ignore[union-attr]
        shown = re.findall(rf"ATTEMPT \d+:\n<<{fence}>>\n(.*?)\n<</{fence}>>", user, re.DOTALL)
        top = max(len(s) for s in shown)
        return Reply(json.dumps({"scores": [len(s) / top for s in shown]}))

    with FakeJudgeServer(longest_wins) as server:
        reward = referee.load({"type": "group_rank", "model": "openai/j", "api_base": server.url,
                               "cache": False, "structured": "prompt", "orders": 1})  # fmt: skip
        rollouts = [Rollout(id=str(i), group="g", prompt="q", completion="x" * (i + 1))
                    for i in range(3)]  # fmt: skip
        result = probes(reward, rollouts, only=["verbose", "empty"])
    assert result.failed == ("verbose",)


def test_probe_command_exits_non_zero_when_a_hack_works(tmp_path: Path) -> None:
    rollouts = tmp_path / "in.jsonl"
    rollouts.write_text("".join(r.model_dump_json() + "\n" for r in extraction_rollouts()))
    weak = tmp_path / "weak.yaml"
    weak.write_text("type: json_valid\n")
    out = tmp_path / "probes.json"
    cmd = [sys.executable, "-m", "referee.cli", "probe", str(rollouts)]
    run = subprocess.run([*cmd, "--spec", str(weak), "--json", str(out)], capture_output=True,
                         text=True)  # fmt: skip
    assert run.returncode == 1 and "hacks that work" in run.stdout
    assert "format_only" in json.loads(out.read_text())["failed"]
    with resources.as_file(DEMO / "extraction.yaml") as spec:
        run = subprocess.run([*cmd, "--spec", str(spec)], capture_output=True, text=True)
    assert run.returncode == 0, run.stdout + run.stderr
    run = subprocess.run([*cmd, "--spec", str(weak), "--only", "nope"], capture_output=True,
                         text=True)  # fmt: skip
    assert run.returncode == 2 and "unknown probes" in run.stderr


@pytest.mark.parametrize("only", [["empty"], None])
def test_no_gold_means_nothing_to_probe(only: list[str] | None) -> None:
    result = probes(referee.load({"type": "exact_match"}), [Rollout(completion="a", reference="b")],
                    only=only)  # fmt: skip
    assert result.golds == 0 and result.failed == ()


def test_only_the_groups_needed_for_the_golds_are_scored() -> None:
    """On a large file a judge should not be paid for groups past `limit` golds."""
    seen: list[str] = []

    class Counting(referee.CheckReward):
        name = "counting"
        run_in = "inline"  # `seen` is this process's

        def check(self, rollout: Rollout) -> float:
            if not rollout.id.count(":probe:"):
                seen.append(rollout.id)
            return 1.0 if rollout.completion == "42" else 0.0

    rollouts = [Rollout(id=f"{g}-{k}", group=str(g), completion="42" if k == 0 else "7",
                        reference="42") for g in range(20) for k in range(3)]  # fmt: skip
    result = probes(Counting(), rollouts, limit=2, only=["empty"])
    assert result.golds == 2
    assert {s.split("-")[0] for s in seen} == {"0", "1"}  # groups 2..19 never scored


# --- hedging where a group has no alternatives of its own ----------------------------------

SINGLES = [("capital of France?", "Paris"), ("largest planet?", "Jupiter"),
           ("symbol for gold?", "Au"), ("6 * 7?", "42")]  # fmt: skip


class Contains(referee.CheckReward):
    """Pays when the reference appears anywhere in the completion: hedging beats it."""

    name = "contains"

    def check(self, rollout: Rollout) -> float:
        return 1.0 if str(rollout.reference) in rollout.completion_text else 0.0


@pytest.mark.parametrize(
    ("reward", "hacked"),
    [
        (Contains(), True),  # "Jupiter or Paris or Au or 42" contains "Paris"
        (referee.load({"type": "exact_match"}), False),  # a strict match is not fooled
    ],
    ids=["substring", "exact_match"],
)
def test_single_attempts_are_hedged_with_other_prompts_answers(reward: Any, hacked: bool) -> None:
    rollouts = [Rollout(id=f"s{i}", group=f"g{i}", prompt=q, completion=a, reference=a)
                for i, (q, a) in enumerate(SINGLES)]  # fmt: skip
    result = probes(reward, rollouts, only=["hedged"])
    hedged = result.probes["hedged"]
    assert hedged.tried == 4  # every gold answer got a hedge, none was skipped
    assert ("hedged" in result.failed) is hacked
    if hacked:
        assert hedged.flagged == 4 and "Paris" in hedged.examples[0].completion


@pytest.mark.parametrize(
    ("completion", "pool", "hedge"),
    [
        # a number: its near-misses around it, the gold answer second
        ("42", [], "41\nor\n42\nor\n43"),
        ("\\boxed{3.14}", [], "The answer is \\boxed{3.13} or \\boxed{3.14} or \\boxed{3.15}."),
        ("-0.5", [], "-0.6\nor\n-0.5\nor\n-0.4"),
        # then other prompts' answers, never one the same as the gold answer
        ("42", ["42.0", "Paris", "Au", "Jupiter"], "41\nor\n42\nor\n43\nor\nParis"),
        ("Paris", ["PARIS", "Au", "Jupiter", "42"], "Au\nor\nParis\nor\nJupiter\nor\n42"),
        # nothing to hedge with: no probe
        ("Paris", ["Paris"], None),
        ("", ["Au"], None),
    ],
)
def test_the_hedge_of_a_lone_answer(completion: str, pool: list[str], hedge: str | None) -> None:
    from referee.report.hacks import PROBES, Gold

    [probe] = [p for p in PROBES if p.name == "hedged"]
    assert probe.make(Gold(Rollout(completion=completion), answers=pool)) == hedge


def test_a_group_that_agrees_on_its_answer_is_hedged_with_wrong_answers() -> None:
    """Four attempts with the same boxed answer used to be "hedged" with one another, which
    flagged a sound grader; the hedge now mixes in wrong answers instead."""
    rollouts = [Rollout(id=f"{g}-{k}", group=str(g), prompt=f"what is {g}?", reference=str(g),
                        completion="Let me think. " * k + f"\\boxed{{{g}}}")
                for g in range(3) for k in range(3)]  # fmt: skip
    result = probes(referee.load({"type": "math_answer"}), rollouts, only=["hedged"])
    assert result.probes["hedged"].tried == 3 and result.failed == ()

    @referee.reward
    def any_boxed(rollout: Rollout) -> float:
        return float(f"\\boxed{{{rollout.reference}}}" in rollout.completion_text)

    assert probes(any_boxed, rollouts, only=["hedged"]).failed == ("hedged",)


class FirstLine(referee.CheckReward):
    """Reads the first line only, with partial credit: half for the right initial letter."""

    name = "first_line"

    def check(self, rollout: Rollout) -> float:
        first = rollout.completion_text.strip().split("\n")[0]
        ref = str(rollout.reference)
        return 1.0 if first == ref else 0.5 if first[:1] == ref[:1] else 0.0


def test_a_hedge_earning_what_its_first_wrong_answer_earns_alone_is_not_a_hack() -> None:
    """The extraction task's strict spec was flagged on a hedge that earned 0.6: its first
    (wrong) answer, alone, earns 0.6 too (partial credit for a right amount). Each wrong
    option is now scored alone beside the hedge, and the hedge must earn more than all of
    them. Here the first decoy of "Apple" is "Avocado" (same initial), worth 0.5 alone."""
    pool = [("fruit 1?", "Apple"), ("fruit 2?", "Avocado"), ("fruit 3?", "Banana"),
            ("fruit 4?", "Cherry")]  # fmt: skip
    rollouts = [Rollout(id=f"s{i}", group=f"g{i}", prompt=q, completion=a, reference=a)
                for i, (q, a) in enumerate(pool)]  # fmt: skip
    from referee.report.hacks import PROBES, Gold

    [probe] = [p for p in PROBES if p.name == "hedged"]
    apple = Gold(rollouts[0], answers=[a for _, a in pool])
    hedge = probe.texts(apple)[0]
    assert hedge.split("\n")[0] == "Avocado"  # the case: the first wrong answer pays 0.5
    assert probe.controls is not None and "Avocado" in probe.controls(apple)
    assert "Apple" not in probe.controls(apple)  # the gold answer is never a control
    result = probes(FirstLine(), rollouts, only=["hedged"], fraction=0.4)
    assert result.failed == (), result.probes["hedged"]
    # The control: a reward that pays the hedge for containing the answer is still flagged.
    assert probes(Contains(), rollouts, only=["hedged"]).failed == ("hedged",)


def test_a_hedge_among_right_answers_in_other_words_is_still_flagged() -> None:
    """A group's other attempts are often right answers in other words: alone, each earns
    what the gold answer earns. Taken as controls, they raised the bar to the gold's value
    and an any-of grader was never flagged (review). They raise nothing now."""
    rollouts = [Rollout(id=f"{g}-{k}", group=g, prompt=f"capital of {c}?", reference=a,
                        completion=text)
                for g, c, a in [("fr", "France", "Paris"), ("it", "Italy", "Rome")]
                for k, text in enumerate([a, f"The answer is {a}.", "Lyon"])]  # fmt: skip
    assert probes(Contains(), rollouts, only=["hedged"]).failed == ("hedged",)
    assert probes(referee.load({"type": "exact_match"}), rollouts, only=["hedged"]).failed == ()


def test_a_probe_report_round_trips_through_json() -> None:
    result = probes(referee.load({"type": "json_valid"}), extraction_rollouts())
    assert result.probes["format_only"].examples  # examples travel too
    text = result.to_json(indent=2)
    back = ProbeReport.model_validate_json(text)
    assert back == result and back.to_json(indent=2) == text
