from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from referee.report.diagnostics import ReportRow, build_report
from referee.report.html import render_html
from referee.report.results import Report
from tests.support.rollouts import write_jsonl


def test_grpo_signal_length_and_agreement() -> None:
    rows = [
        # group a: every attempt the same reward (no signal); group b: spread
        ReportRow(1.0, {"x": 1.0}, group="a", chars=10, label=1.0),
        ReportRow(1.0, {"x": 1.0}, group="a", chars=20, label=1.0),
        ReportRow(0.0, {"x": 0.0}, group="b", chars=5, label=0.0),
        ReportRow(0.5, {"x": None}, group="b", chars=15, label=1.0),
        ReportRow(None, failure="judge", group="b", chars=30),
    ]
    report = build_report(rows, label="label")
    assert report.rows == 5 and report.failed == 1 and report.failures == {"judge": 1}
    assert report.grpo is not None
    assert report.grpo.groups == 2 and report.grpo.zero_variance_share == 0.5
    assert report.components["x"].count == 3 and report.components["x"].missing == 2
    assert report.length is not None and report.length.n == 4
    agreement = report.agreement
    assert agreement is not None and agreement.accuracy and agreement.cohen_kappa
    assert agreement.n == 4 and agreement.accuracy.value == 1.0
    assert agreement.cohen_kappa.value == 1.0


def test_a_length_hacked_reward_shows_up() -> None:
    rows = [ReportRow(n / 100, chars=n) for n in range(1, 101)]
    length = build_report(rows).length
    assert length is not None and length.spearman == pytest.approx(1.0)


def test_determinism_counts_changes_and_flips() -> None:
    repeats = [[0.2, 0.6, 0.9, None], [0.2, 0.4, 0.8, None], [0.2, 0.6, 0.9, 0.1]]
    det = build_report([ReportRow(0.0)] * 4, repeats=repeats).determinism
    assert det is not None
    assert det.changed_share == 0.75  # rollouts 2, 3, 4 changed value
    assert det.verdict_flip_share == 0.5  # 0.6 -> 0.4 crosses 0.5; None -> 0.1 too


