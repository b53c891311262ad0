"""The README's examples run as written (test_docs.py checks it renders and its links)."""

from __future__ import annotations

import re
from pathlib import Path

import referee

README = Path(__file__).resolve().parents[1] / "README.md"


def _python_blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", README.read_text(), re.DOTALL)


def test_python_example_runs(capsys) -> None:  # type: ignore[no-untyped-def]
    code, *_ = _python_blocks()
    exec(compile(code, str(README), "exec"), {})
    assert capsys.readouterr().out.startswith("1.0 ")


def test_the_spec_is_the_extraction_reward(tmp_path: Path) -> None:
    spec, *_ = re.findall(r"```yaml\n(.*?)```", README.read_text(), re.DOTALL)
    (tmp_path / "release.schema.json").write_text('{"type": "object"}')
    (tmp_path / "extraction.yaml").write_text(spec)
    reward = referee.load(tmp_path / "extraction.yaml")
    assert isinstance(reward, referee.Combined)
    assert [c.name for c in reward.components] == ["valid", "fields"]


def test_trainer_sketches_compile_and_their_imports_exist() -> None:
    _, *sketches = _python_blocks()
    assert sketches, "the README lost its trainer examples"
    for sketch in sketches:
        compile(sketch, str(README), "exec")  # `...` stands for the user's own arguments
        imports = "\n".join(ln for ln in sketch.splitlines() if ln.startswith(("from ", "import ")))
        exec(compile(imports, str(README), "exec"), {})
