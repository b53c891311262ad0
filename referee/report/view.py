"""Scored rollouts to read one by one: a self-contained HTML page, lowest reward first.

`build_view` joins scored rows with the rollouts they score (where given) and keeps the
lowest-rewarded; `render_view` writes the page: each rollout's reward, components, reason and
failure, its prompt, completion (messages and tool calls for a trajectory) and reference,
sorted by reward (lowest first) and filtered in the page by failure type, by a component's
value and by text. The rows travel as JSON in ``<script type="application/json"
id="view-data">`` and a small script (``view.js``) draws them a page of 50 at a time, each
rollout's details only when opened, so a page of 10,000 rollouts opens at once.

Everything a rollout holds is hostile (docs/threat-model.md). The JSON has ``<``, ``>``,
``&``, U+2028, U+2029 and lone surrogates escaped, so no text can close its block or start a
comment; the script writes text with ``textContent`` only, never as markup; and the page's
Content-Security-Policy runs only its own script and style (by hash) and fetches nothing.
"""

from __future__ import annotations

import base64
import hashlib
import heapq
import json
import math
import re
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from html import escape
from importlib import resources
from typing import Any

from referee.report.diagnostics import paired
from referee.rollout import Message
from referee.rollouts.jsonl import RowError, RowOk
from referee.rollouts.scored import ScoredRow

__all__ = ["DEFAULT_LIMIT", "View", "build_view", "render_view", "script_json"]

DEFAULT_LIMIT = 10_000
"""How many rollouts a page holds unless told: the lowest-rewarded (failures first). Tested
at 10,000 rollouts (docs/guides/view.md gives the size and timing)."""

_UNSAFE = re.compile("[<>&\u2028\u2029\ud800-\udfff]")


@dataclass(frozen=True, slots=True)
class View:
    """What the page shows: the kept rows as the page's JSON records, and counts of the file.

    Attributes:
        source: The file the rows came from, as the page names it.
        rows: Scored rows read.
        records: The rows kept (at most the limit, lowest reward first), as JSON objects.
        failures: Failure type -> rows of the file with it.
        components: Every component name the file's rows have, in first-seen order.
        has_rollouts: Whether the rollouts were joined (prompt, completion, reference).
        threshold: The reward at or above which a component's value passes (a filter's
            default in the page).
    """

    source: str
    rows: int
    records: list[dict[str, Any]]
    failures: dict[str, int] = field(default_factory=dict)
    components: list[str] = field(default_factory=list)
    has_rollouts: bool = False
    threshold: float = 0.5


def _messages(value: str | list[Message]) -> str | list[dict[str, Any]]:
    if isinstance(value, str):
        return value
    return [m.model_dump(mode="json", exclude_none=True) for m in value]


def _record(index: int, scored: ScoredRow, item: RowOk | RowError | None) -> dict[str, Any]:
    """One rollout as the page's script reads it; keys without a value are left out."""
    record: dict[str, Any] = {"i": index, "id": scored.id, "line": scored.line,
                              "reward": scored.reward}  # fmt: skip
    optional = {
        "group": scored.group, "components": scored.components, "reason": scored.reason,
        "failure": None if scored.failure is None else scored.failure.model_dump(),
        "skipped": list(scored.skipped), "steps": scored.steps, "cost": scored.cost,
        "latency": scored.latency, "tokens": scored.tokens,
    }  # fmt: skip
    record.update((k, v) for k, v in optional.items() if v not in (None, [], {}))
    if isinstance(item, RowOk):
        rollout = item.rollout
        record["prompt"] = _messages(rollout.prompt)
        record["completion"] = _messages(rollout.completion)
        if rollout.reference is not None:
            record["reference"] = rollout.reference
        if rollout.metadata:
            record["metadata"] = rollout.metadata
    elif isinstance(item, RowError):
        record["unreadable"] = item.message
    return record


def _rank(value: object) -> tuple[int, float]:
    """Lowest first, a row with no finite reward (a failure) before any with one."""
    if isinstance(value, int | float) and math.isfinite(value):
        return (1, float(value))
    return (0, 0.0)


def _joined(
    scores: Iterable[ScoredRow], items: Iterable[RowOk | RowError] | None, source: str
) -> Iterator[tuple[ScoredRow, RowOk | RowError | None]]:
    """Scored rows with their rollouts, checked as ``referee report --rollouts`` checks them
    (`referee.report.diagnostics.join_rows`): the same length, the same ids."""
    if items is None:
        yield from ((s, None) for s in scores)
        return
    for item, scored in paired(items, scores, source):
        yield scored, item


def build_view(
    scores: Iterable[ScoredRow],
    rollouts: Iterable[RowOk | RowError] | None = None,
    *,
    source: str = "the scored file",
    limit: int | None = DEFAULT_LIMIT,
    threshold: float = 0.5,
) -> View:
    """The page's rows: `scores` (rows ``referee score`` wrote) joined in order with the
    `rollouts` they score, the `limit` lowest-rewarded kept (None: all).

    Raises:
        RolloutError: The rollouts are not the ones scored (another length, another id at a
            row); `source` names the scored file. A reader's own errors pass through.
        ValueError: `threshold` is not a finite number.
    """
    if not math.isfinite(threshold):
        raise ValueError(f"threshold must be a finite number, got {threshold!r}")
    failures: Counter[str] = Counter()
    components: dict[str, None] = {}
    rows = 0

    def ranked() -> Iterator[tuple[tuple[int, float], int, ScoredRow, RowOk | RowError | None]]:
        nonlocal rows
        for index, (scored, item) in enumerate(_joined(scores, rollouts, source)):
            rows += 1
            if scored.failure is not None:
                failures[scored.failure.type] += 1
            components.update(dict.fromkeys(scored.components))
            yield _rank(scored.reward), index, scored, item

    if limit is None:
        kept = sorted(ranked(), key=lambda r: r[:2])
    else:
        kept = heapq.nsmallest(limit, ranked(), key=lambda r: r[:2])
    return View(
        source=source,
        rows=rows,
        records=[_record(index, scored, item) for _, index, scored, item in kept],
        failures=dict(failures.most_common()),
        components=list(components),
        has_rollouts=rollouts is not None,
        threshold=threshold,
    )


