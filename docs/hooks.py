"""MkDocs hooks: one reference page per reward type, generated at build time from the type
itself (`referee.spec.reference`: its option schema and its docstring), so a page cannot drift
from the code. `referee types NAME` prints the same Markdown. And the conformance matrix's
table (every type by every trainer's entry point), drawn from the registry and the doors the
matrix test runs (`tests/support/doors.py`), so the page lists what the test checks."""

from __future__ import annotations

import contextlib
import sys
from pathlib import Path
from typing import Any

from mkdocs.config.defaults import MkDocsConfig
from mkdocs.structure.files import File, Files

_INDEX = "reference/types/index.md"
_MATRIX = "trainers/matrix.md"

_INTRO = """# Reward types

Every built-in reward type, with where it runs. Each page gives the type's options (type,
default, meaning) and an example spec, generated from the type itself; `referee types NAME`
prints the same. `runs` says where the work happens: inline (in the caller's thread),
process (a worker process killed at the deadline), sandbox (the code in the sandbox),
event loop (it waits on a judge or a model), parts (where its inner reward runs).

Keys every reward takes (`name`, `deadline`, `run_in`, `scale`, `offset`, `clip`) and how
rewards combine are in [Specs and composition](../../guides/specs.md). To add a type of your
own, see [Your own Python reward](../../guides/python-rewards.md).

"""


def _references() -> list[Any]:
    from referee.spec.reference import all_references

    return all_references()


def on_config(config: MkDocsConfig) -> MkDocsConfig:
    """Put each type's page in the nav, under the reward types' index."""
    pages = [{ref.name: f"reference/types/{ref.name}.md"} for ref in _references()]
    for section in config.nav or []:
        if isinstance(section, dict) and "Reference" in section:
            entries = section["Reference"]
            for i, entry in enumerate(entries):
                if isinstance(entry, dict) and entry.get("Reward types") == _INDEX:
                    entries[i] = {"Reward types": [_INDEX, *pages]}
                    return config
    raise ValueError(f"mkdocs.yml's nav has no 'Reward types: {_INDEX}' under 'Reference'")


def on_files(files: Files, config: MkDocsConfig) -> Files:
    """Generate the index, one page per type, and the conformance matrix."""
    from referee.spec.reference import index_markdown

    references = _references()
    files.append(File.generated(config, _INDEX, content=_INTRO + index_markdown(references)))
    for ref in references:
        page = ref.markdown(specs_guide="../../guides/specs.md")
        files.append(File.generated(config, f"reference/types/{ref.name}.md", content=page))
    files.append(File.generated(config, _MATRIX, content=matrix_page()))
    return files


_MATRIX_INTRO = """# Conformance matrix

A reward type is done when it gives the same number through every entry point. The test
suite holds each built-in type to that: `tests/backends/test_matrix.py` takes every
registered type's scoring example (the rollouts and values on its
[reference page](../reference/types/index.md), under *Scores*), sends the rollouts through
each door below, fed as that trainer or client feeds it, and checks that every door gives the
example's value to 1e-9 (after a cast to float32 where the trainer keeps float32: verl's
managers), with no failure flag. A type joins the matrix by being registered: there is no
test to write.

A ✓ is a cell where the number must be the same. *refused* is a spec that needs what the
door cannot carry: a group reward where rollouts come one at a time (each would be ranked
alone), a trajectory reward (`tool_use`, `retrieval`, `tool_call_match`) where the response
arrives as text (it would see no calls), `length` in tokens where no token count arrives.
The door must refuse the spec when it loads, with an error that says so
(`referee.backends.contract.refuse_unfit`), and the matrix checks that it does. A door
that hangs fails its cell, not the suite. A cell that fails is a finding: the door, or the type,
does not keep the contract.

"""

_MATRIX_END = """
How each door is fed, and what it cannot carry: a text protocol (OpenRLHF, an ORS episode)
carries no metadata and no trajectory, only its final text; NeMo Gym's `/verify` carries a
trajectory as Responses items and, of the metadata, the tool definitions and the token count;
verl's own managers decode the response to text and pass no token count, where referee's two
managers count the response's tokens and, with `per_turn`, read the model's turns and the
tools' apart (`response_mask`; a single turn that calls a tool too). A plugin's type is in the
matrix too once it has a scoring example (see *Scores* in
[Your own Python reward](../guides/python-rewards.md)).
"""


def matrix_page() -> str:
    """The conformance matrix as a page: every registered type with an example, by door."""
    root = str(Path(__file__).resolve().parent.parent)
    if root not in sys.path:
        sys.path.insert(0, root)  # tests.support.doors, the matrix test's own table
    import yaml

    import referee
    from referee.registry import lookup
    from referee.reward import needs
    from tests.support.doors import matrix_markdown

    types = []
    for ref in _references():
        cls = lookup(ref.name)
        wants = {"group"} if callable(getattr(cls, "score_group", None)) else set()
        with contextlib.suppress(Exception):  # an example that loads only beside its files
            example = referee.load(yaml.safe_load(ref.example or "{}"))
            wants |= {n for _, n in needs(example) if n != "reference"}
        types.append((ref.name, frozenset(wants)))
    return _MATRIX_INTRO + matrix_markdown(types) + _MATRIX_END


_CLI_PAGE = "reference/cli.md"


def on_page_content(html: str, page: Any, config: MkDocsConfig, files: Files) -> str:
    """The CLI page as a reader needs it: an option with no default says none, not click's
    internal ``Sentinel.UNSET``; each command in the list of subcommands has its whole
    one-line help (`referee.cli.COMMANDS`), where mkdocs-click cut the docstring's first line
    mid-sentence."""
    if page.file.src_uri != _CLI_PAGE:
        return html
    import html as html_lib
    import re

    from referee.cli import COMMANDS

    html = html.replace("<td><code>Sentinel.UNSET</code></td>", "<td>none</td>")

    def whole(match: re.Match[str]) -> str:
        name = match.group(2)
        if name not in COMMANDS:
            return match.group(0)
        text = re.sub(r"`([^`]+)`", r"<code>\1</code>", html_lib.escape(COMMANDS[name][1]))
        return f"{match.group(1)}{text}</li>"

    return re.sub(r'(<li><em><a href="#referee-[\w-]+">([\w-]+)</a></em>: )[^\n]*?</li>', whole,
                  html, flags=re.S)  # fmt: skip
