"""MkDocs hooks: one reference page per reward type, generated at build time from the type
itself (`referee.spec.reference`: its option schema and its docstring), so a page cannot drift
from the code. `referee types NAME` prints the same Markdown."""

from __future__ import annotations

from typing import Any

from mkdocs.config.defaults import MkDocsConfig
from mkdocs.structure.files import File, Files

_INDEX = "reference/types/index.md"

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
    """Generate the index and one page per type."""
    from referee.spec.reference import index_markdown

    references = _references()
    files.append(File.generated(config, _INDEX, content=_INTRO + index_markdown(references)))
    for ref in references:
        page = ref.markdown(specs_guide="../../guides/specs.md")
        files.append(File.generated(config, f"reference/types/{ref.name}.md", content=page))
    return files
