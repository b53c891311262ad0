"""`sql_match`: text-to-SQL graded by running it, as BIRD grades it.

The completion's query (its last fenced ``sql`` block, else the whole text) and the gold query
run against the task's SQLite database; the completion scores 1.0 when the two results hold the
same rows. BIRD's evaluation (``evaluation.py``) runs both and compares
``set(predicted_rows) == set(gold_rows)``: rows are tuples, so column order counts and column
names do not; row order and duplicate rows do not count. That is ``order: ignore``, the default;
``order: respect`` compares the two lists of rows (order and duplicates count). ``rel_tol`` /
``abs_tol`` let numbers differ a little (`rows_match`).

The policy's query is hostile; the gold query and the database are the user's. Both run
through `referee.verifiers.sql`, on a connection that cannot change anything, under limits
(``timeout``, ``max_rows``, ``max_result_mb``, ``max_value_bytes``: see there). By default
in a worker process (`referee.workers`), because some of SQLite's functions spin in C inside
one virtual-machine step, where only a process's end stops them, and a query's memory is
capped only there (``memory_mb``); the reward's deadline, where the worker is killed, is the
backstop. ``run_in: inline`` is faster and keeps every limit but those.

A query of the policy's that fails, runs past ``timeout`` or returns too much scores 0 with the
reason (SQLite's own error text); the gold query failing is a Failure, never a 0: the data is
wrong, not the policy.

Blame decides what a check past the reward's deadline is (the worker killed, or interrupted
inline). The gold query runs first, so the check was in the gold query or in the policy's;
which one is decided by running the gold query alone, under its own limit (in a worker,
killed past it; once per database state and query): where it gives its rows in time, the
policy's query ran past its limit, which scores 0 with the reason (a masked sample would pay
it to spin); where it does not, the reference is at fault (``not_applicable`` naming it). The
common path pays nothing for this: only a rollout past the deadline does.
"""

from __future__ import annotations

import asyncio
import dataclasses
import math
import os
import re
import sqlite3
import threading
from bisect import bisect_left, bisect_right
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

from referee.deadline import run_in_thread
from referee.errors import NotApplicable, RewardError, VerifierTimeout
from referee.registry import register
from referee.reward import CheckReward, Need
from referee.rewards._common import clip_text, short
from referee.rewards._extract import fenced_blocks
from referee.rollout import Rollout
from referee.scores import Score
from referee.verifiers.sql import (
    Database,
    Limits,
    QueryError,
    QueryOutcome,
    Row,
    database,
    run_query,
)
from referee.workers import RunIn, in_worker, pool

__all__ = [
    "Limits",
    "QueryError",
    "QueryOutcome",
    "RowOrder",
    "SqlMatch",
    "extract_sql",
    "rows_match",
    "run_query",
]

RowOrder = Literal["ignore", "respect"]
"""How two results' rows are compared: ``ignore`` (BIRD: as sets of rows; order and duplicates
do not count) or ``respect`` (as lists: the same rows in the same order, duplicates counted)."""

_SQL_TAGS = frozenset({"sql", "sqlite", ""})
_GOLD_ENTRIES = 256  # gold results kept per reward (a GRPO group shares one)
_GOLD_BYTES = 64 << 20
_PATHS = 4096  # resolved database paths kept per reward
_GOLD_ALONE_GRACE = 1.0  # seconds past `timeout` the gold query gets when it runs alone
_DB_ID = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*")


def extract_sql(text: str) -> str:
    """The query in a completion: its last fenced ``sql``/``sqlite`` (or untagged) block, else
    the whole text; stripped, trailing semicolons dropped."""
    blocks = [body for _, tag, body in fenced_blocks(text) if tag.lower() in _SQL_TAGS]
    sql = blocks[-1] if blocks else text
    return sql.strip().rstrip("; \t\r\n\f\v")


# --- the gold query alone -----------------------------------------------------------------


def _gold_alone(path: str, sql: str, limits: Limits, memory_mb: int) -> list[str] | None:
    """Run a gold query by itself (`SqlMatch.overran`): None where it gives its rows within
    `limits`, else ``[kind, what it did]``. Plain data: it comes back from a worker as JSON."""
    if in_worker():
        limits = dataclasses.replace(limits, heap_bytes=memory_mb << 20)
    try:
        run_query(path, sql, limits)
    except QueryError as exc:
        return [exc.kind, exc.message]
    return None


