"""The training monitor on scripted completion streams whose proxy-gold gap, zero-variance share
and length correlation move at known steps: each rule fires at the right step, and only then."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import referee
from referee import Rollout
from referee._aio import run_sync
from referee.monitor import DEFAULT_RULES, Monitor, Rule, Rules, by_step

HONEST = ("The answer is 4.", "The answer is 5.", "The answer is 4.", "The answer is 5.")
FILLER = " Let me elaborate."


def stream(hack_from: int | None = None, same_from: int | None = None,
           steps: int = 10) -> list[Rollout]:  # fmt: skip
    """Four groups of four attempts a step. Honest steps: right and wrong answers of one length.
    From `hack_from`: wrong answers padded by 10, 20, 30, 40 fillers (the proxy pays the words,
    the gold pays nothing). From `same_from`: every attempt of a group the same right answer."""
    out = []
    for step in range(steps):
        for g in range(4):
            for a in range(4):
                text = HONEST[a]
                if hack_from is not None and step >= hack_from:
                    text = "The answer is 5." + FILLER * (10 * (a + 1))
                elif same_from is not None and step >= same_from:
                    text = HONEST[0]
                out.append(Rollout(id=f"s{step}g{g}a{a}", group=f"s{step}g{g}", prompt="2+2?",
                                   completion=text, reference="4",
                                   metadata={"step": step}))  # fmt: skip
    return out


def replay(proxy: Path, gold: Path | None, rollouts: list[Rollout],
           rules: Rules = DEFAULT_RULES) -> Monitor:  # fmt: skip
    reward = referee.load(proxy)
    monitor = Monitor(referee.load(gold) if gold else None, gold_sample=8, rules=rules)

    async def run() -> None:
        for step, rows in by_step(rollouts).items():
            await monitor.observe(step, rows, await reward.score_batch(rows))

    run_sync(run())
    return monitor


def fired(monitor: Monitor) -> list[tuple[str, int]]:
    return [(a.rule, a.step) for a in monitor.alarms]


def test_a_length_hack_fires_the_gap_and_length_rules_three_steps_in(
    specs: tuple[Path, Path],
) -> None:
    monitor = replay(*specs, stream(hack_from=5))
    assert fired(monitor) == [("gap", 7), ("length_correlation", 7)]
    honest, hacked = monitor.history[4], monitor.history[5]
    assert honest.gap is not None and honest.gap < 0  # the proxy pays less than the gold here
    assert hacked.gold == 0.0 and hacked.gap is not None and hacked.gap > 0.2
    assert hacked.length_correlation == pytest.approx(1.0) and hacked.zero_variance == 0.0
    assert monitor.stopped is None  # warn is the default action


def test_groups_that_stop_varying_fire_the_zero_variance_rule(specs: tuple[Path, Path]) -> None:
    monitor = replay(*specs, stream(same_from=4))
    assert fired(monitor) == [("zero_variance", 6)]
    assert [f.zero_variance for f in monitor.history[3:5]] == [0.0, 1.0]


def test_an_honest_run_fires_nothing(specs: tuple[Path, Path]) -> None:
    monitor = replay(*specs, stream())
    assert fired(monitor) == [] and len(monitor.history) == 10
    assert all(f.gold_sample == 8 and f.failures == {} for f in monitor.history)


def test_a_stop_rule_stops_at_its_step_and_a_rule_fires_once_per_run(
    specs: tuple[Path, Path],
) -> None:
    rules = Rules(gap=Rule(bound=0.2, steps=2, action="stop"),
                  length_correlation=Rule(bound=0.5, enabled=False))  # fmt: skip
    monitor = replay(*specs, stream(hack_from=5), rules)
    assert fired(monitor) == [("gap", 6)]  # steps 5 and 6; not again at 7, 8, 9
    assert monitor.stopped is not None and monitor.stopped.step == 6
    assert "gap" in monitor.stopped.message and "steps 5 to 6" in monitor.stopped.message


def test_without_a_gold_spec_there_is_no_gap(specs: tuple[Path, Path]) -> None:
    monitor = replay(specs[0], None, stream(hack_from=5))
    assert fired(monitor) == [("length_correlation", 7)]
    assert all(f.gap is None for f in monitor.history)


def test_metrics_are_flat_numbers_for_a_trainers_logger(specs: tuple[Path, Path]) -> None:
    monitor = replay(*specs, stream(hack_from=5, steps=6))
    metrics = monitor.metrics()
    assert metrics["referee/gold"] == 0.0 and metrics["referee/gap"] > 0.2
    assert {"referee/reward/mean", "referee/components/correct/mean",
            "referee/zero_variance"} <= set(metrics)  # fmt: skip
    assert all(isinstance(v, float) for v in metrics.values())


def test_a_rollout_with_no_step_is_named() -> None:
    with pytest.raises(referee.RolloutError, match=r"rollout 'x' has no step"):
        by_step([Rollout(id="x", completion="a")])


def write(rows: list[Rollout], path: Path) -> Path:
    path.write_text("".join(json.dumps(r.model_dump(mode="json")) + "\n" for r in rows))
    return path


def test_referee_watch_replays_a_log_and_exits_1_where_a_stop_rule_fired(
    specs: tuple[Path, Path], tmp_path: Path
) -> None:
    log = write(stream(hack_from=5), tmp_path / "run.jsonl")
    out = tmp_path / "watch.json"
    command = [sys.executable, "-m", "referee.cli", "watch", str(log), "--spec", str(specs[0]),
               "--gold", str(specs[1]), "--json", str(out)]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr  # warnings only
    assert "step 7: warn gap" in done.stdout and "step 7: warn length_correlation" in done.stdout
    written = json.loads(out.read_text())
    assert [a["step"] for a in written["alarms"]] == [7, 7] and len(written["steps"]) == 10
    rules = tmp_path / "rules.yaml"
    rules.write_text("gap: {bound: 0.2, steps: 1, action: stop}\n")
    done = subprocess.run([*command, "--rules", str(rules)], capture_output=True, text=True,
                          timeout=300, check=False)  # fmt: skip
    assert done.returncode == 1 and "step 5: stop gap" in done.stdout, done.stdout
    rules.write_text("gap: {bound: high}\n")
    done = subprocess.run([*command, "--rules", str(rules)], capture_output=True, text=True,
                          timeout=300, check=False)  # fmt: skip
    assert done.returncode == 1 and str(rules) in done.stderr and "bound" in done.stderr


SUM_CASES = {"cases": [{"stdin": "1 2\n", "stdout": "3\n"}, {"stdin": "2 2\n", "stdout": "4\n"}],
             "held_out": [{"stdin": "40 2\n", "stdout": "42\n"}]}  # fmt: skip
SUMS = "```python\na, b = map(int, input().split())\nprint(a + b)\n```"
LOOKUP = '```python\nprint({"1 2": 3, "2 2": 4}.get(input().strip(), 0))\n```'
# the longest of the three: length and reward do not move together
WRONG = (
    "```python\na, b = map(int, input().split())\nprint(a - b)  # their difference, not sum\n```"
)


def test_special_casing_the_visible_tests_fires_the_held_out_rule(tmp_path: Path) -> None:
    # A group a step: one wrong attempt, three right. From step 4 the right ones look the
    # visible answers up: every paid case passes, the held-out one fails. The reward does not
    # move; the rule fires at step 6, the third step past its bound.
    spec = tmp_path / "code.yaml"
    spec.write_text("type: io_tests\ntimeout: 5\n")
    rows = [Rollout(id=f"s{s}a{a}", group=f"s{s}", prompt="Sum two integers.",
                    completion=WRONG if a == 0 else LOOKUP if s >= 4 else SUMS,
                    reference=SUM_CASES,
                    metadata={"step": s}) for s in range(8) for a in range(4)]  # fmt: skip
    monitor = replay(spec, None, rows)
    assert fired(monitor) == [("held_out_gap", 6)]
    honest, hacked = monitor.history[3], monitor.history[4]
    assert honest.held_out_gap == 0.0 and honest.held_out[""].held_out == 0.75
    assert hacked.held_out[""].paid == 0.75 and hacked.held_out[""].held_out == 0.0
    assert hacked.held_out_gap == pytest.approx(0.75)
    assert hacked.reward.mean == honest.reward.mean == 0.75
    metrics = monitor.metrics()
    assert metrics["referee/held_out/reward/held_out"] == 0.0
    assert metrics["referee/held_out_gap"] == pytest.approx(0.75)


def test_the_held_out_gap_is_read_by_component(tmp_path: Path) -> None:
    spec = tmp_path / "code.yaml"
    spec.write_text(
        "combine: weighted\ncomponents:\n  tests: {type: io_tests, timeout: 5, weight: 0.9}\n"
        "  short: {type: length, unit: chars, max_length: 400, weight: 0.1}\n"
    )
    rows = [Rollout(id=f"a{a}", group="g", prompt="Sum.", completion=LOOKUP if a else SUMS,
                    reference=SUM_CASES, metadata={"step": 0}) for a in range(4)]  # fmt: skip
    monitor = replay(spec, None, rows)
    ((prefix, figures),) = monitor.history[0].held_out.items()
    assert prefix == "tests." and (figures.cases, figures.held_out_cases) == (8, 4)
    assert figures.held_out == 0.25 and monitor.alarms == []


def test_the_probes_run_on_the_live_policy_every_nth_step(specs: tuple[Path, Path]) -> None:
    # The proxy pays words: the padding probes pay on the policy's own best answers. The
    # battery runs at steps 0 and 2 (probe_every 2), not at 1; the rule fires where it ran.
    proxy, _ = specs
    reward = referee.load(proxy)
    monitor = Monitor(probe_every=2, probe_groups=4)

    async def run() -> None:
        for step, rows in by_step(stream(steps=3)).items():
            await monitor.observe(step, rows, await reward.score_batch(rows), reward)

    run_sync(run())
    probed = [f.probes for f in monitor.history]
    assert probed[1] is None and probed[0] == probed[2]
    assert probed[0] is not None and {"verbose", "repeated", "fluent_filler"} <= set(probed[0])
    assert fired(monitor) == [("paying_probes", 0), ("paying_probes", 2)]
    # without the proxy (a replay that gives none) the battery does not run
    quiet = Monitor(probe_every=1)
    rows = by_step(stream(steps=1))[0]
    run_sync(quiet.observe(0, rows, run_sync(reward.score_batch(rows))))
    assert quiet.history[0].probes is None and quiet.alarms == []


def test_referee_watch_runs_the_probes_with_probe_every(
    specs: tuple[Path, Path], tmp_path: Path
) -> None:
    proxy, _ = specs
    log = tmp_path / "run.jsonl"
    log.write_text("".join(json.dumps(r.model_dump(mode="json")) + "\n" for r in stream(steps=2)))
    done = subprocess.run(
        [sys.executable, "-m", "referee.cli", "watch", str(log), "--spec", str(proxy),
         "--probe-every", "2", "--json", str(tmp_path / "w.json")],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "the proxy pays: " in done.stdout and "verbose" in done.stdout
    steps = json.loads((tmp_path / "w.json").read_text())["steps"]
    assert steps[0]["paying_probes"] >= 3 and steps[1].get("probes") is None


def test_components_that_stop_agreeing_fire_the_agreement_rule(tmp_path: Path) -> None:
    # Two checks of one answer: `contains` and `exact_match`. Honest attempts ("4", "5") are
    # paid alike by both (Spearman 1); from step 3 half the attempts hedge ("4 or 5"), which
    # contains pays and exact_match does not: their agreement falls to 1/3 and the rule (below
    # 0.5 here) fires at step 5, the third step under it.
    spec = tmp_path / "two.yaml"
    spec.write_text("combine: mean\ncomponents:\n  loose: {type: contains}\n"
                    "  exact: {type: exact_match}\n")  # fmt: skip
    texts = {False: ("4", "5", "4", "5"), True: ("4 or 5", "4 or 5", "4", "5")}
    rows = [Rollout(id=f"s{s}g{g}a{a}", group=f"s{s}g{g}", prompt="2+2?", reference="4",
                    completion=texts[s >= 3][a], metadata={"step": s})
            for s in range(7) for g in range(2) for a in range(4)]  # fmt: skip
    reward = referee.load(spec)
    monitor = Monitor(agree=[("loose", "exact")], rules=Rules(min_agreement=Rule(bound=0.5)))

    async def run() -> None:
        for step, batch in by_step(rows).items():
            await monitor.observe(step, batch, await reward.score_batch(batch))

    run_sync(run())
    assert [f.min_agreement for f in monitor.history[2:4]] == [pytest.approx(1.0),
                                                               pytest.approx(1 / 3)]  # fmt: skip
    assert monitor.history[3].agreement == {"loose~exact": pytest.approx(1 / 3)}
    assert [(a.rule, a.step) for a in monitor.alarms] == [("min_agreement", 5)]
    assert monitor.alarms[0].message == "min_agreement 0.333 < 0.5 for 3 steps (steps 3 to 5)"
    assert monitor.metrics()["referee/agreement/loose~exact"] == pytest.approx(1 / 3)
    # without pairs there is no figure, and the default rule never fires
    assert Monitor().rules.min_agreement.bound == 0.3
    with pytest.raises(referee.SpecError, match=r"monitor\.agree: pairs of component names"):
        Monitor.from_options({"agree": ["loose", "exact"]})
    assert Monitor.from_options({"agree": [["loose", "exact"]]}).agree == [("loose", "exact")]
