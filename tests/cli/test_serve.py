"""`referee serve` and `referee openrlhf-func`: the protocols' options, as the protocols
declare them, and a protocol's refusal as a usage error naming the option."""

from __future__ import annotations

import json
from pathlib import Path

import click
import pytest

from referee.backends import protocols
from referee.cli.openrlhf import openrlhf_func
from referee.cli.serve import serve
from tests.support.cli import run
from tests.support.ors import TASKS


def _names(command: click.Command) -> list[str]:
    return [p.name for p in command.params if p.name]


def _declared(*options: object) -> list[str]:
    @click.command()
    @protocols.with_options(*options)  # type: ignore[arg-type]
    def command(**_: object) -> None: ...

    return _names(command)


def test_serve_ends_with_every_protocols_options_and_openrlhf_func_with_openrlhfs() -> None:
    table = _declared(*protocols.OPENRLHF_OPTIONS, *protocols.NEMO_GYM_OPTIONS,
                      *protocols.ORS_OPTIONS)  # fmt: skip
    assert _names(serve)[-len(table) :] == table
    markers = _declared(*protocols.OPENRLHF_OPTIONS)
    assert _names(openrlhf_func)[-len(markers) :] == markers


@pytest.mark.parametrize(
    ("args", "said"),
    [
        # the option at fault is named
        (["--tasks", "{bad}"], "Invalid value for --tasks: "),
        # the mix is: a usage error alone
        (["--env-name", "maths"], "Error: --env-name names the ORS environment of --tasks"),
        (["--no-strip-markers", "--end-marker", "X"], "Error: --no-strip-markers strips nothing"),
    ],
)
def test_a_protocols_refusal_is_a_usage_error(tmp_path: Path, args: list[str], said: str) -> None:
    pytest.importorskip("aiohttp", reason="the serve extra is not installed")
    spec = tmp_path / "spec.yaml"
    spec.write_text("type: exact_match\n")
    bad = tmp_path / "tasks.jsonl"
    bad.write_text(json.dumps(TASKS[0]) + "\n{not json\n")
    code, output = run("serve", "--spec", str(spec), "--port", "0",
                       *(a.format(bad=bad) for a in args))  # fmt: skip
    assert code == 2 and said in output, output