def test_html_is_self_contained_and_carries_the_numbers() -> None:
    rows = [ReportRow(i / 10, {"a": i / 10}, group=str(i // 2), chars=i) for i in range(10)]
    report = build_report(rows)
    page = render_html(report)
    assert "<script" not in page.replace('<script type="application/json"', "")
    assert not re.search(r"(src|href)=\"https?://", page)  # nothing fetched from anywhere
    data = re.search(r'id="report-data">(.*?)</script>', page, re.DOTALL)
    assert data and json.loads(data.group(1)) == json.loads(report.to_json())
    assert page.count("<svg") >= 3


def write_rollouts(path: Path) -> Path:
    rows = []
    for g in range(20):
        for k in range(4):
            answer = g + (k % 2)  # half right, half wrong: a group with signal
            if g % 5 == 0:
                answer = g  # every attempt right: a group with no signal
            rows.append({
                "id": f"{g}-{k}", "group": str(g), "prompt": f"what is {g}?",
                "completion": "Let me think. " * k + f"\\boxed{{{answer}}}",
                "reference": str(g), "metadata": {"label": int(answer == g)},
            })  # fmt: skip
    write_jsonl(path, rows)
    return path


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "referee.cli", *args], capture_output=True,
                          text=True, timeout=300)  # fmt: skip


def math_report(tmp_path: Path, rows: list[Any]) -> tuple[subprocess.CompletedProcess[str], Any]:
    """`referee report` on `rows` with a math_answer spec: the run, and its --json report."""
    rollouts = write_jsonl(tmp_path / "in.jsonl", rows)
    spec = tmp_path / "spec.yaml"
    spec.write_text("type: math_answer\n")
    data = tmp_path / "r.json"
    run = cli("report", str(rollouts), "--spec", str(spec), "--json", str(data))
    assert run.returncode == 0, run.stderr
    return run, json.loads(data.read_text())


def test_report_command_on_a_scored_file(tmp_path: Path) -> None:
    rollouts = write_rollouts(tmp_path / "in.jsonl")
    spec = tmp_path / "spec.yaml"
    spec.write_text("name: m\ntype: math_answer\n")
    scored = tmp_path / "scored.jsonl"
    assert cli("score", str(rollouts), "--spec", str(spec), "-o", str(scored), "-q").returncode == 0
    html, data = tmp_path / "r.html", tmp_path / "r.json"
    run = cli("report", str(scored), "--rollouts", str(rollouts), "--html", str(html),
              "--json", str(data))  # fmt: skip
    assert run.returncode == 0, run.stderr
    assert "20.0% of 20 groups have zero reward variance" in run.stdout
    assert "agreement with label" in run.stdout
    report = json.loads(data.read_text())
    assert report["agreement"]["accuracy"]["value"] == 1.0  # math_answer agrees with the labels
    assert report["length"]["n"] == 80
    assert json.loads(re.search(r'id="report-data">(.*?)</script>', html.read_text(),
                                re.DOTALL).group(1)) == report  # type: ignore[union-attr]  # fmt: skip

    # Scored rows alone still give distributions and the GRPO signal.
    run = cli("report", str(scored), "--json", str(data))
    assert run.returncode == 0 and json.loads(data.read_text())["length"] is None


def test_report_command_scores_and_repeats(tmp_path: Path) -> None:
    rollouts = write_rollouts(tmp_path / "in.jsonl")
    spec = tmp_path / "spec.yaml"
    spec.write_text("name: m\ntype: math_answer\n")
    data = tmp_path / "r.json"
    run = cli("report", str(rollouts), "--spec", str(spec), "--repeat", "3", "--json", str(data))
    assert run.returncode == 0, run.stderr
    det = json.loads(data.read_text())["determinism"]
    assert det["repeats"] == 3 and det["verdict_flip_share"] == 0.0


def test_report_refuses_rollouts_that_do_not_line_up(tmp_path: Path) -> None:
    rollouts = write_rollouts(tmp_path / "in.jsonl")
    spec = tmp_path / "spec.yaml"
    spec.write_text("type: math_answer\n")
    scored = tmp_path / "scored.jsonl"
    cli("score", str(rollouts), "--spec", str(spec), "-o", str(scored), "-q")
    other = tmp_path / "other.jsonl"
    other.write_text("".join(rollouts.read_text().splitlines(keepends=True)[1:]))
    run = cli("report", str(scored), "--rollouts", str(other))
    assert run.returncode != 0 and "pass the rollouts file that was scored" in run.stderr


CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.mark.skipif(CHROMIUM is None, reason="no chromium (apt-get install chromium)")
def test_the_page_renders_in_a_headless_browser(tmp_path: Path) -> None:
    rows = [ReportRow(i / 50, {"a": i / 50}, group=str(i // 4), chars=10 * i, label=float(i > 25))
            for i in range(50)]  # fmt: skip
    page = tmp_path / "report.html"
    page.write_text(render_html(build_report(rows, label="label"), title="browser check"))
    flags = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
             "--no-first-run", "--disable-background-networking", "--disable-component-update",
             "--disable-sync", f"--user-data-dir={tmp_path / 'profile'}"]  # fmt: skip
    dom = subprocess.run([*flags, "--dump-dom", page.as_uri()], capture_output=True, text=True,
                         timeout=120)  # fmt: skip
    assert dom.returncode == 0, dom.stderr[-2000:]
    assert "browser check" in dom.stdout and "GRPO signal" in dom.stdout
    assert dom.stdout.count("<svg") >= 3 and dom.stdout.count("<rect") >= 20
    shot = tmp_path / "shot.png"
    run = subprocess.run([*flags, f"--screenshot={shot}", "--window-size=1200,1600", page.as_uri()],
                         capture_output=True, timeout=120)  # fmt: skip
    assert run.returncode == 0 and shot.stat().st_size > 20_000  # drawn, not a blank page


def test_pairwise_agreement_with_human_preferences() -> None:
    rows = []
    for g in range(30):
        # the person preferred attempt 0; the reward agrees in 20 groups, ties in 5, disagrees in 5
        good, bad = (1.0, 0.0) if g < 20 else ((0.5, 0.5) if g < 25 else (0.0, 1.0))
        rows.append(ReportRow(good, group=str(g), preferred=True))
        rows.append(ReportRow(bad, group=str(g), preferred=False))
    rows.append(ReportRow(1.0, group="solo", preferred=True))  # no pair: left out
    prefs = build_report(rows, preference="preferred").preferences
    assert prefs is not None
    acc = prefs.pairwise_accuracy
    assert prefs.groups == 30 and acc.n == 30
    assert acc.value == pytest.approx((20 + 2.5) / 30)
    assert acc.ci_low is not None and acc.ci_high is not None and acc.value is not None
    assert acc.ci_low < acc.value < acc.ci_high


def test_report_command_reads_preferences_from_metadata(tmp_path: Path) -> None:
    rows = []
    for g in range(10):
        for k, text in enumerate([f"\\boxed{{{g}}}", "\\boxed{-1}"]):
            rows.append({"id": f"{g}-{k}", "group": str(g), "completion": text,
                         "reference": str(g), "metadata": {"chosen": k == 0}})  # fmt: skip
    run, report = math_report(tmp_path, rows)
    assert "pairwise accuracy 1" in run.stdout
    assert report["preferences"]["key"] == "chosen"


def test_per_step_rewards_by_position() -> None:
    rows = [ReportRow(0.5, steps=[1.0, 0.0]), ReportRow(0.7, steps=[1.0, 0.5, 0.6]),
            ReportRow(1.0)]  # fmt: skip
    steps = build_report(rows).steps
    assert steps is not None
    assert steps.rollouts == 2 and steps.mean_steps == 2.5
    assert [(p.step, p.count, p.mean) for p in steps.by_position] == [
        (0, 2, 1.0), (1, 2, 0.25), (2, 1, 0.6)
    ]  # fmt: skip
    assert "Per-step rewards" in render_html(build_report(rows))


def test_steps_flow_from_score_through_report(tmp_path: Path) -> None:
    tools = [{"name": "f", "parameters": {"type": "dict", "properties": {}}}]
    call = {"type": "function", "function": {"name": "f", "arguments": "{}"}}
    turn = {"role": "assistant", "content": "", "tool_calls": [call]}
    rows = [{"id": str(i), "completion": [turn, {"role": "tool", "content": "ok"},
                                          {"role": "assistant", "content": "done"}],
             "metadata": {"tools": tools}} for i in range(3)]  # fmt: skip
    rollouts = tmp_path / "agents.jsonl"
    write_jsonl(rollouts, rows)
    spec = tmp_path / "spec.yaml"
    spec.write_text("type: tool_use\n")
    scored = tmp_path / "scored.jsonl"
    assert cli("score", str(rollouts), "--spec", str(spec), "-o", str(scored), "-q").returncode == 0
    assert json.loads(scored.read_text().splitlines()[0])["steps"] == [1.0, 1.0]
    run = cli("report", str(scored))
    assert run.returncode == 0 and "per-step rewards on 3 trajectories" in run.stdout


def test_report_on_preference_pairs_gives_the_rewards_pairwise_accuracy(tmp_path: Path) -> None:
    # RewardBench-style: does the reward prefer what people chose? Here it agrees on 3 of 4
    # pairs (the last pair's chosen answer is the wrong one).
    pairs = [("\\boxed{4}", "\\boxed{5}", "4"), ("\\boxed{6}", "7", "6"),
             ("\\boxed{9}", "\\boxed{8}", "9"), ("\\boxed{1}", "\\boxed{2}", "2")]  # fmt: skip
    rows = [{"prompt": "?", "chosen": c, "rejected": r, "reference": ref} for c, r, ref in pairs]
    prefs = math_report(tmp_path, rows)[1]["preferences"]
    assert prefs["key"] == "preferred" and prefs["groups"] == 4
    assert prefs["pairwise_accuracy"]["value"] == 0.75


def full_report() -> Report:
    """A report with every section, integer rewards among the floats."""
    rows = [
        ReportRow(i % 3 if i % 4 else (i % 3) / 2, {"a": i / 40, "b": None if i % 5 else 1},
                  failure="judge" if i == 7 else None, group=str(i // 4), chars=10 + i,
                  label=float(i % 2), preferred=i % 4 == 0, steps=[1, 0.5] if i % 3 else None,
                  cost=0.001 * i, latency=0.1 * i, tokens=5 * i)
        for i in range(40)
    ]  # fmt: skip
    rows[7].value = None
    repeats = [[r.value for r in rows], [r.value for r in rows][::-1]]
    return build_report(rows, label="label", preference="preferred", repeats=repeats,
                        source="scored.jsonl")  # fmt: skip


def test_a_report_round_trips_through_json() -> None:
    report = full_report()
    assert all(getattr(report, section) is not None for section in Report.model_fields)
    text = report.to_json(indent=2)
    back = Report.model_validate_json(text)
    assert back == report and back.to_json(indent=2) == text
    assert report.reward.min == 0 and isinstance(report.reward.max, int)  # written as 2, not 2.0


def test_report_json_file_reads_back_as_the_same_bytes(tmp_path: Path) -> None:
    rows = [json.loads(line) for line in write_rollouts(tmp_path / "rows.jsonl").open()]
    math_report(tmp_path, rows)
    written = (tmp_path / "r.json").read_text()
    assert Report.model_validate_json(written).to_json(indent=2) == written


def test_a_file_that_is_not_a_report_says_so() -> None:
    data = full_report().to_dict()
    data["surprise"] = 1
    with pytest.raises(ValidationError, match="surprise"):
        Report.model_validate(data)


def test_a_constant_component_is_said_not_drawn_and_the_header_names_the_file_once() -> None:
    """Issue 46: a component that is 1 on every row was a full-width bar labelled "1 ... 1",
    and the page's header named the file twice; scatter dots were too small to see."""
    rows = [ReportRow(i / 10, {"same": 1.0, "varies": i / 10}, chars=10 * i) for i in range(10)]
    page = render_html(build_report(rows, source="runs/scored.jsonl"))
    assert "<b>same</b>: all 10 values are 1</p>" in page
    assert 'aria-label="varies"' in page and 'aria-label="same"' not in page
    header = page[page.index("<body>") : page.index('<div class="cards">')]
    assert header.count("scored.jsonl") == 1
    assert "<title>referee report: scored.jsonl</title>" in page
    radii = {float(r) for r in re.findall(r'<circle [^>]*r="([\d.]+)"', page)}
    assert radii and min(radii) >= 3