# --- comparing results --------------------------------------------------------------------


def _is_number(value: object) -> bool:
    return type(value) is int or type(value) is float


def _close(a: object, b: object, rel_tol: float, abs_tol: float) -> bool:
    """Equal cells, or numbers within the tolerance where either is a float (two integers must
    be equal: a count off by one is no rounding error)."""
    if a == b:
        return True
    if (type(a) is float and _is_number(b)) or (type(b) is float and _is_number(a)):
        return math.isclose(a, b, rel_tol=rel_tol, abs_tol=abs_tol)  # type: ignore[arg-type]
    return False


def _rows_close(a: Row, b: Row, rel_tol: float, abs_tol: float) -> bool:
    return len(a) == len(b) and all(
        _close(x, y, rel_tol, abs_tol) for x, y in zip(a, b, strict=True)
    )


_NUMBER = object()  # stands for a numeric cell in a row's shape


class _Index:
    """Rows grouped by their shape (length, and every non-numeric cell), each group sorted by
    its first numeric cell: the rows within tolerance of a row are looked for in a window of
    one group, not among all rows."""

    def __init__(self, rows: Sequence[Row], rel_tol: float, abs_tol: float) -> None:
        self.rel_tol, self.abs_tol = rel_tol, abs_tol
        groups: dict[tuple[Any, ...], list[tuple[float, Row]]] = {}
        for row in rows:
            groups.setdefault(_shape(row), []).append((_first_number(row), row))
        self.groups = {k: sorted(v, key=lambda kv: kv[0]) for k, v in groups.items()}
        self.keys = {k: [kv[0] for kv in v] for k, v in self.groups.items()}

    def has_close(self, row: Row) -> bool:
        group = self.groups.get(_shape(row))
        if group is None:
            return False
        first = _first_number(row)
        width = self._width(first)
        keys = self.keys[_shape(row)]
        lo = bisect_left(keys, first - width)
        hi = bisect_right(keys, first + width)
        return any(_rows_close(row, other, self.rel_tol, self.abs_tol) for _, other in group[lo:hi])

    def _width(self, value: float) -> float:
        """How far from `value` a close number can be: |a-b| <= max(rel*max(|a|,|b|), abs)
        and |b| <= |a| + |a-b| give |a-b| <= max(abs, rel*|a| / (1 - rel))."""
        if self.rel_tol >= 1.0 or math.isinf(value):
            return math.inf
        return max(self.abs_tol, self.rel_tol * abs(value) / (1.0 - self.rel_tol))


def _shape(row: Row) -> tuple[Any, ...]:
    return tuple(_NUMBER if _is_number(v) else v for v in row)


def _first_number(row: Row) -> float:
    for value in row:
        if _is_number(value):
            return float(value)
    return 0.0


def rows_match(
    predicted: Sequence[Row],
    gold: Sequence[Row],
    order: RowOrder = "ignore",
    rel_tol: float = 0.0,
    abs_tol: float = 0.0,
) -> tuple[bool, str]:
    """Whether two results hold the same rows, and a reason.

    ``order: ignore`` is BIRD's ``set(predicted) == set(gold)``: rows are tuples, compared as
    sets (duplicates collapse, order does not count). ``respect`` compares the lists.
    With a tolerance, two cells match when they are equal, or when both are numbers, one of
    them a float, and ``math.isclose(a, b, rel_tol=rel_tol, abs_tol=abs_tol)``; rows match
    cell by cell (the same length). Under ``ignore`` the sets are then equal when every
    predicted row matches some gold row and every gold row some predicted row (with no
    tolerance, exactly set equality).
    """
    tolerant = rel_tol > 0.0 or abs_tol > 0.0
    if order == "respect":
        if len(predicted) != len(gold):
            return False, f"{len(predicted)} rows, gold {len(gold)}"
        for i, (p, g) in enumerate(zip(predicted, gold, strict=True)):
            if not (p == g or (tolerant and _rows_close(p, g, rel_tol, abs_tol))):
                return False, f"row {i + 1} is {short(p)}, gold {short(g)}"
        return True, f"the same {len(gold)} rows in order"
    # dicts, not sets: distinct rows in the results' own order, so a reason names the same row
    # in every process (a set's order follows string hashes, which differ process to process)
    mine, theirs = dict.fromkeys(predicted), dict.fromkeys(gold)
    extra = [row for row in mine if row not in theirs]
    missing = [row for row in theirs if row not in mine]
    if tolerant and (extra or missing):
        if extra:
            gold_index = _Index(list(theirs), rel_tol, abs_tol)
            extra = [row for row in extra if not gold_index.has_close(row)]
        if missing and not extra:
            mine_index = _Index(list(mine), rel_tol, abs_tol)
            missing = [row for row in missing if not mine_index.has_close(row)]
    if not extra and not missing:
        return True, f"the same {len(theirs)} distinct rows"
    counts = f"{len(mine)} distinct rows, gold {len(theirs)}"
    if extra:
        return False, f"{counts}; not in gold: {short(extra[0])}"
    return False, f"{counts}; missing: {short(missing[0])}"


