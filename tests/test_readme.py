"""The README's examples run as written (test_docs.py checks it renders and its links)."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
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


def _bash_blocks() -> list[str]:
    return re.findall(r"```bash\n(.*?)```", README.read_text(), re.DOTALL)


def test_the_two_commands_are_the_makefiles_and_ci_runs_them() -> None:
    # The README's first command sets up referee alone (no extra) and runs the demo; the
    # second is the test command .ci/run calls.
    first, second, *_ = (block.strip() for block in _bash_blocks())
    assert (first, second) == ("make demo", "make test")
    root = README.parent
    # as a user's shell runs it: not inside another make (CI's), whose flags it would inherit
    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MAKELEVEL", "MFLAGS")}
    plan = subprocess.run(["make", "--no-print-directory", "-n", "-B", "demo"], cwd=root,
                          capture_output=True, text=True, check=True, env=env).stdout  # fmt: skip
    installs = [ln for ln in plan.splitlines() if " pip install " in ln and " -e " in ln]
    assert installs and all(ln.rstrip().endswith(" -e .") for ln in installs), plan
    assert plan.rstrip().endswith("referee demo"), plan
    ci = (root / ".ci" / "run").read_text()
    assert re.search(r"^make demo\b", ci, re.M) and re.search(r"^make test$", ci, re.M)


def test_the_spec_commands_run_on_the_demo_files(tmp_path: Path) -> None:
    # The commands under "A spec", in a folder holding what they name: the README's spec,
    # the demo's rollouts and schema. Each exits 0 and writes what it says it writes.
    from importlib import resources

    spec, *_ = re.findall(r"```yaml\n(.*?)```", README.read_text(), re.DOTALL)
    demo = resources.files("referee") / "data" / "demo"
    (tmp_path / "extraction.yaml").write_text(spec)
    (tmp_path / "rollouts.jsonl").write_text((demo / "extraction.jsonl").read_text())
    (tmp_path / "release.schema.json").write_text((demo / "release.schema.json").read_text())
    block = next(b for b in _bash_blocks() if b.startswith("referee score"))
    referee_bin = Path(sys.executable).with_name("referee")
    for line in block.splitlines():
        argv = shlex.split(line, comments=True)
        before = set(tmp_path.iterdir())
        assert argv[0] == "referee", line
        done = subprocess.run([str(referee_bin), *argv[1:]], cwd=tmp_path, capture_output=True,
                              text=True, timeout=300, stdin=subprocess.DEVNULL)  # fmt: skip
        assert done.returncode == 0, f"{line}\n{done.stdout[-1500:]}\n{done.stderr[-1500:]}"
        for flag in ("-o", "--html", "--json"):
            if flag in argv:
                written = tmp_path / argv[argv.index(flag) + 1]
                assert written.is_file() and written.stat().st_size > 0, f"{line}: no {written}"
        comment = line.partition("#")[2].lower()
        if "html" in comment:  # what the comment promises, written
            assert any(f.suffix == ".html" for f in set(tmp_path.iterdir()) - before), line
    assert (tmp_path / "scored.jsonl").read_text().count("\n") == 9
