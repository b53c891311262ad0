"""Modules of `referee.rewards` that moved into families still import from their old paths, for a
release, with a DeprecationWarning naming the new one (`referee._moved.MOVED`, one table); the
old paths' public names are all there; referee never imports them."""

from __future__ import annotations

import importlib
import importlib.util
import pickle
import subprocess
import sys
from pathlib import Path

import pytest

from referee._moved import MOVED, SHADOWED

ROOT = Path(__file__).resolve().parents[2]

# Each old path's __all__, as the module there had it: what a user may have imported.
OLD = {
    # issue 39
    "referee.rewards.code_reference": ("CodeReference", "IoCase", "IoTestsReference",
                                       "PytestReference", "PythonTestsReference",
                                       "code_reference"),
    "referee.rewards.patch_reference": ("PatchReference",),
    "referee.rewards.process_reward_model": ("ProcessRewardModel",),
    "referee.rewards.reward_model": ("GroupRewardModel", "Normalize", "RewardModel"),
    # issue 45
    "referee.rewards.fields": ("FieldMatch", "FieldRule", "MatcherKind"),
    "referee.rewards.instruction_following": ("InstructionFollowing",),
    "referee.rewards.json": ("JsonSchema", "JsonValid"),
    "referee.rewards.judge": ("ChecklistJudge", "PairwiseJudge", "ReferenceJudge", "RubricJudge",
                              "fence_for", "verdict_model"),
    "referee.rewards.length": ("Length", "LengthUnit", "Repetition"),
    "referee.rewards.openai_graders": ("OpenAIGrader",),
    "referee.rewards.openai_graders.expressions": ("FUNCTIONS", "FormulaError", "InvalidValue",
                                                   "check_formula", "evaluate_formula"),
    "referee.rewards.openai_graders.graders": ("GRADER_TYPES", "Grader", "GraderSpecError",
                                               "MultiGrader", "parse_grader"),
    "referee.rewards.openai_graders.model_graders": ("ScoreVerdict", "label_verdict",
                                                     "litellm_model", "messages", "reply_format",
                                                     "texts"),
    "referee.rewards.openai_graders.python_grader": ("RUNNER", "run_grader"),
    "referee.rewards.openai_graders.similarity": ("METRICS", "UNAVAILABLE", "metric"),
    "referee.rewards.openai_graders.templating": ("Sample", "TemplateError", "check_template",
                                                  "references", "render"),
    "referee.rewards.ranking": ("GroupRank",),
    "referee.rewards.reasoning": ("EVALS_ANSWER", "ReasoningExtract", "ReasoningGym",
                                  "entry_reference"),
    "referee.rewards.retrieval": ("Retrieval",),
    "referee.rewards.similarity": ("BleuTokenizer", "RougeMeasure", "SimilarityMetric",
                                   "TextSimilarity"),
    "referee.rewards.tools": ("ToolCallMatch", "check_call"),
    "referee.rewards.tournament": ("PairwiseTournament", "tournament_pairs"),
}  # fmt: skip

# Old modules whose path is now their family's package: nothing moved, the names are there.
BECAME_PACKAGES = {
    "referee.rewards.agent": ("FinalAnswer", "ToolUse", "tool_schemas"),
    "referee.rewards.math": ("MathAnswer",),
    "referee.rewards.text": ("Contains", "ExactMatch", "Format", "Regex", "RegexFlag"),
}

REWARDS = sorted(old for old in MOVED if old.startswith("referee.rewards."))


def test_the_table_holds_every_old_path_of_the_rewards() -> None:
    assert sorted(OLD) == REWARDS
    assert not set(SHADOWED) & set(REWARDS)  # none is a name of its package


def _forget(old: str) -> None:
    """`old` (and any old path below it) as never imported: the warning comes at the first."""
    for name in [m for m in sys.modules if m == old or m.startswith(f"{old}.")]:
        del sys.modules[name]
        parent, _, child = name.rpartition(".")
        if parent in sys.modules:
            vars(sys.modules[parent]).pop(child, None)  # the attribute its import set


@pytest.mark.parametrize("old", REWARDS)
def test_an_old_path_warns_at_the_import_and_gives_the_same_names(old: str) -> None:
    new = MOVED[old]
    parent = old.rpartition(".")[0]
    if parent in MOVED:  # an old package's old submodule: its parent is imported first
        importlib.import_module(MOVED[parent])
        _forget(parent)
        with pytest.warns(DeprecationWarning, match=f"{parent} is deprecated"):
            __import__(parent)
    _forget(old)
    with pytest.warns(DeprecationWarning, match=f"{old} is deprecated: import from {new}") as seen:
        __import__(old)  # an import statement's own call: no frame of importlib's between
    assert seen[-1].filename == __file__  # at the line of the import, for the user to change
    shim = sys.modules[old]
    moved = importlib.import_module(new)
    assert shim.__all__ == list(moved.__all__)
    for name in OLD[old]:
        assert getattr(shim, name) is getattr(moved, name), name


@pytest.mark.parametrize("old", REWARDS)
def test_an_old_path_is_a_file_no_more_and_its_new_one_is(old: str) -> None:
    """The table is the one place an old path answers from: no shim file is left behind."""
    path = ROOT.joinpath(*old.split("."))
    assert not path.with_suffix(".py").exists() and not path.is_dir()
    spec = importlib.util.find_spec(old)
    assert spec is not None and spec.origin is None  # the table's finder, not a file
    new = importlib.util.find_spec(MOVED[old])
    assert new is not None and new.has_location


@pytest.mark.parametrize(("package", "names"), sorted(BECAME_PACKAGES.items()))
def test_an_old_module_that_is_its_familys_package_has_its_names(
    package: str, names: tuple[str, ...]
) -> None:
    module = importlib.import_module(package)
    assert set(names) <= set(module.__all__)
    assert all(getattr(module, n) is not None for n in names)


def test_a_reward_pickled_under_an_old_path_loads() -> None:
    """A pickle names a class by module and name: the old module's name still finds it."""
    from referee.rewards.structured.json import JsonValid

    _forget("referee.rewards.json")
    with pytest.warns(DeprecationWarning, match="referee.rewards.structured.json"):
        assert pickle.loads(b"creferee.rewards.json\nJsonValid\n.") is JsonValid


def test_from_the_package_an_old_module_name_answers_too() -> None:
    import referee.rewards

    _forget("referee.rewards.ranking")
    with pytest.warns(DeprecationWarning, match="referee.rewards.judged.group_rank"):
        from referee.rewards import ranking
    assert ranking.GroupRank is referee.rewards.GroupRank


def test_referee_imports_no_old_path() -> None:
    """Not at its import, nor loading every type, nor anywhere the CLI or the report reach."""
    code = (
        "import sys, referee, referee.rewards, referee.spec, referee.cli, referee.report\n"
        "from referee.registry import BUILTIN, lookup\n"
        "assert all(lookup(name) for name in BUILTIN)\n"
        "for name in referee.rewards.__all__: getattr(referee.rewards, name)\n"
        f"print(sorted(set({REWARDS!r}) & set(sys.modules)))\n"
    )
    out = subprocess.run(
        [sys.executable, "-W", "error::DeprecationWarning", "-c", code],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    assert out.stdout.strip() == "[]"
