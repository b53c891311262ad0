"""Old paths of moved names: importable for a release, with a warning at the user's line."""

from __future__ import annotations

import json
import pickle
import subprocess
import sys

import pytest

import referee
from referee.scores import Failure, Score


def test_the_old_score_module_answers_with_a_warning_and_leaves_the_function_alone() -> None:
    with pytest.warns(DeprecationWarning, match=r"import Score from referee\.scores"):
        from referee.score import Score as Old
    assert Old is Score
    assert callable(referee.score) and referee.score.__module__ == "referee.reward"


def test_importing_the_old_module_path_does_not_rebind_the_function() -> None:
    """A file at the old path would: the import system sets the package's attribute to the
    module it loads. In a fresh interpreter, where nothing has imported it yet."""
    code = (
        "import warnings; warnings.simplefilter('ignore')\n"
        "import referee.score\n"
        "from referee.score import Failure\n"
        "import referee\n"
        "assert callable(referee.score) and referee.score.__module__ == 'referee.reward', "
        "referee.score\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_a_score_pickled_under_the_old_module_loads() -> None:
    """A pickle names a class by module and name: the old module's name still finds it."""
    assert pickle.loads(b"creferee.scores\nScore\n.") is Score  # the GLOBAL opcode, by hand
    with pytest.warns(DeprecationWarning, match="referee.scores"):
        assert pickle.loads(b"creferee.score\nScore\n.") is Score


def test_referee_itself_imports_no_old_path() -> None:
    code = "import referee, referee.rewards, referee.spec, referee.cli, referee.backends.contract"
    subprocess.run([sys.executable, "-W", "error::DeprecationWarning", "-c", code], check=True)
    assert Failure("error", "x").type == "error"


def test_the_file_format_literal_has_its_own_name() -> None:
    """`referee.rollouts.Format` (a Literal of file shapes) sat beside `referee.rewards.Format`
    (a reward): it is FileFormat, the old name warns."""
    import referee.rollouts
    import referee.rollouts.readers
    from referee.rewards import Format as FormatReward

    for module in (referee.rollouts, referee.rollouts.readers):
        with pytest.warns(DeprecationWarning, match="FileFormat"):
            assert module.Format is module.FileFormat
    assert isinstance(FormatReward, type)


def test_one_public_reader_of_rollout_files() -> None:
    """`read_rollouts` reads every shape, canonical JSONL included; the package's second,
    stricter reader of the same files (`read_jsonl`) warns."""
    import referee.rollouts

    assert "read_jsonl" not in referee.rollouts.__all__
    with pytest.warns(DeprecationWarning, match="read_rollouts"):
        assert callable(referee.rollouts.read_jsonl)


def test_old_paths_cost_nothing_until_one_is_imported() -> None:
    """``import referee`` puts one finder last on ``sys.meta_path`` and the shadowed paths in
    ``sys.modules``; it imports no old path's new module."""
    code = (
        "import json, sys, referee\n"
        "from referee._moved import MOVED, _Finder\n"
        "print(json.dumps([sys.meta_path[-1] is _Finder,\n"
        "                  sorted(set(MOVED) & set(sys.modules)),\n"
        "                  sorted(set(MOVED.values()) & set(sys.modules))]))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert json.loads(out.stdout) == [True, ["referee.score"], []]


def test_the_finder_answers_the_table_alone() -> None:
    from referee._moved import MOVED, _Finder, install

    assert _Finder.find_spec("referee.rewards.no_such_module") is None
    assert _Finder.find_spec("referee.score") is None  # in sys.modules from the start instead
    assert all(_Finder.find_spec(old) for old in MOVED if old != "referee.score")
    with pytest.raises(ModuleNotFoundError):
        __import__("referee.rewards.no_such_module")
    install()
    assert [f for f in sys.meta_path if f is _Finder] == [_Finder]  # once, however often
