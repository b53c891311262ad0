"""The README's examples run as written."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

import referee
from referee.registry import registered_types

README = Path(__file__).resolve().parents[1] / "README.md"


def test_python_example_runs(capsys) -> None:  # type: ignore[no-untyped-def]
    code, *_ = re.findall(r"```python\n(.*?)```", README.read_text(), re.DOTALL)
    exec(compile(code, str(README), "exec"), {})
    out = capsys.readouterr().out
    assert out.startswith("1.0 {'valid': 1.0, 'fields': 1.0")


def test_spec_examples_load(tmp_path: Path) -> None:
    blocks = re.findall(r"```yaml\n(.*?)```", README.read_text(), re.DOTALL)
    extraction, agent, code, *more = blocks
    (tmp_path / "agent.yaml").write_text(agent)
    agent_reward = referee.load(tmp_path / "agent.yaml")
    assert [c.name for c in agent_reward.components] == ["process", "calls", "answer"]  # type: ignore[attr-defined]
    (tmp_path / "release.schema.json").write_text('{"type": "object"}')
    (tmp_path / "extraction.yaml").write_text(extraction)
    reward = referee.load(tmp_path / "extraction.yaml")
    assert isinstance(reward, referee.Combined)
    assert [c.name for c in reward.components] == ["valid", "fields"]
    (tmp_path / "code.yaml").write_text(code)
    assert [c.name for c in referee.load(tmp_path / "code.yaml").components] == ["tests"]  # type: ignore[attr-defined]
    for i, block in enumerate(more):  # every other spec in the README loads as written
        (tmp_path / f"more{i}.yaml").write_text(block)
        referee.load(tmp_path / f"more{i}.yaml")
    # ```yml blocks name models on the Hugging Face hub, which cannot load here: they parse,
    # and every type they name is registered.
    for block in re.findall(r"```yml\n(.*?)```", README.read_text(), re.DOTALL):
        types = re.findall(r"type: (\w+)", block)
        assert types and all(t in registered_types() for t in types), types
        yaml.safe_load(block)


def test_trainer_sketches_compile_and_their_imports_exist() -> None:
    _, *sketches = re.findall(r"```python\n(.*?)```", README.read_text(), re.DOTALL)
    assert sketches, "the README lost its trainer examples"
    for sketch in sketches:
        compile(sketch, str(README), "exec")  # `...` stands for the user's own arguments
        imports = "\n".join(ln for ln in sketch.splitlines() if ln.startswith(("from ", "import ")))
        exec(compile(imports, str(README), "exec"), {})