def _finite(value: Any) -> Any:
    """NaN and infinities, which JSON cannot carry, as the text Python writes for them."""
    if isinstance(value, float) and not math.isfinite(value):
        return repr(value)
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(v) for v in value]
    return value


def _dump(value: Any) -> str:
    try:
        return json.dumps(value, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    except ValueError:
        return json.dumps(_finite(value), ensure_ascii=False, allow_nan=False,
                          separators=(",", ":"))  # fmt: skip


def script_json(text: str) -> str:
    """JSON text made safe inside a ``<script>`` element: ``<``, ``>``, ``&``, U+2028, U+2029
    and lone surrogates as ``\\uXXXX`` escapes (JSON puts them only inside strings, where the
    escape reads back as the same character), so ``</script>`` and ``<!--`` cannot occur and
    the page encodes as UTF-8."""
    return _UNSAFE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def _data(view: View) -> str:
    head = {"source": view.source, "rows": view.rows, "shown": len(view.records),
            "has_rollouts": view.has_rollouts, "components": view.components,
            "failures": view.failures, "threshold": view.threshold}  # fmt: skip
    body = ",".join(_dump(r) for r in view.records)
    return script_json(_dump(head)[:-1] + ',"rollouts":[' + body + "]}")


def _asset(name: str) -> str:
    return resources.files("referee.report").joinpath(name).read_text(encoding="utf-8")


def _sha256(text: str) -> str:
    return "sha256-" + base64.b64encode(hashlib.sha256(text.encode()).digest()).decode()


def _controls(view: View) -> str:
    """The sort and filter controls; the page's script fills in the counts and the rows."""
    failures = Counter(r["failure"]["type"] for r in view.records if "failure" in r)
    scored = len(view.records) - sum(failures.values())
    chips = [f'<button type="button" class="chip on" data-failure="*">all '
             f"<span>{len(view.records)}</span></button>",
             f'<button type="button" class="chip" data-failure="">no failure '
             f"<span>{scored}</span></button>"]  # fmt: skip
    for kind, count in failures.most_common():
        chips.append(f'<button type="button" class="chip fail" data-failure="{escape(kind)}">'
                     f"{escape(kind)} <span>{count}</span></button>")  # fmt: skip
    options = "".join(f'<option value="{escape(c)}">{escape(c)}</option>' for c in view.components)
    return (
        '<div class="bar"><label>Order <select id="order"><option value="asc">lowest first'
        '</option><option value="desc">highest first</option><option value="file">file order'
        '</option></select></label><label>Value <select id="component"><option value="">'
        f"total reward</option>{options}</select></label>"
        '<label><select id="cond"><option value="any">any value</option><option value="below">'
        'below</option><option value="atleast">at or above</option><option value="none">no '
        f'value</option></select></label><label>threshold <input id="threshold" '
        f'type="number" step="any" value="{view.threshold!r}"></label>'
        '<input id="query" type="search" placeholder="search id, reason, completion"></div>'
        f'<div class="bar" id="failures">Failure {"".join(chips)}</div>'
    )


def render_view(view: View, title: str = "referee view") -> str:
    """The page for `view`, self-contained: its script, style and data inline, nothing
    fetched."""
    script, style = _asset("view.js"), _asset("view.css")
    policy = (f"default-src 'none'; script-src '{_sha256(script)}'; "
              f"style-src '{_sha256(style)}'; base-uri 'none'; form-action 'none'")  # fmt: skip
    shown = len(view.records)
    scope = f"{view.rows} rollouts"
    if shown < view.rows:
        scope += f"; this page holds the {shown} lowest-rewarded (failures first)"
    note = ""
    if not view.has_rollouts:
        note = ('<p class="warn">The scored file holds no prompts or completions: pass the '
                "rollouts it scored too (<code>referee view SCORED --rollouts ROLLOUTS</code>)."
                "</p>")  # fmt: skip
    return "".join([
        "<!doctype html><html lang='en'><head><meta charset='utf-8'>",
        f'<meta http-equiv="Content-Security-Policy" content="{policy}">',
        f"<title>{escape(title)}</title><style>{style}</style></head><body>",
        f"<h1>{escape(title)}</h1><p class='muted'>{escape(view.source)}: {escape(scope)}. "
        "Keys: <kbd>j</kbd>/<kbd>k</kbd> next/previous rollout.</p>",
        note,
        _controls(view),
        '<div class="bar"><span id="count"></span><span class="pager"><button type="button" '
        'id="prev">&larr; previous</button><span id="page"></span><button type="button" '
        'id="next">next &rarr;</button><button type="button" id="openall">open all</button>'
        "</span></div>",
        '<div id="rows"><noscript>The rollouts are drawn by the page\'s script.</noscript></div>',
        f'<script type="application/json" id="view-data">{_data(view)}</script>',
        f"<script>{script}</script></body></html>",
    ])  # fmt: skip
