"""`referee audit-judge` on judges with biases planted at known sizes, over real HTTP: the
audit recovers each within its interval, and a fair judge passes every gate."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

import referee
from referee._aio import run_sync
from referee.cli.audit_judge import _print as show
from referee.judges.testing import FakeJudgeServer
from referee.report.audit import AuditOptions, JudgeAudit, reseed, run_audit
from referee.report.audit_html import render_audit
from referee.report.audit_pairs import as_list, contains_list
from referee.report.results import Statistic
from tests.support import planted


def audit(spec: dict[str, Any], rollouts: list[referee.Rollout] | None = None,
          **options: Any) -> JudgeAudit:  # fmt: skip
    gates = options.pop("gates", None)
    reward = referee.load(reseed(spec, 0))
    return run_sync(run_audit(
        reward, rollouts or planted.rollouts(), AuditOptions(**options),
        reseeded=lambda r: referee.load(reseed(spec, r)), gates=gates,
    ))  # fmt: skip


def within(statistic: Statistic | None, planted_value: float, slack: float = 0.0) -> bool:
    assert statistic is not None and statistic.ci_low is not None and statistic.ci_high is not None
    return statistic.ci_low - slack <= planted_value <= statistic.ci_high + slack


def test_a_fair_judge_shows_no_bias_and_agrees_with_the_labels(tmp_path: Path) -> None:
    with FakeJudgeServer(planted.fair_pointwise) as server:
        a = audit(planted.rubric_spec(server.url, tmp_path))
    assert a.kind == "pointwise" and a.position is None  # one answer at a time: no slot
    assert a.prefer_longer is not None and a.prefer_longer.value == 0.5  # ties: no preference
    assert a.per_100_chars is not None and a.per_100_chars.value == 0.0
    assert a.prefer_lists is not None and a.prefer_lists.value == 0.5
    assert a.injection is not None and a.injection.value == 0.0
    assert a.consistency is not None and a.consistency.inconsistent.value == 0.0
    assert a.agreement is not None and a.agreement.accuracy is not None
    assert a.agreement.accuracy.value == 1.0 and a.agreement.cohen_kappa is not None
    assert a.systems is not None and a.systems.systems == 4
    assert a.failed == {} and a.rollouts == 40


def test_a_length_bias_is_recovered_per_100_characters(tmp_path: Path) -> None:
    with FakeJudgeServer(planted.length_biased(4)) as server:  # 4 points of 100 per 100 chars
        a = audit(planted.rubric_spec(server.url, tmp_path), measures=frozenset({"length"}))
    assert a.prefer_longer is not None and a.prefer_longer.value == 1.0
    # integer scores round the planted 0.04; the rounding is at most 0.005 over the padding
    assert within(a.per_100_chars, 0.04, slack=0.002), a.per_100_chars


def test_a_first_slot_bias_is_recovered_with_its_flip_rate() -> None:
    share = 0.3  # "A" 30% of the time, else by correctness
    with FakeJudgeServer(planted.slot_biased(share)) as server:
        a = audit(planted.pairwise_spec(server.url))
    assert a.kind == "pairwise" and a.position is not None
    # the pairs' answers are equally right, so every verdict not forced to A is a tie
    assert within(a.position.prefer_first, 0.5 + share / 2), a.position.prefer_first
    assert within(a.position.flip_rate, 1 - (1 - share) ** 2), a.position.flip_rate


def test_an_unbiased_pairwise_judge_has_no_position_bias() -> None:
    with FakeJudgeServer(planted.slot_biased(0.0)) as server:
        a = audit(planted.pairwise_spec(server.url), gates={"max_flip_rate": 0.05})
    assert a.position is not None and a.position.prefer_first.value == 0.5
    assert a.position.flip_rate.value == 0.0 and a.passed


def test_a_pairwise_judge_that_fails_on_disagreement_is_audited_in_both_orders() -> None:
    """`disagreement: fail` would hide every flip as a failure: the audit asks for ties."""
    with FakeJudgeServer(planted.slot_biased(1.0)) as server:
        a = audit(planted.pairwise_spec(server.url, disagreement="fail"))
    assert a.failed == {} and a.position is not None
    assert a.position.flip_rate.value == 1.0 and a.position.prefer_first.value == 1.0


def test_random_answers_are_recovered_as_inconsistency(tmp_path: Path) -> None:
    share = 0.4
    with FakeJudgeServer(planted.noisy(share)) as server:
        a = audit(planted.rubric_spec(server.url, tmp_path), repeats=3, limit=40)
    # a verdict passes when not random, or random and at least 50 of 0..100
    p_pass = (1 - share) + share * 51 / 101
    expected = 1 - p_pass**3 - (1 - p_pass) ** 3
    assert a.consistency is not None and within(a.consistency.inconsistent, expected)
    assert a.consistency.mean_variance > 0


def test_flipped_verdicts_are_recovered_as_agreement(tmp_path: Path) -> None:
    share = 0.25
    with FakeJudgeServer(planted.flipping(share)) as server:
        a = audit(planted.rubric_spec(server.url, tmp_path), limit=80,
                  rollouts=planted.rollouts(80))  # fmt: skip
    assert a.agreement is not None and within(a.agreement.accuracy, 1 - share)
    assert a.krippendorff_alpha is not None and a.krippendorff_alpha < 0.9


def test_the_list_variant_is_a_list_by_alpaca_evals_patterns() -> None:
    text = "Paris is the capital. It is on the Seine! Is it large? Yes."
    assert not contains_list(text) and contains_list(as_list(text))
    assert as_list(text).splitlines() == ["- Paris is the capital.", "- It is on the Seine!",
                                          "- Is it large?", "- Yes."]  # fmt: skip


def test_reseed_moves_every_judges_seed_flat_or_nested() -> None:
    spec = {"combine": "weighted", "components": {
        "a": {"type": "rubric_judge", "model": "openai/x", "seed": 7},
        "b": {"type": "reference_judge", "client": {"model": "openai/y"}},
        "c": {"type": "pairwise_judge", "model": "openai/z", "disagreement": "fail"},
        "d": {"type": "exact_match"}}}  # fmt: skip
    out = reseed(spec, 2)["components"]
    assert out["a"]["seed"] == 9 and out["b"]["client"]["seed"] == 2
    assert out["c"] == {"type": "pairwise_judge", "model": "openai/z", "seed": 2,
                        "disagreement": "tie"}  # fmt: skip
    assert out["d"] == {"type": "exact_match"} and spec["components"]["a"]["seed"] == 7


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "referee.cli", "audit-judge", *args],
                          capture_output=True, text=True, timeout=300, check=False)  # fmt: skip


def test_verdicts_with_no_value_are_counted_and_the_first_of_each_kind_is_said(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with FakeJudgeServer(planted.tongue_tied(0.2)) as server:
        a = audit(planted.rubric_spec(server.url, tmp_path), measures=frozenset({"length"}))
    assert set(a.failed) == {"judge"} and 0 < a.failed["judge"] < a.verdicts
    assert set(a.failure_examples) == {"judge"}
    assert "not a valid verdict: no JSON object" in a.failure_examples["judge"]
    page = render_audit(a)
    assert "failed as <code>judge</code>; the first: the judge&#x27;s reply is not a valid" in page
    capsys.readouterr()
    show(a)
    said = capsys.readouterr().out
    assert f"verdicts with no value: {a.failed['judge']} judge" in said
    assert "first judge: the judge's reply is not a valid verdict" in said
    with FakeJudgeServer(planted.fair_pointwise) as server:
        fair = audit(planted.rubric_spec(server.url, tmp_path), measures=frozenset({"length"}))
    assert fair.failed == {} and fair.failure_examples == {}


def test_the_command_gates_a_judge_and_writes_json_and_html(tmp_path: Path) -> None:
    rows = tmp_path / "rollouts.jsonl"
    rows.write_text("".join(r.model_dump_json() + "\n" for r in planted.rollouts(12)))
    with FakeJudgeServer(planted.length_biased(4)) as server:
        spec = tmp_path / "judge.yaml"
        spec.write_text(yaml.safe_dump(planted.rubric_spec(server.url, tmp_path)))
        out, page = tmp_path / "audit.json", tmp_path / "audit.html"
        done = cli(str(rows), "--spec", str(spec), "--max-prefer-longer", "0.6",
                   "--max-injection", "1", "--json", str(out), "--html", str(page))  # fmt: skip
        assert done.returncode == 1, done.stderr[-2000:]
        assert "FAIL max_prefer_longer" in done.stdout and "pass max_injection" in done.stdout
        assert "P(prefer longer)" in done.stdout
        written = JudgeAudit.model_validate_json(out.read_text())
        assert written.judge == "judge" and [g.passed for g in written.gates] == [False, True]
        assert "audit-data" in page.read_text() and "P(prefer longer)" in page.read_text()
    with FakeJudgeServer(planted.fair_pointwise) as server:
        spec.write_text(yaml.safe_dump(planted.rubric_spec(server.url, tmp_path)))
        done = cli(str(rows), "--spec", str(spec), "--max-prefer-longer", "0.6",
                   "--min-agreement", "0.9", "--only", "length,agreement")  # fmt: skip
        assert done.returncode == 0, done.stdout + done.stderr[-2000:]
        assert "pass min_agreement" in done.stdout


def test_a_gate_that_cannot_be_measured_fails_saying_so(tmp_path: Path) -> None:
    rows = tmp_path / "rollouts.jsonl"
    unlabelled = planted.rollouts(4, labelled=False)
    rows.write_text("".join(r.model_dump_json() + "\n" for r in unlabelled))
    with FakeJudgeServer(planted.fair_pointwise) as server:
        spec = tmp_path / "judge.yaml"
        spec.write_text(yaml.safe_dump(planted.rubric_spec(server.url, tmp_path)))
        done = cli(str(rows), "--spec", str(spec), "--min-kappa", "0.5", "--only", "agreement")
    assert done.returncode == 1
    assert "FAIL min_kappa" in done.stdout and "not measured" in done.stdout


def test_an_unknown_measure_is_a_usage_error(tmp_path: Path) -> None:
    rows = tmp_path / "rollouts.jsonl"
    rows.write_text(json.dumps({"completion": "x"}) + "\n")
    spec = tmp_path / "s.yaml"
    spec.write_text("type: exact_match\n")
    done = cli(str(rows), "--spec", str(spec), "--only", "lenght")
    assert done.returncode == 2 and "unknown measure 'lenght'" in done.stderr


@pytest.mark.parametrize("measure", ["position", "length", "lists", "injection"])
def test_only_one_measure_asks_only_its_pairs(measure: str) -> None:
    with FakeJudgeServer(planted.slot_biased(0.0)) as server:
        a = audit(planted.pairwise_spec(server.url), measures=frozenset({measure}))
    taken = {"position": a.position, "length": a.prefer_longer, "lists": a.prefer_lists,
             "injection": a.injection}  # fmt: skip
    assert taken[measure] is not None
    assert all(v is None for k, v in taken.items() if k not in (measure, "position"))


def test_the_alpaca_eval_columns_named_are_its_leaderboards() -> None:
    """Each AlpacaEval column the audit's table names is a column of the evaluator leaderboard
    that the alpaca-eval wheel ships."""
    import csv
    from importlib.metadata import PackageNotFoundError, distribution

    from referee.report.audit_html import measure_rows

    try:  # its package is not imported (its __init__ needs setuptools' pkg_resources)
        wheel = distribution("alpaca-eval")
    except PackageNotFoundError:
        pytest.skip("alpaca-eval is not installed (pip install --no-deps alpaca-eval==0.6.6)")
    table = Path(str(wheel.locate_file("alpaca_eval/leaderboards/evaluators/"
                                      "evaluators_leaderboard.csv")))  # fmt: skip
    with table.open() as f:
        columns = set(next(csv.reader(f)))
    with FakeJudgeServer(planted.slot_biased(0.0)) as server:
        a = audit(planted.pairwise_spec(server.url), measures=frozenset({"position"}))
    named = {row.alpaca for row in measure_rows(a) if row.alpaca} | {"Proba. prefer longer",
             "Proba. prefer lists", "Human agreement", "Spearman corr.", "Pearson corr.",
             "Variance"}  # fmt: skip
    assert named <= columns, named - columns
