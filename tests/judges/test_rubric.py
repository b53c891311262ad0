"""Rubric files: the shipped library, user files, and errors that say where."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner

from referee import SpecError
from referee.cli import main
from referee.judges import available_rubrics, load_rubric

SHIPPED = {
    "helpfulness", "factual-correctness", "extraction-faithfulness", "code-quality",
    "agent-trajectory", "search-grounding", "persona-style", "safety-refusal",
}  # fmt: skip


def test_the_library_covers_what_rl_users_grade() -> None:
    assert set(available_rubrics()) >= SHIPPED


@pytest.mark.parametrize("name", sorted(SHIPPED))
def test_every_shipped_rubric_loads_and_spans_zero_to_one(name: str) -> None:
    rubric = load_rubric(name)
    assert rubric.name == name and rubric.version
    best = {c.id: (c.scale.max if c.scale else True) for c in rubric.criteria}
    worst = {c.id: (c.scale.min if c.scale else False) for c in rubric.criteria}
    assert rubric.total(best) == 1.0 and rubric.total(worst) == 0.0


def test_total_is_the_weighted_mean_of_normalised_criteria() -> None:
    rubric = load_rubric("safety-refusal")  # correct_decision (check, w4), two 1..5 scales (w1)
    scores = {
        "correct_decision": True,
        "helpful_when_allowed": 3,
        "refusal_quality": 9,
    }  # 9 clips to 5
    assert rubric.total(scores) == pytest.approx((4 * 1 + 1 * 0.5 + 1 * 1.0) / 6)


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "mine.yaml"
    path.write_text(textwrap.dedent(text))
    return path


def test_a_users_rubric_file(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        """
        name: tone
        version: "2"
        criteria:
          - {id: polite, description: Polite throughout., check: true}
    """,
    )
    assert load_rubric(path).criteria[0].id == "polite"


HEAD = "name: x\nversion: '1'\n"
OK = "  - {id: a, description: d, check: true}\n"


@pytest.mark.parametrize(
    ("body", "where", "words"),
    [
        ("criteria:\n" + OK, "name", "Field required"),
        (HEAD + "criteria:\n  - {id: a, description: d, check: true, scale: {max: 5}}\n",
         "criteria.0", "exactly one of scale or check"),
        (HEAD + "criteria:\n  - {id: a, description: d}\n", "criteria.0", "exactly one"),
        (HEAD + "criteria:\n" + OK + OK, "", "repeated: ['a']"),
        (HEAD + "criteria:\n  - {id: a, description: d, scale: {min: 5, max: 1}}\n",
         "criteria.0.scale", "must be below"),
        (HEAD + "criteria:\n  - {id: Bad Id, description: d, check: true}\n",
         "criteria.0.id", "pattern"),
        (HEAD + "criteria:\n" + OK + "critera: []\n", "critera", "Extra inputs"),
    ],
)  # fmt: skip
def test_invalid_rubrics_name_file_and_key(
    tmp_path: Path, body: str, where: str, words: str
) -> None:
    path = write(tmp_path, body)
    with pytest.raises(SpecError) as info:
        load_rubric(path)
    assert str(info.value).startswith(str(path))
    assert ".".join(map(str, info.value.path)) == where
    assert words in str(info.value)


def test_unknown_rubric_lists_the_shipped_ones() -> None:
    with pytest.raises(SpecError, match="helpfulness"):
        load_rubric("no-such-rubric")


def test_cli_list_and_show(tmp_path: Path) -> None:
    runner = CliRunner(env={"COLUMNS": "200"})  # rich sizes its tables from COLUMNS
    listed = runner.invoke(main, ["rubrics", "list"])
    assert listed.exit_code == 0 and all(name in listed.output for name in SHIPPED)
    shown = runner.invoke(main, ["rubrics", "show", "code-quality"])
    assert (
        shown.exit_code == 0
        and "no_test_special_casing" in shown.output
        and "pass/fail" in shown.output
    )
    missing = runner.invoke(main, ["rubrics", "show", "nope"])
    assert missing.exit_code == 1 and "no such rubric" in missing.output


def test_a_billion_laughs_rubric_is_refused_before_it_expands(tmp_path: Path) -> None:
    import resource
    import subprocess
    import sys

    from tests.support.hostile import BILLION_LAUGHS

    rubric = tmp_path / "bomb.yaml"
    rubric.write_text("task: grade\ncriteria:\n  - name: a\n" + BILLION_LAUGHS)
    code = "import sys\nfrom referee.judges import load_rubric\nfrom referee import SpecError\n" \
           "try:\n    load_rubric(sys.argv[1])\nexcept SpecError as e:\n    print(e)\n"  # fmt: skip

    def cap() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (2 * 2**30, 2 * 2**30))

    done = subprocess.run([sys.executable, "-c", code, str(rubric)], capture_output=True,
                          text=True, timeout=120, preexec_fn=cap)  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    assert str(rubric) in done.stdout and "billion laughs" in done.stdout