# --- the reward ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Gold:
    rows: list[Row] | None
    error: QueryError | None
    size: int


class _GoldCache:
    """Gold results by (database file and its state, gold query): bounded, thread-safe."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.entries: OrderedDict[tuple[Any, ...], _Gold] = OrderedDict()
        self.size = 0

    def get(self, key: tuple[Any, ...]) -> _Gold | None:
        with self.lock:
            found = self.entries.get(key)
            if found is not None:
                self.entries.move_to_end(key)
            return found

    def put(self, key: tuple[Any, ...], gold: _Gold) -> None:
        if gold.size > _GOLD_BYTES // 4:
            return
        with self.lock:
            if key in self.entries:
                return
            self.entries[key] = gold
            self.size += gold.size
            while len(self.entries) > _GOLD_ENTRIES or self.size > _GOLD_BYTES:
                self.size -= self.entries.popitem(last=False)[1].size


@register("sql_match")
@dataclass(kw_only=True)
class SqlMatch(CheckReward):
    """1.0 when the completion's SQL returns the gold query's rows, as BIRD grades text-to-SQL.

    Both queries run against the task's SQLite database, opened read-only; the results match
    when they hold the same set of rows (BIRD's ``set(predicted) == set(gold)``: column order
    counts, column names, row order and duplicate rows do not), or with ``order: respect`` the
    same list of rows. The query is the completion's last fenced ``sql`` (or untagged) block,
    else the whole completion, trailing semicolons dropped.

    The reference is the gold SQL as text (the database is then `database_file`), or a mapping:
    the gold SQL under ``sql`` (or BIRD's ``SQL``, Spider's ``query``) and the database under
    ``db`` (a path) or ``db_id`` (``<db_id>/<db_id>.sqlite`` under `database_root`, BIRD's and
    Spider's layout); a database the reference names wins over `database_file`. A rollout
    without a reference is ``not_applicable``.

    The policy's query may only read: no ATTACH, PRAGMA, transaction or write, no extension,
    one statement, each value at most `max_value_bytes`, stopped at `timeout` (a ``WITH
    RECURSIVE`` that never ends), at most `max_rows` rows and `max_result_mb` of them. One that
    fails, is refused, runs past `timeout` or returns too much scores 0, the reason giving
    SQLite's error. A gold query that does any of these is a Failure (``not_applicable``),
    never a 0. It runs in a worker process by default, with SQLite's heap capped at
    `memory_mb`, where a query spinning in C inside one of SQLite's functions (where the
    `timeout` check cannot reach) is stopped at `timeout` too, its worker retired; the worker
    is killed at the reward's deadline (``2 * timeout + 5`` s). A check stopped there is the
    policy's query past its limit (0, the reason), unless the gold query run alone does not
    give its rows within its own limit (``not_applicable``).

    Attributes:
        order: ``ignore`` (BIRD: the rows as sets; order and duplicates do not count) or
            ``respect`` (the same rows in the same order, duplicates counted).
        rel_tol: Numbers may differ by this much relative to the larger (``math.isclose``),
            where either is a float; two integers must be equal. 0: exact, as BIRD.
        abs_tol: Numbers may differ by this much, where either is a float. 0: exact.
        database_file: The SQLite database for references that name none (relative paths in
            a spec file resolve against the spec's folder).
        database_root: The folder a reference's ``db`` and ``db_id`` are found in, which they
            may not leave (no ``..``, links followed). None: a ``db`` path is taken as given
            (a relative one from the working directory), a power only a trusted reference may
            have (`reference_powers`), and a ``db_id`` is looked up in the working directory.
        timeout: Seconds each query may run (the gold query and the completion's).
        max_rows: The most rows a result may have; the policy's over it scores 0, the gold's
            is a Failure.
        max_result_mb: The most MiB of values a result may hold (as for `max_rows`).
        max_value_bytes: The longest string or blob a query may read or make (SQLite's
            ``SQLITE_LIMIT_LENGTH``).
        max_query_chars: The longest query run; a longer one scores 0 unread.
        memory_mb: SQLite's heap in a worker process, in MiB (its process-wide hard heap
            limit, which SQLite only lowers: the lowest of the rewards in one worker holds).
            Not applied with ``run_in: inline`` or ``thread``.

    Example:
        ```yaml
        type: sql_match
        database_root: data/bird/dev_databases
        order: ignore
        timeout: 5
        ```

    Scores:
        ````yaml
        files:
          data/bird/dev_databases/shop/shop.sqlite:
            sql: |
              CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT, country TEXT);
              INSERT INTO customers VALUES (1, 'Ada', 'UK'), (2, 'Linus', 'FI'), (3, 'Grace', 'US'),
                                           (4, 'Alan', 'UK');
        rollouts:
          - prompt: Which customers live in the UK?
            completion: |-
              ```sql
              SELECT name FROM customers WHERE country = 'UK' ORDER BY name DESC;
              ```
            reference: {db_id: shop, SQL: "SELECT name FROM customers WHERE country = 'UK'"}
            value: 1.0
          - prompt: Which customers live in the UK?
            completion: |-
              ```sql
              SELECT id, name FROM customers WHERE country = 'UK';
              ```
            reference: {db_id: shop, SQL: "SELECT name FROM customers WHERE country = 'UK'"}
            value: 0.0
          - prompt: Which customers live in the UK?
            completion: DELETE FROM customers WHERE country <> 'UK'
            reference: {db_id: shop, SQL: "SELECT name FROM customers WHERE country = 'UK'"}
            value: 0.0
        ````
    """

    default_run_in: ClassVar[RunIn] = "process"  # SQLite's functions can spin in C

    order: RowOrder = "ignore"
    rel_tol: float = 0.0
    abs_tol: float = 0.0
    database_file: str | None = None
    database_root: str | None = None
    timeout: float = 5.0
    max_rows: int = 100_000
    max_result_mb: int = 64
    max_value_bytes: int = 1 << 20
    max_query_chars: int = 100_000
    memory_mb: int = 512
    name: str = "sql_match"
    _cache: _GoldCache = field(init=False, repr=False, compare=False, default_factory=_GoldCache)
    _paths: dict[tuple[str, bool, str], str] = field(
        init=False, repr=False, compare=False, default_factory=dict
    )
    # (database, its state, gold query) -> what the gold query did alone (`overran`)
    _alone: dict[tuple[Any, ...], list[str] | None] = field(
        init=False, repr=False, compare=False, default_factory=dict
    )

    def __post_init__(self) -> None:
        if not self.timeout > 0:
            raise ValueError(f"timeout must be positive, got {self.timeout!r}")
        if self.rel_tol < 0 or self.abs_tol < 0:
            raise ValueError(f"rel_tol and abs_tol must be >= 0, got {self.rel_tol}/{self.abs_tol}")
        for key in ("max_rows", "max_result_mb", "max_value_bytes", "max_query_chars", "memory_mb"):
            if getattr(self, key) < 1:
                raise ValueError(f"{key} must be at least 1, got {getattr(self, key)!r}")
        if self.database_file is not None and not os.path.isfile(self.database_file):
            raise ValueError(
                f"database_file {self.database_file!r} is not a file "
                f"(resolved to {os.path.abspath(self.database_file)!r})"
            )
        self._cache = _GoldCache()
        self._paths = {}
        self._alone = {}

    def needs(self) -> frozenset[Need]:
        """The gold query."""
        return frozenset({"reference"})

    def reference_powers(self) -> tuple[str, ...]:
        """What a reference makes this reward do on the host: open the database file it
        names, anywhere, unless `database_root` confines it (and a mismatch's reason quotes
        a row of what it read)."""
        if self.database_root is None:
            return ("opens the database file each reference names (db), anywhere on the host",)
        return ()

    def default_deadline(self) -> float | None:
        """Both queries' ``timeout`` and a margin: the backstop (in a worker each query is
        stopped at its ``timeout``, spinning in C too: `referee.verifiers.sql`)."""
        return 2 * self.timeout + 5.0

    def limits(self) -> Limits:
        """The limits each query runs under, from the options (and where it runs)."""
        return Limits(
            timeout=self.timeout,
            max_rows=self.max_rows,
            max_bytes=self.max_result_mb << 20,
            max_value_bytes=self.max_value_bytes,
            max_sql_bytes=4 * self.max_query_chars + 1,  # UTF-8: at most 4 bytes a character
            heap_bytes=(self.memory_mb << 20) if in_worker() else None,
        )

    def check(self, rollout: Rollout) -> Score:
        gold_sql, path, given = self._task(rollout.reference)
        limits = self.limits()
        try:
            db = database(path, limits.heap_bytes is not None)
        except FileNotFoundError:
            raise NotApplicable(f"database {given!r} not found (looked for {path!r})") from None
        except (OSError, sqlite3.Error) as exc:
            raise NotApplicable(f"database {given!r} ({path!r}) cannot be opened: {exc}") from None
        gold = self._gold_rows(db, gold_sql, limits)
        sql = extract_sql(rollout.completion_text)
        if not sql:
            return Score(value=0.0, reason="no SQL in the completion")
        if len(sql) > self.max_query_chars:
            return Score(
                value=0.0,
                reason=f"the query is {len(sql):,} characters, over max_query_chars "
                f"({self.max_query_chars:,})",
            )
        try:
            rows, _ = db.rows(sql, limits)
        except QueryError as exc:
            return Score(value=0.0, reason=f"the query {clip_text(exc.message, 300)}")
        same, why = rows_match(rows, gold, self.order, self.rel_tol, self.abs_tol)
        return Score(value=1.0 if same else 0.0, reason=why)

    # -- a check past the reward's deadline: whose fault it was

    def score_sync(self, rollout: Rollout) -> Score:
        return self.overran(rollout, super().score_sync(rollout))

    async def score_batch(
        self, rollouts: Sequence[Rollout], *, concurrency: int | None = None
    ) -> list[Score]:
        scores = await super().score_batch(rollouts, concurrency=concurrency)
        if self.is_sync or not any(map(_past_deadline, scores)):  # sync: `score_sync` decided
            return scores
        loop = asyncio.get_running_loop()  # the gold query alone waits: not on the loop
        return await loop.run_in_executor(None, list, map(self.overran, rollouts, scores))

    def overran(self, rollout: Rollout, score: Score) -> Score:
        """`score`, or where it is the check run past the reward's deadline (a spin in C
        inside one of SQLite's functions, where ``timeout`` cannot reach), whose fault that
        was: the policy's query's (0, the reason), unless the gold query alone does not give
        its rows within its limits (``not_applicable`` naming it). See the module's docstring.
        """
        if in_worker() or not _past_deadline(score):
            return score
        try:
            gold_sql, path, _ = self._task(rollout.reference)
            stamp = os.stat(path)
            key = (path, stamp.st_ino, stamp.st_size, stamp.st_mtime_ns, gold_sql)
            if key not in self._alone:
                if len(self._alone) >= _GOLD_ENTRIES:
                    self._alone.clear()
                self._alone[key] = self._gold_alone(path, gold_sql)
            said = self._alone[key]
        except (RewardError, OSError):  # not decided (no worker, no file): as it was
            return score
        if said is not None:
            return Score.failed(
                "not_applicable", f"the gold query on {path!r} {said[1]}", self.name
            )
        why = score.failure.message if score.failure is not None else score.reason
        reason = f"the query ran past its limit ({clip_text(why or '', 300)})"
        if score.value is None:
            return Score(value=0.0, reason=reason)
        return dataclasses.replace(score, value=0.0, reason=reason)  # already a verdict

    def _gold_alone(self, path: str, sql: str) -> list[str] | None:
        """What the gold query does alone, under ``timeout`` and a second, where the check
        runs: in a worker, killed past it; else in a thread, left past it."""
        seconds = self.timeout + _GOLD_ALONE_GRACE
        args = (path, sql, self.limits(), self.memory_mb)
        try:
            if self.runs_in == "process":
                said: list[str] | None = pool().call(_gold_alone, args, seconds)
                return said
            return run_in_thread(lambda a: _gold_alone(*a), args, seconds, self.name)
        except VerifierTimeout:
            return ["timeout", f"ran past its limit: not done within {seconds:g}s"]

    def _gold_rows(self, db: Database, sql: str, limits: Limits) -> list[Row]:
        """The gold query's rows (cached by database state and query: a group shares one);
        a Failure, never a score, when it gives none."""
        key = (db.path, db.stamp, sql)
        gold = self._cache.get(key)
        if gold is None:
            try:
                rows, size = db.rows(sql, limits)
                gold = _Gold(rows, None, size)
            except QueryError as exc:
                gold = _Gold(None, exc, 0)
            self._cache.put(key, gold)
        if gold.error is not None:  # the reference's fault, past its limits too: never a 0
            raise NotApplicable(f"the gold query on {db.path!r} {gold.error.message}")
        assert gold.rows is not None  # (no error: rows)
        return gold.rows

    def _task(self, reference: Any) -> tuple[str, str, str]:
        """The gold SQL, the database's real path and the path as given, from a reference."""
        if reference is None:
            raise NotApplicable("rollout has no reference to compare against")
        db: Any = None
        db_id: Any = None
        if isinstance(reference, str):
            gold: Any = reference
        elif isinstance(reference, dict):
            keys = [k for k in ("sql", "SQL", "query") if k in reference]
            if len(keys) != 1:
                raise NotApplicable(
                    "sql_match needs the gold SQL under one of 'sql', 'SQL' or 'query', got "
                    f"keys {sorted(map(str, reference))[:10]}"
                )
            gold, db, db_id = reference[keys[0]], reference.get("db"), reference.get("db_id")
        else:
            raise NotApplicable(
                f"sql_match needs the gold SQL as text or a mapping, got {short(reference)}"
            )
        if not isinstance(gold, str) or not gold.strip():
            raise NotApplicable(f"the gold SQL must be non-empty text, got {short(gold)}")
        given = self._given(db, db_id)
        from_spec = db is None and db_id is None
        key = (given, from_spec, os.getcwd())  # a relative path is the working directory's
        real = self._paths.get(key)
        if real is None:  # resolved once: realpath costs a system call per path component
            if from_spec:
                real = os.path.realpath(given)
            elif self.database_root is not None:
                real = _confined(given, self.database_root)
            else:
                real = os.path.realpath(given)
            if len(self._paths) >= _PATHS:
                self._paths.clear()
            self._paths[key] = real
        return gold.strip(), real, given

    def _given(self, db: Any, db_id: Any) -> str:
        """The database as the reference (or the spec) names it: a path."""
        if db is not None and db_id is not None:
            raise NotApplicable("the reference names its database twice: give db or db_id")
        if db_id is not None:
            if not isinstance(db_id, str) or not _DB_ID.fullmatch(db_id) or ".." in db_id:
                raise NotApplicable(f"reference db_id must be a plain name, got {short(db_id)}")
            return os.path.join(db_id, f"{db_id}.sqlite")
        if db is None:
            if self.database_file is None:
                raise NotApplicable(
                    "the reference names no database (db or db_id) and database_file is not set"
                )
            return self.database_file
        if not isinstance(db, str) or not db:
            raise NotApplicable(f"reference db must be a path, got {short(db)}")
        return db


def _past_deadline(score: Score) -> bool:
    """Whether `score` is a check run past the reward's deadline: a ``timeout`` Failure, or
    that as the policy's verdict (`Score.fault`). The check itself gives neither: its own
    limits end in a score or in ``not_applicable``."""
    if score.failure is not None:
        return score.failure.type == "timeout"
    return getattr(score, "fault", None) == "timeout"


def _confined(db: str, root: str) -> str:
    """The real path of `db` (relative to `root`, or absolute), which must lie in `root`."""
    if ".." in db.replace("\\", "/").split("/"):
        raise NotApplicable(f"reference db {db!r} has a '..' component (database_root {root!r})")
    base = os.path.realpath(root)
    real = os.path.realpath(os.path.join(base, db))
    if os.path.commonpath([real, base]) != base:
        raise NotApplicable(
            f"reference db {db!r} resolves to {real!r}, outside database_root {root!r}"
        )
    return real
