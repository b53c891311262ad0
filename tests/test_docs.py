"""The README and every docs page render as written (parsed as CommonMark, as a repository page
and MkDocs do), their specs load, and the site builds with MkDocs in strict mode: a broken link,
a missing anchor or a page left out of the nav fails here."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from markdown_it import MarkdownIt

import referee
from referee.registry import registered_types
from referee.spec.reference import all_references

ROOT = Path(__file__).resolve().parents[1]
PAGES = sorted((ROOT / "docs").rglob("*.md"))
_LANGUAGES = "bash|console|text|yaml|yml|json|python|pycon|toml|diff|layers|long-modules|ini|html"
_FENCE_INFO = re.compile(rf'^({_LANGUAGES})( title="[^"]*")?$')  # a MkDocs title, else nothing
_HEADING_IN_CODE = re.compile(r"^#{2,6} \S", re.M)  # code comments use one #, headings more


def render_problems(text: str) -> list[str]:
    """Where `text` does not render as its author meant: a fenced block that names no language
    (a stray fence opens a block: everything to the next fence is code, headings included), a
    Markdown heading inside a code block, a fence left as text."""
    problems = []
    for token in MarkdownIt("commonmark").enable("table").parse(text):
        where = f"line {token.map[0] + 1}" if token.map else "?"
        if token.type == "fence" and not token.info.strip():
            problems.append(f"{where}: a fence with no language (```text for plain text)")
        elif token.type == "fence" and not _FENCE_INFO.match(token.info.strip()):
            # prose after a fence at a line's start (a list item's "```yaml specs load ...")
            problems.append(f"{where}: a fence of no known language: {token.info!r}")
        if token.type in ("fence", "code_block") and _HEADING_IN_CODE.search(token.content):
            heading = _HEADING_IN_CODE.search(token.content)
            assert heading is not None
            line = token.content[heading.start() :].splitlines()[0]
            problems.append(f"{where}: a heading inside a code block: {line!r}")
        text = [c.content for c in token.children or () if c.type == "text"]
        if token.type == "inline" and any("```" in t for t in text):  # not in a `code span`
            problems.append(f"{where}: a fence read as text: {token.content[:60]!r}")
    return problems


def test_the_check_sees_a_heading_swallowed_by_a_stray_fence() -> None:
    text = "# Title\n\n```\n\n## Trainers\n\nText.\n\n```bash\nls\n```\n"
    problems = render_problems(text)
    assert any("no language" in p for p in problems)
    assert any("'## Trainers'" in p for p in problems)
    assert render_problems("# Title\n\n```bash\n# a comment\nls\n```\n\n## Next\n") == []
    prose = "- a list item whose next line starts with a fence:\n  ```yaml specs load\n"
    assert any("no known language" in p for p in render_problems(prose))


@pytest.mark.parametrize("page", [ROOT / "README.md", *PAGES], ids=lambda p: p.name)
def test_page_renders_as_written(page: Path) -> None:
    assert render_problems(page.read_text()) == []


def test_generated_type_pages_render_as_written() -> None:
    for ref in all_references():
        assert render_problems(ref.markdown()) == [], ref.name


def _yaml_blocks(text: str, language: str) -> list[str]:
    tokens = MarkdownIt("commonmark").parse(text)
    return [t.content for t in tokens if t.type == "fence" and t.info.strip() == language]


@pytest.mark.parametrize("page", [ROOT / "README.md", *PAGES], ids=lambda p: p.name)
def test_specs_on_a_page_load(page: Path, tmp_path: Path) -> None:
    """A ```yaml block that is a spec loads (one that names a file beside it, `*_file`, gets an
    empty JSON object there); ```yml blocks (a model on the Hugging Face hub, which cannot load
    here; a trainer's config) must parse, and name only registered types."""
    for block in _yaml_blocks(page.read_text(), "yaml"):
        spec = yaml.safe_load(block)
        if not isinstance(spec, dict) or not ({"type", "components"} & set(spec)):
            continue
        for name in re.findall(r"\w+_file:\s*([\w./-]+)", block):
            (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
            (tmp_path / name).write_text("{}")
        (tmp_path / "spec.yaml").write_text(block)
        referee.load(tmp_path / "spec.yaml")
    for block in _yaml_blocks(page.read_text(), "yml"):
        yaml.safe_load(block)
        types = re.findall(r"\btype: (\w+)", block)
        assert all(t in registered_types() for t in types), types


@pytest.mark.parametrize("page", [ROOT / "README.md", *PAGES], ids=lambda p: p.name)
def test_python_on_a_page_compiles(page: Path) -> None:
    for block in _yaml_blocks(page.read_text(), "python"):
        compile(block, str(page), "exec")


def test_the_site_builds_strict(tmp_path: Path) -> None:
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    build = [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path)]
    done = subprocess.run(build, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-4000:]
    assert (tmp_path / "reference" / "types" / "field_match" / "index.html").is_file()
    cli = (tmp_path / "reference" / "cli" / "index.html").read_text()
    # issue 46: click's internal default showed 66 times; summaries were cut mid-sentence
    assert "Sentinel" not in cli
    from referee.cli import COMMANDS

    for name, (_, short) in COMMANDS.items():
        first = short.split("`")[0]
        assert f'href="#referee-{name}">{name}</a></em>: {first}' in cli.replace("&#x27;", "'")


def test_the_readmes_links_reach_files() -> None:
    """The README is read on a repository page, where a link to a page only the site has (a
    generated one) is broken."""
    text = (ROOT / "README.md").read_text()
    targets = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", text)
    assert targets
    missing = [t for t in targets if "://" not in t and not (ROOT / t).exists()]
    assert not missing


def _command_lines(text: str) -> list[str]:
    lines = []
    blocks = [(b, False) for b in _yaml_blocks(text, "bash")]
    blocks += [(b, True) for b in _yaml_blocks(text, "console")]  # commands after a "$ "
    for block, prompted in blocks:
        joined = block.replace("\\\n", " ")
        for line in joined.splitlines():
            if prompted and not line.startswith("$ "):
                continue  # output
            line = line.split(" #", 1)[0].strip()
            for prefix in ("$ ", ".venv/bin/"):
                line = line.removeprefix(prefix)
            if line.startswith("referee "):
                lines.append(line.split("|")[0].split(">")[0].split("&&")[0])
    return lines


@pytest.mark.parametrize("page", [ROOT / "README.md", *PAGES], ids=lambda p: p.name)
def test_commands_on_a_page_exist(page: Path) -> None:
    """Every `referee ...` line in a ```bash block names a real command and real options."""
    import shlex

    import click

    from referee.cli import main

    for line in _command_lines(page.read_text()):
        words = shlex.split(line)[1:]
        command: click.Command = main
        while isinstance(command, click.Group) and words and words[0] in command.commands:
            command = command.commands[words.pop(0)]
        if isinstance(command, click.Group):  # only the group's own options (--version)
            assert all(w.startswith("-") for w in words), f"{page.name}: no command in {line}"
        known = {o for p in command.params for o in (*p.opts, *p.secondary_opts)}
        for word in words:
            option = word.split("=", 1)[0]
            if option.startswith("-") and option != "-":
                assert option in known, f"{page.name}: `{line}`: no option {option}"
