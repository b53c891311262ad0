"""`referee view`: the page's rows and order, its escaping of hostile text, the command end to
end, and the page in a headless browser (order, a filter click, no injected script run)."""

from __future__ import annotations

import html
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from referee import Rollout
from referee.errors import RolloutError
from referee.report.view import build_view, render_view, script_json
from referee.rollouts.jsonl import RowError, RowOk
from referee.rollouts.scored import FailureRecord, ScoredRow
from tests.support.rollouts import write_jsonl

# Hostile text: a block-closing tag with a script after it, an element with a handler, an
# HTML comment opener, JavaScript's line terminators, a lone surrogate (no UTF-8 for it).
INJECTION = (
    "</script><script>window.pwned = 1; document.title = 'PWNED'</script>"
    "<img src=x onerror=\"window.pwned = 1; document.title = 'PWNED'\"><!-- \u2028\u2029"
)
SPEC = """name: m
combine: weighted
components:
  answer: {type: math_answer, weight: 0.8}
  careful: {type: contains, value: carefully, weight: 0.2}
"""


def scored(reward: float | None, i: int, failure: str | None = None, **kw: Any) -> ScoredRow:
    record = None if failure is None else FailureRecord(type=failure, message=f"{failure}!")
    return ScoredRow(id=str(i), line=i + 1, reward=reward, failure=record, **kw)


def data_of(page: str) -> Any:
    """The page's JSON block, read back strictly (no NaN)."""
    found = re.search(r'id="view-data">(.*?)</script>', page, re.DOTALL)
    assert found is not None

    def refuse(name: str) -> None:
        raise ValueError(name)

    return json.loads(found.group(1), parse_constant=refuse)


def test_rows_come_lowest_first_failures_before_any_value() -> None:
    rows = [scored(0.5, 0), scored(None, 1, "judge"), scored(-1.0, 2), scored(0.5, 3),
            scored(float("nan"), 4), scored(1.0, 5)]  # fmt: skip
    view = build_view(rows)
    # no finite reward first (in file order), then by value, ties in file order
    assert [r["id"] for r in view.records] == ["1", "4", "2", "0", "3", "5"]
    assert view.rows == 6 and view.failures == {"judge": 1}


def test_the_limit_keeps_the_lowest_and_counts_the_file() -> None:
    rows = [scored(v, i, "timeout" if v is None else None) for i, v in
            enumerate([0.9, 0.1, None, 0.5, 0.7])]  # fmt: skip
    view = build_view(rows, limit=3)
    assert [r["id"] for r in view.records] == ["2", "1", "3"]
    assert view.rows == 5  # the page says it holds 3 of 5
    assert "this page holds the 3 lowest-rewarded" in render_view(view)


def test_rollouts_join_by_order_and_must_be_the_ones_scored() -> None:
    items: list[RowOk | RowError] = [
        RowOk(1, Rollout(id="0", prompt="p0", completion="c0", reference="r0"), 10),
        RowError(2, "bad JSON", 5),  # an unreadable row keeps its place
    ]
    view = build_view([scored(1.0, 0), scored(None, 1, "error")], items)
    by_id = {r["id"]: r for r in view.records}
    assert by_id["0"]["completion"] == "c0" and by_id["0"]["reference"] == "r0"
    assert by_id["1"]["unreadable"] == "bad JSON" and "completion" not in by_id["1"]
    # other rollouts than the scored ones: refused, as `referee report --rollouts` refuses them
    with pytest.raises(RolloutError, match="has id '9', the rollouts '0'"):
        build_view([scored(1.0, 9), scored(1.0, 1)], items)
    with pytest.raises(RolloutError, match="differ in length"):
        build_view([scored(1.0, 0)], items)


def test_hostile_text_cannot_leave_the_data_block() -> None:
    rollout = Rollout(id="0", prompt=INJECTION, completion=INJECTION + "\udcff",
                      metadata={"x": float("nan")})  # fmt: skip
    row = ScoredRow(id="0", line=1, reward=0.0, reason=INJECTION, components={"a": 0.0})
    page = render_view(build_view([row], [RowOk(1, rollout, 1)]), title=INJECTION)
    page.encode("utf-8")  # the lone surrogate is escaped, not unencodable
    block = page[page.index('id="view-data">') : page.rindex("<script>")]
    # one closing tag (the block's own), no comment opener, no raw line terminators
    assert block.count("</") == 1 and "<!--" not in block and "\u2028" not in block
    assert "<img" not in page and "<script>window" not in page
    record = data_of(page)["rollouts"][0]
    assert record["completion"] == INJECTION + "\udcff" and record["reason"] == INJECTION
    assert record["metadata"] == {"x": "nan"}  # JSON has no NaN: its text stands for it
    assert script_json('"</script>\u2028"') == '"\\u003c/script\\u003e\\u2028"'


