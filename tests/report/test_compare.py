from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from referee.report.compare import Compared, Comparison, compare
from tests.support.rollouts import write_jsonl


def test_identical_scorings_agree_completely() -> None:
    rows = [Compared(str(i), str(i // 3), i / 9, i / 9) for i in range(9)]
    result = compare(rows)
    assert result.spearman.value == pytest.approx(1.0)
    assert result.verdict_agreement == 1.0 and result.flipped == 0
    groups = result.within_groups
    assert groups is not None
    assert groups.mean_within_group_kendall_tau == pytest.approx(1.0)
    assert groups.best_attempt_changed_share == 0.0
    assert groups.advantage_sign_differs_share == 0.0


def test_a_reversed_ranking_inside_groups_is_seen() -> None:
    rows = []
    for g in range(4):
        for k in range(3):
            rows.append(Compared(f"{g}-{k}", str(g), k / 2, (2 - k) / 2))
    rows.append(Compared("x", None, None, 1.0))
    result = compare(rows, top=2)
    groups = result.within_groups
    assert groups is not None
    assert groups.mean_within_group_kendall_tau == pytest.approx(-1.0)
    assert groups.best_attempt_changed_share == 1.0
    assert groups.advantage_sign_differs_share == pytest.approx(8 / 12)  # middles stay at 0
    assert result.flipped == 8 and len(result.top_flipped) == 2
    assert abs(result.top_flipped[0].a - result.top_flipped[0].b) == 1.0
    assert result.failed_only_a == 1 and result.compared == 12
    written = result.to_dict()  # the rewards' names stand in the written keys
    assert written["only_A_failed"] == 1
    assert set(written["top_flipped"][0]) == {"id", "group", "A", "B"}


def test_compare_command_with_two_specs_and_with_two_scored_files(tmp_path: Path) -> None:
    rows = []
    for g in range(10):
        for k, text in enumerate([f"\\boxed{{{g}}}", f"answer: {g}", "\\boxed{-1}"]):
            rows.append({"id": f"{g}-{k}", "group": str(g), "completion": text,
                         "reference": str(g)})  # fmt: skip
    rollouts = tmp_path / "in.jsonl"
    write_jsonl(rollouts, rows)
    strict = tmp_path / "strict.yaml"
    strict.write_text("type: math_answer\nanswer: boxed\n")
    lenient = tmp_path / "lenient.yaml"
    lenient.write_text("type: math_answer\nanswer: latex_or_expr\n")
    out = tmp_path / "cmp.json"
    cmd = [sys.executable, "-m", "referee.cli", "compare"]
    run = subprocess.run([*cmd, str(strict), str(lenient), "--rollouts", str(rollouts),
                          "--json", str(out)], capture_output=True, text=True)  # fmt: skip
    assert run.returncode == 0, run.stderr
    result = json.loads(out.read_text())
    assert result["names"] == ["strict", "lenient"]
    assert "largest flips" in run.stdout
    # Scored files give the same comparison.
    scored = []
    for spec in (strict, lenient):
        path = tmp_path / f"{spec.stem}.jsonl"
        subprocess.run([sys.executable, "-m", "referee.cli", "score", str(rollouts), "--spec",
                        str(spec), "-o", str(path), "-q"], check=True)  # fmt: skip
        scored.append(path)
    run = subprocess.run([*cmd, *map(str, scored), "--json", str(out)], capture_output=True,
                         text=True)  # fmt: skip
    assert run.returncode == 0, run.stderr
    assert json.loads(out.read_text()) == result


@pytest.mark.parametrize(
    "names",
    [
        ("strict", "lenient"),
        ("b", "a"),  # the names of the other's fields: the written form still reads back right
        ("failed_only_b", "x"),
    ],
)
def test_a_comparison_round_trips_through_json(names: tuple[str, str]) -> None:
    rows = [Compared(f"{g}-{k}", str(g), k / 2, (2 - k) / 2) for g in range(4) for k in range(3)]
    rows += [Compared("x", None, None, 1), Compared("y", None, 1, None), Compared("z", "g", 1, 0)]
    result = compare(rows, top=3, names=names)
    text = result.to_json(indent=2)
    assert f'"only_{names[0]}_failed": 1' in text
    back = Comparison.model_validate_json(text)
    assert back == result and back.to_json(indent=2) == text
    assert back.failed_only_a == 1 and back.top_flipped[0].a in (0, 1)


def test_two_rewards_of_one_name_cannot_be_told_apart() -> None:
    with pytest.raises(ValueError, match="different names"):
        compare([Compared("x", None, 1.0, 0.0)], names=("A", "A"))


def test_a_small_drop_on_a_few_rollouts_is_shown_rollout_by_rollout(tmp_path: Path) -> None:
    """Issue 46: a 0.2 drop on 7 rollouts showed only as a Spearman of 0.866, and "verdicts
    agree on 1" meant 100%. The terminal now counts the rollouts that moved, as a share, and
    --html shows them side by side with both reasons and the completion."""
    rows = [{"id": str(i), "completion": "x" * (5 + i), "reference": "x" * (5 + i)}
            for i in range(20)]  # fmt: skip
    rollouts = write_jsonl(tmp_path / "in.jsonl", rows)
    plain = tmp_path / "plain.yaml"
    plain.write_text("type: exact_match\n")
    (tmp_path / "drop.py").write_text(
        "def drop(rollout):\n    return 0.8 if len(rollout.completion) > 17 else 1.0\n"
    )
    dropped = tmp_path / "dropped.yaml"
    dropped.write_text("type: python\nfunction: drop.py:drop\n")
    page = tmp_path / "cmp.html"
    cmd = [sys.executable, "-m", "referee", "compare", "--spec", str(plain), "--spec",
           str(dropped), "--rollouts", str(rollouts), "--html", str(page)]  # fmt: skip
    run = subprocess.run(cmd, capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    assert "agree on 100.0% of them" in run.stdout and "7 rollouts moved" in run.stdout
    assert "largest moves" in run.stdout
    html = page.read_text()
    assert "The 7 rollouts that moved most" in html and html.count('class="down">-0.2') == 7
    assert "x" * 24 in html  # the completion beside the two values
    data = re.search(r'id="comparison-data">(.*?)</script>', html, re.DOTALL)
    assert data and json.loads(data.group(1))["moved"] == 7
