"""The monitor's timeline drawn as a page: from the JSONL a run's monitor writes, from
`referee watch --json`, and by `referee report --timeline` (alone and after a report)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

import referee
from referee import Rollout
from referee._aio import run_sync
from referee.cli import main
from referee.errors import RolloutError
from referee.monitor import Monitor, Rule, Rules, by_step
from referee.monitor.timeline import line_chart, read_timeline, render_timeline


def run(hack_from: int = 4, steps: int = 8) -> list[Rollout]:
    """Two groups of three a step; from `hack_from` the wrong answers grow long."""
    return [
        Rollout(id=f"s{s}g{g}a{a}", group=f"s{s}g{g}", prompt="2+2?", reference="4",
                completion=("5" + " pad" * 40 * (a + 1)) if s >= hack_from else f"{a + 3}",
                metadata={"step": s})
        for s in range(steps) for g in range(2) for a in range(3)
    ]  # fmt: skip


def monitored(specs: tuple[Path, Path], timeline: Path) -> Monitor:
    proxy = referee.load(specs[0])
    rules = Rules(gap=Rule(bound=0.2, steps=2, action="stop"))
    monitor = Monitor(referee.load(specs[1]), gold_sample=6, rules=rules, timeline=timeline)

    async def replay() -> None:
        for step, rows in by_step(run()).items():
            await monitor.observe(step, rows, await proxy.score_batch(rows))

    run_sync(replay())
    return monitor


def test_the_jsonl_a_monitor_writes_reads_back_as_its_watch(
    specs: tuple[Path, Path], tmp_path: Path
) -> None:
    monitor = monitored(specs, tmp_path / "monitor.jsonl")
    read = read_timeline(tmp_path / "monitor.jsonl")
    assert read == monitor.watch()
    assert read.stopped_at == 5 and ("gap", 5, "stop") in [(a.rule, a.step, a.action)
                                                            for a in read.alarms]  # fmt: skip
    (tmp_path / "watch.json").write_text(monitor.watch().to_json(indent=2))
    assert read_timeline(tmp_path / "watch.json") == read  # watch --json reads the same


def test_the_page_draws_each_figure_over_the_steps_with_the_alarms_marked(
    specs: tuple[Path, Path], tmp_path: Path
) -> None:
    watch = monitored(specs, tmp_path / "monitor.jsonl").watch()
    page = render_timeline(watch, source=str(tmp_path / "monitor.jsonl"))
    assert "proxy - gold gap" in page and "zero-variance groups" in page
    assert "stopped at<b>step 5</b>" in page
    # the gap's chart: a point per step, its bound dashed, the alarm's step marked
    gap = next(svg for svg in re.findall(r"<svg.*?</svg>", page) if "proxy - gold gap" in svg)
    assert gap.count("<circle") == len(watch.steps)
    assert "stroke-dasharray" in gap and "<title>bound 0.2</title>" in gap
    assert gap.count('class="alarm"') == 1 and "step 5: stop gap" in gap
    embedded = re.search(r'id="timeline-data">(.*?)</script>', page)
    assert embedded is not None and json.loads(embedded.group(1)) == watch.to_dict()


def test_a_line_chart_leaves_a_gap_where_a_step_has_no_value() -> None:
    svg = line_chart({"a": [(0, 0.1), (1, 0.2), (2, float("nan")), (3, 0.4), (4, 0.5)]}, "t")
    assert svg.count("<polyline") == 2 and svg.count("<circle") == 4
    assert line_chart({"a": []}, "empty") == ""
    flat = line_chart({"a": [(0, 1.0), (1, 1.0)]}, "flat")  # one value: a range around it
    assert "<polyline" in flat and ">0.5<" in flat and ">1.5<" in flat


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ('{"step": 0, "figures": {}}\nnot json\n', r"monitor\.jsonl:1: not a timeline line"),
        ('{"step": 0}\n', r"monitor\.jsonl:1: not a timeline line: one has"),
        ("[1, 2]\n", r"monitor\.jsonl:1: not a timeline line"),
        ("{oops\n", r"monitor\.jsonl:1: not JSON"),
        ("\n\n", r"monitor\.jsonl: no step in this timeline"),
        ('{"steps": [{"step": 1}], "alarms": [], "stopped_at": null}',
         r"monitor\.jsonl: not the JSON referee watch writes: steps\.0\."),
    ],
)  # fmt: skip
def test_a_file_that_is_no_timeline_is_named_with_its_line(
    tmp_path: Path, text: str, match: str
) -> None:
    path = tmp_path / "monitor.jsonl"
    path.write_text(text)
    with pytest.raises(RolloutError, match=match):
        read_timeline(path)


def test_referee_report_draws_a_timeline_alone_and_after_a_report(
    specs: tuple[Path, Path], tmp_path: Path
) -> None:
    monitored(specs, tmp_path / "monitor.jsonl")
    runner = CliRunner()
    page = tmp_path / "timeline.html"
    done = runner.invoke(main, ["report", "--timeline", str(tmp_path / "monitor.jsonl"),
                                "--html", str(page)])  # fmt: skip
    assert done.exit_code == 0, done.output
    assert "monitor timeline: 8 steps (0 to 7)" in done.output
    assert "step 5: stop gap" in done.output
    assert "Monitor timeline" in page.read_text() and 'id="timeline-data"' in page.read_text()
    # after the report of the same run's rollouts, scored
    log = tmp_path / "run.jsonl"
    log.write_text("".join(json.dumps(r.model_dump(mode="json")) + "\n" for r in run()))
    both = tmp_path / "both.html"
    done = runner.invoke(main, ["report", "--rollouts", str(log), "--spec", str(specs[0]),
                                "--timeline", str(tmp_path / "monitor.jsonl"),
                                "--html", str(both)])  # fmt: skip
    assert done.exit_code == 0, done.output
    text = both.read_text()
    assert text.index("GRPO signal") < text.index("Monitor timeline") < text.index("report-data")
    # a file that is no timeline: a usage error naming the option and the line
    bad = tmp_path / "bad.jsonl"
    bad.write_text("{}\n")
    done = runner.invoke(main, ["report", "--timeline", str(bad)])
    assert done.exit_code == 2 and "--timeline" in done.output and "bad.jsonl:1" in done.output


def test_referee_watch_writes_the_timeline_page(specs: tuple[Path, Path], tmp_path: Path) -> None:
    log = tmp_path / "run.jsonl"
    log.write_text("".join(json.dumps(r.model_dump(mode="json")) + "\n" for r in run()))
    page = tmp_path / "watch.html"
    done = CliRunner().invoke(main, ["watch", str(log), "--spec", str(specs[0]), "--gold",
                                     str(specs[1]), "--html", str(page)])  # fmt: skip
    assert done.exit_code == 0, done.output
    text = page.read_text()
    assert "run.jsonl" in text and text.count('class="alarm"') >= 1  # the default gap rule fired


def test_referee_watch_reports_the_agreement_of_named_components(tmp_path: Path) -> None:
    spec = tmp_path / "two.yaml"
    spec.write_text("combine: mean\ncomponents:\n  loose: {type: contains}\n"
                    "  exact: {type: exact_match}\n")  # fmt: skip
    log = tmp_path / "run.jsonl"
    log.write_text("".join(json.dumps(r.model_dump(mode="json")) + "\n" for r in run()))
    out = tmp_path / "w.json"
    runner = CliRunner(env={"COLUMNS": "200"})
    done = runner.invoke(main, ["watch", str(log), "--spec", str(spec), "--agree",
                                "loose,exact", "--json", str(out)])  # fmt: skip
    assert done.exit_code == 0, done.output
    assert "min agreement" in done.output
    steps = json.loads(out.read_text())["steps"]
    assert set(steps[0]["agreement"]) == {"loose~exact"}
    done = runner.invoke(main, ["watch", str(log), "--spec", str(spec), "--agree", "loose"])
    assert done.exit_code == 2 and "two component names and a comma" in done.output


def test_names_and_messages_on_the_page_are_escaped(tmp_path: Path) -> None:
    from referee.monitor import Alarm, ComponentFigures, StepFigures, Watch

    bad = "</script><img src=x onerror=alert(1)>"
    figures = [StepFigures(step=s, rollouts=2, reward=ComponentFigures(mean=0.5, std=0.0,
                                                                          missing=0),
                           components={bad: ComponentFigures(mean=0.1 * s, std=0.0, missing=0)},
                           zero_variance=0.0, length_correlation=None, failures={}, blame={},
                           faults={}, judge_cost=0.0) for s in range(3)]  # fmt: skip
    alarm = Alarm(rule="gap", step=2, action="warn", value=1.0, bound=0.2, steps=1, message=bad)
    page = render_timeline(Watch(steps=tuple(figures), alarms=(alarm,), stopped_at=None),
                           source=str(tmp_path / bad))  # fmt: skip
    drawn, _, data = page.partition('<script type="application/json" id="timeline-data">')
    assert "<img" not in drawn and "&lt;img" in drawn  # drawn as text
    assert data.count("</") == 3  # the embedded JSON cannot end its script: </script></body></html>
