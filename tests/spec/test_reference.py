"""Each reward type's reference (`referee types NAME`, the docs site's page) comes from the type
itself: every option is there with its type, default and meaning, and the example loads."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner
from markdown_it import MarkdownIt

import referee
from referee.cli import main
from referee.registry import register
from referee.reward import CheckReward, Score
from referee.rollout import Rollout
from referee.spec.model import builtin_types
from referee.spec.reference import type_reference

BUILTIN = builtin_types()


@pytest.mark.parametrize("name", BUILTIN)
def test_every_option_is_documented(name: str) -> None:
    ref = type_reference(name)
    assert ref.summary.endswith("."), f"{name}: the summary is cut: {ref.summary!r}"
    undocumented = [o.name for o in ref.options if not o.meaning]
    assert not undocumented, f"{name}: document {undocumented} in its docstring's Attributes"


@pytest.mark.parametrize("name", BUILTIN)
def test_the_example_is_a_spec_of_the_type_that_loads(name: str, tmp_path: Path) -> None:
    ref = type_reference(name)
    assert ref.example, f"{name}: its docstring has no Example: section with a ```yaml spec"
    spec = yaml.safe_load(ref.example)
    assert spec["type"] == name
    (tmp_path / "spec.yaml").write_text(ref.example)
    for file, attr in re.findall(r"function: ([\w./-]+\.py):(\w+)", ref.example):  # python's
        (tmp_path / file).write_text(f"def {attr}(rollout, **options):\n    return 1.0\n")
    reward = referee.load(tmp_path / "spec.yaml")
    assert reward.kind == name  # type: ignore[attr-defined]


def test_an_options_type_and_default_are_the_loaders() -> None:
    options = {o.name: o for o in type_reference("field_match").options}
    assert options["extra_weight"].type == "number"  # not its lax spellings ("5", true)
    assert options["extra_weight"].default == "1.0"
    assert options["extra_fields"].type == '"penalize" | "ignore"'
    assert options["reference_key"].type == "string (or null)"
    judge = {o.name: o for o in type_reference("rubric_judge").options}
    assert judge["rubric"].default is None  # required
    assert judge["cache"].type == "boolean"
    assert judge["timeout"].meaning == "Seconds per attempt."  # the client's, written flat
    assert judge["model"].meaning.startswith("A litellm model string")  # from JudgeClient
    assert "deadline" not in options  # a key every reward takes, not the type's own


@dataclasses.dataclass(kw_only=True)
class _Undocumented(CheckReward):
    """Scores one."""

    name: str = "undocumented"
    level: int = 3

    def check(self, rollout: Rollout) -> Score:
        return Score(1.0)


def test_a_plugin_type_gets_a_reference_too(monkeypatch: pytest.MonkeyPatch) -> None:
    from referee import registry

    monkeypatch.setattr(registry, "_types", dict(registry._types))
    register("test_undocumented_plugin")(_Undocumented)
    ref = type_reference("test_undocumented_plugin")
    assert ref.plugin and ref.example is None
    assert [(o.name, o.type, o.default, o.meaning) for o in ref.options] == [
        ("level", "integer", "3", "")
    ]


def test_the_page_is_a_table_of_every_option() -> None:
    ref = type_reference("tool_use")
    tokens = MarkdownIt("commonmark").enable("table").parse(ref.markdown())
    rows = [t for t in tokens if t.type == "tr_open"]
    assert len(rows) == len(ref.options) + 1  # and the header


def test_types_name_prints_the_reference() -> None:
    result = CliRunner().invoke(main, ["types", "length"])
    assert result.exit_code == 0, result.output
    for option in type_reference("length").options:
        assert option.name in result.output
    assert "max_length" in result.output and "type: length" in result.output


def test_types_with_an_unknown_name_says_what_is_near() -> None:
    result = CliRunner().invoke(main, ["types", "field_matc"])
    assert result.exit_code == 2
    assert "no reward type 'field_matc'" in result.output and "field_match" in result.output


def test_types_lists_whole_summaries() -> None:
    result = CliRunner().invoke(main, ["types"], env={"COLUMNS": "400"})
    assert result.exit_code == 0
    for name in BUILTIN:
        assert type_reference(name).summary in result.output, name