def test_the_page_is_self_contained_with_its_filters() -> None:
    rows = [scored(None, 0, "judge"), scored(None, 1, "judge"), scored(None, 2, "timeout"),
            scored(0.2, 3, components={"fmt": 1.0, "answer": 0.0})]  # fmt: skip
    page = render_view(build_view(rows))
    assert 'data-failure="judge">judge <span>2</span>' in page
    assert 'data-failure="timeout">timeout <span>1</span>' in page
    assert '<option value="fmt">fmt</option><option value="answer">answer</option>' in page
    assert all(f'id="{c}"' in page for c in ("order", "component", "cond", "threshold", "query"))
    # nothing fetched: the policy fetches nothing and runs only the page's own script, by hash
    assert "default-src 'none'; script-src 'sha256-" in page
    assert not re.search(r"(src|href)=[\"']?(https?:)?//", page)
    assert page.count("<script") == 2  # the data block and the script


def test_a_threshold_must_be_a_number() -> None:
    with pytest.raises(ValueError, match="finite number, got inf"):
        build_view([], threshold=float("inf"))


def cli(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "referee.cli", *args], capture_output=True,
                          text=True, timeout=300, cwd=cwd)  # fmt: skip


def write_rollouts(path: Path) -> Path:
    """Rollouts to score: right and wrong answers, one careful, one with no reference (a
    failure), a tool-calling trajectory, and one whose completion is an injection."""
    rows: list[dict[str, Any]] = []
    for i in range(12):
        answer = i if i % 3 else i + 1
        rows.append({"id": f"r{i}", "group": str(i // 4), "prompt": f"what is {i}?",
                     "completion": ("carefully " if i == 4 else "") + f"\\boxed{{{answer}}}",
                     "reference": str(i)})  # fmt: skip
    del rows[5]["reference"]
    call = {"id": "c1", "type": "function", "function": {"name": "calc", "arguments": '{"x":7}'}}
    rows[7]["completion"] = [
        {"role": "assistant", "content": "checking", "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "c1", "content": "7"},
        {"role": "assistant", "content": "\\boxed{7}"},
    ]
    rows[9]["completion"] = f"{INJECTION} \\boxed{{{INJECTION}}}"  # the reason quotes it
    rows[2]["completion"] = "step. " * 2000 + "\\boxed{2}"  # past the page's cap: "show all"
    return write_jsonl(path, rows)


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    """(rollouts, spec, scored): a scored file made by `referee score`."""
    folder = tmp_path_factory.mktemp("view")
    rollouts = write_rollouts(folder / "in.jsonl")
    spec = folder / "spec.yaml"
    spec.write_text(SPEC)
    out = folder / "scored.jsonl"
    run = cli("score", str(rollouts), "--spec", str(spec), "-o", str(out), "-q")
    assert run.returncode == 0, run.stderr
    return rollouts, spec, out


def test_view_command_end_to_end(files: tuple[Path, Path, Path], tmp_path: Path) -> None:
    rollouts, spec, out = files
    run = cli("view", str(out), "--rollouts", str(rollouts), cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    assert "wrote scored.view.html: 12 rollouts" in run.stdout  # the default name, here
    data = data_of((tmp_path / "scored.view.html").read_text())
    records = data["rollouts"]
    assert records[0]["id"] == "r5" and records[0]["failure"]["type"] == "not_applicable"
    rewards = [r["reward"] for r in records[1:]]
    assert rewards == sorted(rewards) and rewards[0] == 0.0 and rewards[-1] == 1.0
    trajectory = next(r for r in records if r["id"] == "r7")["completion"]
    assert trajectory[0]["tool_calls"][0] == {"id": "c1", "name": "calc", "arguments": '{"x":7}'}
    assert data["components"] == ["answer", "careful"] and data["has_rollouts"]

    # scoring on the fly gives the same rows; --limit keeps the lowest
    page = tmp_path / "v.html"
    run = cli("view", "--rollouts", str(rollouts), "--spec", str(spec), "-o", str(page),
              "--limit", "3")  # fmt: skip
    assert run.returncode == 0, run.stderr
    assert "3 rollouts of 12, the lowest-rewarded" in run.stdout
    assert [r["id"] for r in data_of(page.read_text())["rollouts"]] == [
        r["id"] for r in records[:3]
    ]

    # the scored file alone: scores and reasons, and the page says how to add the text
    run = cli("view", str(out), "-o", str(page))
    assert run.returncode == 0 and "pass the rollouts it scored too" in page.read_text()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        # the rollouts given as the scored file: its line and the fix
        (["{rollouts}"], r"in\.jsonl:1: not a scored row.*pass the output of referee score"),
        # rollouts that are not the ones scored: one short, or shifted by a row
        (["{scored}", "-r", "{short}"], r"differ in length.*pass the rollouts file that was"),
        (["{scored}", "-r", "{shifted}"], r"scored\.jsonl:1: the scored file has id 'r0'"),
        (["--rollouts", "{rollouts}"], r"give SCORED .* or --rollouts and --spec"),
        (["{scored}", "--threshold", "nan"], r"nan is not a finite number"),
    ],
)
def test_view_command_bad_input(
    files: tuple[Path, Path, Path], tmp_path: Path, args: list[str], message: str
) -> None:
    rollouts, _, out = files
    lines = rollouts.read_text().splitlines(keepends=True)
    short, shifted = tmp_path / "short.jsonl", tmp_path / "shifted.jsonl"
    short.write_text("".join(lines[:-1]))
    shifted.write_text("".join(lines[1:]))
    paths = {"rollouts": str(rollouts), "scored": str(out), "short": str(short),
             "shifted": str(shifted)}  # fmt: skip
    run = cli("view", *[a.format(**paths) for a in args], "-o", str(tmp_path / "v.html"))
    assert run.returncode != 0
    assert re.search(message, " ".join(run.stderr.split())), run.stderr
    assert not (tmp_path / "v.html").exists()


CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")

# Runs before the page's policy (it comes first in <head>), so the policy lets it run: once
# the page is drawn it records the order, clicks a filter chip, records what is left, and
# writes it all where --dump-dom shows it.
HARNESS = """<script>addEventListener("load", () => {
  const ids = () => [...document.querySelectorAll("details.ro")].map((d) => d.dataset.id);
  const out = {before: ids(), values: [...document.querySelectorAll("details.ro")]
               .map((d) => d.dataset.value)};
  document.querySelector('button.chip[data-failure=""]').click();
  out.after = ids();
  document.getElementById("openall").click();
  setTimeout(() => {
    out.pwned = window.pwned === 1 || document.title === "PWNED";
    out.images = document.images.length;
    out.scripts = document.scripts.length;
    out.opened = document.querySelectorAll("details.ro .body").length;
    const long = document.querySelector('details.ro[data-id="r2"]');
    const longest = () => Math.max(...[...long.querySelectorAll("pre")]
                                   .map((p) => p.textContent.length));
    out.capped = longest();
    long.querySelector("button.more").click();
    out.full = longest();
    const pre = document.createElement("pre");
    pre.id = "harness";
    pre.textContent = JSON.stringify(out);
    document.body.append(pre);
  }, 500);
});</script>"""


@pytest.mark.skipif(CHROMIUM is None, reason="no chromium (apt-get install chromium)")
def test_the_page_in_a_headless_browser(files: tuple[Path, Path, Path], tmp_path: Path) -> None:
    rollouts, _, out = files
    page = tmp_path / "view.html"
    assert cli("view", str(out), "-r", str(rollouts), "-o", str(page)).returncode == 0
    text = page.read_text()
    assert text.count("<meta charset='utf-8'>") == 1
    page.write_text(text.replace("<meta charset='utf-8'>", "<meta charset='utf-8'>" + HARNESS))
    flags = [str(CHROMIUM), "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
             "--no-first-run", "--disable-background-networking", "--disable-component-update",
             "--disable-sync", f"--user-data-dir={tmp_path / 'profile'}"]  # fmt: skip
    dom = subprocess.run([*flags, "--virtual-time-budget=5000", "--dump-dom", page.as_uri()],
                         capture_output=True, text=True, timeout=120)  # fmt: skip
    assert dom.returncode == 0, dom.stderr[-2000:]
    found = re.search(r'<pre id="harness">(.*?)</pre>', dom.stdout, re.DOTALL)
    assert found is not None, dom.stdout[-3000:]
    seen = json.loads(html.unescape(found.group(1)))
    # lowest first: the failure (no value) on top, then values in ascending order
    assert seen["before"][0] == "r5" and seen["values"][0] == ""
    values = [float(v) for v in seen["values"][1:]]
    assert values == sorted(values) and len(values) == 11
    # the "no failure" chip hides the failed rollout, keeps the order of the rest
    assert seen["after"] == seen["before"][1:]
    # every rollout opened (the injection's text drawn), and nothing of it ran or was built
    assert seen["opened"] == 11 and "&lt;/script&gt;&lt;script&gt;window.pwned" in dom.stdout
    assert not seen["pwned"] and seen["images"] == 0 and seen["scripts"] == 3
    # a long completion is cut to the cap, and "show all" shows all of it
    assert seen["capped"] < 5000 and seen["full"] == len("step. " * 2000 + "\\boxed{2}")
