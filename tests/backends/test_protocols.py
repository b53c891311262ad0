"""`referee.backends.protocols`: each protocol's options, with the defaults the protocol's own
code has, and what `mounts` builds from them or refuses (naming the option at fault)."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import click
import pytest

from referee.backends import protocols
from referee.backends.protocols import BadOption, mounts
from referee.reward import GroupRewardBase
from referee.rewards import ExactMatch
from referee.rollout import Rollout
from referee.scores import Score
from tests.support.ors import TASKS


def _options(*options: object) -> dict[str, click.Option]:
    @click.command()
    @protocols.with_options(*options)  # type: ignore[arg-type]
    def command(**_: object) -> None: ...

    return {p.name: p for p in command.params if isinstance(p, click.Option) and p.name}


def test_the_options_are_listed_in_the_order_given_with_the_protocols_defaults() -> None:
    from referee.backends.cohort import DEFAULT_GROUP_TIMEOUT
    from referee.backends.nemo_gym import DEFAULT_REFERENCE_FIELD
    from referee.backends.ors import DEFAULT_MAX_SESSIONS, DEFAULT_SESSION_TIMEOUT

    options = _options(
        *protocols.OPENRLHF_OPTIONS, *protocols.NEMO_GYM_OPTIONS, *protocols.ORS_OPTIONS
    )
    assert list(options) == [
        "end_marker", "tokenizer", "strip_markers", "reference_field", "group_size",
        "group_timeout", "tasks", "env_name", "session_timeout", "max_sessions",
    ]  # fmt: skip
    defaults = {name: option.default for name, option in options.items()}
    assert defaults["reference_field"] == DEFAULT_REFERENCE_FIELD
    assert defaults["group_timeout"] == DEFAULT_GROUP_TIMEOUT
    assert defaults["session_timeout"] == DEFAULT_SESSION_TIMEOUT
    assert defaults["max_sessions"] == DEFAULT_MAX_SESSIONS
    assert defaults["strip_markers"] is True


def test_importing_the_table_imports_no_protocol() -> None:
    code = (
        "import sys, referee.backends.protocols\n"
        "print([m for m in ('referee.backends.nemo_gym', 'referee.backends.ors', "
        "'referee.backends.service', 'aiohttp') if m in sys.modules])"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True)  # fmt: skip
    assert done.stdout.strip() == "[]"


@dataclass(kw_only=True)
class _Rank(GroupRewardBase):
    name: str = "rank"

    async def evaluate_group(self, rollouts: Sequence[Rollout]) -> list[Score]:
        return [Score(0.5) for _ in rollouts]


DEFAULTS = {
    "reference_field": "expected_answer", "group_size": None, "group_timeout": 300.0,
    "tasks": None, "env_name": None, "session_timeout": 900.0, "max_sessions": 4096,
}  # fmt: skip


@pytest.fixture
def tasks(tmp_path: Path) -> str:
    path = tmp_path / "tasks.jsonl"
    path.write_text("".join(json.dumps(t) + "\n" for t in TASKS))
    return str(path)


def test_mounts_nemo_gym_and_ors_where_asked(tasks: str) -> None:
    pytest.importorskip("aiohttp", reason="the serve extra is not installed")
    from referee.backends.nemo_gym import ResourcesServer
    from referee.backends.ors import OpenRewardEnvironment

    found, notes = mounts(ExactMatch(), **DEFAULTS)
    assert [type(m) for m in found] == [ResourcesServer] and notes == []
    found, notes = mounts(ExactMatch(), **{**DEFAULTS, "tasks": tasks, "env_name": "maths"})
    assert [type(m) for m in found] == [ResourcesServer, OpenRewardEnvironment]
    assert isinstance(found[1], OpenRewardEnvironment) and found[1].env_name == "maths"


def test_a_group_reward_without_a_group_size_is_a_note_not_a_refusal() -> None:
    pytest.importorskip("aiohttp", reason="the serve extra is not installed")
    found, [note] = mounts(_Rank(), **DEFAULTS)
    assert found == [] and "/verify is not served" in note and "--group-size N" in note
    found, notes = mounts(_Rank(), **{**DEFAULTS, "group_size": 4})
    assert len(found) == 1 and notes == []


@pytest.mark.parametrize(
    ("options", "option", "message"),
    [
        # a task file that cannot be read: the option is named
        ({"tasks": "BAD"}, "--tasks", "tasks.jsonl:2"),
        # a name for an environment that is not served: the mix is at fault
        ({"env_name": "maths"}, None, "--env-name names the ORS environment of --tasks"),
        # what NeMo Gym's server refuses
        ({"reference_field": ""}, None, "reference_field must name a task field"),
        # what ORS's environment refuses
        ({"tasks": "GOOD", "env_name": "two words"}, None, "not a name ORS clients can"),
    ],
)
def test_options_that_do_not_fit_name_the_one_at_fault(
    tmp_path: Path, tasks: str, options: dict[str, object], option: str | None, message: str
) -> None:
    pytest.importorskip("aiohttp", reason="the serve extra is not installed")
    bad = tmp_path / "bad" / "tasks.jsonl"
    bad.parent.mkdir()
    bad.write_text(json.dumps(TASKS[0]) + "\n{not json\n")
    files = {"BAD": str(bad), "GOOD": tasks}
    given = {k: files.get(v, v) if isinstance(v, str) else v for k, v in options.items()}
    with pytest.raises(BadOption, match=message) as raised:
        mounts(ExactMatch(), **{**DEFAULTS, **given})
    assert raised.value.option == option
