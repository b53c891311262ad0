"""SQLite queries run so that they cannot change anything, under limits: what `sql_match` runs.

`run_query` (and `database`, this thread's open connection to a file, and `Database.rows`)
runs one query on a connection that cannot change anything: opened read-only (``mode=ro``),
with an authorizer that allows reading and calling functions only (no ATTACH, PRAGMA,
transaction or write of any kind; ``load_extension`` and ``fts3_tokenizer`` refused), no
attached databases, one statement per query, a length cap on every value
(`Limits.max_value_bytes`), a deadline checked every thousand virtual-machine steps
(`Limits.timeout`: a ``WITH RECURSIVE`` with no end is interrupted), and caps on the rows and
bytes fetched. A query that gives no rows raises `QueryError`, whose `kind` says why.

Some of SQLite's functions spend unbounded time inside one virtual-machine step, where the
deadline check never runs (measured, SQLite 3.40, one core: ``printf('%.*c', 2000000000,
'x')`` 15 s; ``instr`` of two strings of 1 MB and 0.5 MB, 8 s), and no interrupt reaches them
either (``sqlite3_interrupt`` is read between steps too). In a worker process
(`referee.workers`) a query therefore runs on a thread of its own (SQLite lets go of the
interpreter lock while it steps): past its `timeout` it is interrupted, and where it is still
spinning a moment later the query has timed out all the same, and the worker retires
(`referee.workers.retire`), so the thread spinning in C ends with its process once the verdict
is sent, at the query's own limit rather than at the reward's deadline. There, too, SQLite's
heap is capped (`Limits.heap_bytes`, process-wide) and its temporary tables kept in that heap,
so neither memory nor disk grows past it. Outside a worker a query runs in the calling thread,
with every limit but those.
"""

from __future__ import annotations

import os
import sqlite3
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from referee.errors import RefereeError
from referee.workers import in_worker, retire

__all__ = [
    "CONNECTIONS",
    "Database",
    "Limits",
    "QueryError",
    "QueryOutcome",
    "Row",
    "database",
    "forget",
    "open_connections",
    "run_query",
]

Row = tuple[Any, ...]

QueryOutcome = Literal["error", "timeout", "refused", "too_large", "memory", "not_a_query"]

CONNECTIONS = 8
"""Open databases kept per thread."""

_ALLOWED = frozenset(
    {sqlite3.SQLITE_SELECT, sqlite3.SQLITE_READ, sqlite3.SQLITE_FUNCTION, sqlite3.SQLITE_RECURSIVE}
)
# load_extension is off in the connection too; fts3_tokenizer hands out a C pointer.
_REFUSED_FUNCTIONS = frozenset({"load_extension", "fts3_tokenizer"})
# The authorizer's action codes, for reasons (the module's other SQLITE_ names are result codes,
# some with the same numbers).
_ACTIONS = {
    getattr(sqlite3, f"SQLITE_{name}"): name.replace("_", " ")
    for name in (
        "CREATE_INDEX", "CREATE_TABLE", "CREATE_TEMP_INDEX", "CREATE_TEMP_TABLE",
        "CREATE_TEMP_TRIGGER", "CREATE_TEMP_VIEW", "CREATE_TRIGGER", "CREATE_VIEW", "DELETE",
        "DROP_INDEX", "DROP_TABLE", "DROP_TEMP_INDEX", "DROP_TEMP_TABLE", "DROP_TEMP_TRIGGER",
        "DROP_TEMP_VIEW", "DROP_TRIGGER", "DROP_VIEW", "INSERT", "PRAGMA", "READ", "SELECT",
        "TRANSACTION", "UPDATE", "ATTACH", "DETACH", "ALTER_TABLE", "REINDEX", "ANALYZE",
        "CREATE_VTABLE", "DROP_VTABLE", "FUNCTION", "SAVEPOINT", "RECURSIVE",
    )
}  # fmt: skip
_STEPS = 1000  # virtual-machine steps between two deadline checks
# Seconds a query on its own thread (in a worker) gets past its timeout before it is
# interrupted, and again before it counts as spinning in C: the deadline check inside SQLite
# fires at the timeout itself, so a query still running this long after it is past reach.
_STOP_GRACE = 0.25


class QueryError(RefereeError):
    """A query gave no rows: what happened, and what to say of it after "the query"
    (``failed: no such table: t``, ``timed out after 5s``), SQLite's error text included."""

    def __init__(self, kind: QueryOutcome, message: str) -> None:
        super().__init__(message)
        self.kind: QueryOutcome = kind
        self.message = message


@dataclass(frozen=True, slots=True)
class Limits:
    """What one query may use (in SQLite's units)."""

    timeout: float
    max_rows: int
    max_bytes: int
    max_value_bytes: int
    max_sql_bytes: int
    heap_bytes: int | None  # SQLite's process-wide hard heap limit; only in a worker


class _Guard:
    """A connection's authorizer and deadline: what was refused, and whether time ran out."""

    __slots__ = ("denied", "fired", "until")

    def __init__(self) -> None:
        self.until = 0.0
        self.fired = False
        self.denied: str | None = None

    def progress(self) -> int:
        if time.monotonic() > self.until:
            self.fired = True
            return 1  # nonzero: SQLite interrupts the statement
        return 0

    def authorize(
        self, action: int, arg1: str | None, arg2: str | None, db: str | None, trigger: str | None
    ) -> int:
        if action in _ALLOWED and (
            action != sqlite3.SQLITE_FUNCTION or (arg2 or "").lower() not in _REFUSED_FUNCTIONS
        ):
            return sqlite3.SQLITE_OK
        if self.denied is None:
            what = _ACTIONS.get(action, f"action {action}")
            detail = arg2 if action == sqlite3.SQLITE_FUNCTION else arg1
            self.denied = f"{what} {detail}" if detail else what
        return sqlite3.SQLITE_DENY


_heap_limit = 0  # the hard heap limit this process has set (0: none); SQLite only lowers it
_heap_lock = threading.Lock()


def _lower_heap_limit(limit: int) -> None:
    """Lower SQLite's process-wide hard heap limit to `limit` bytes (a PRAGMA can only lower
    it, so the lowest limit seen in a worker holds for its life)."""
    global _heap_limit
    with _heap_lock:
        if _heap_limit and _heap_limit <= limit:
            return
        control = sqlite3.connect(":memory:")
        try:
            control.execute(f"PRAGMA hard_heap_limit={int(limit)}")
        finally:
            control.close()
        _heap_limit = limit


class Database:
    """One SQLite file, opened so that no query can change it or anything else.

    Attributes:
        path: The file's real path.
        stamp: Its identity and state when opened (device, inode, size, mtime): a cache of
            results keyed by it is a cache of this state of the file.
    """

    def __init__(self, path: str, stamp: tuple[int, ...], in_memory_temp: bool) -> None:
        self.path = path
        self.stamp = stamp
        self.guard = _Guard()
        # Used by one thread at a time, but not always the one that opened it (in a worker a
        # query steps on a thread of its own: `_stoppable`).
        conn = sqlite3.connect(
            Path(path).as_uri() + "?mode=ro",
            uri=True,
            isolation_level=None,
            cached_statements=64,
            check_same_thread=False,
        )
        try:
            if hasattr(conn, "enable_load_extension"):  # absent where Python was built without
                conn.enable_load_extension(False)
            if in_memory_temp:  # in a worker, whose heap is capped: no temporary files at all
                conn.execute("PRAGMA temp_store=MEMORY")
            conn.setlimit(sqlite3.SQLITE_LIMIT_ATTACHED, 0)
            conn.setlimit(sqlite3.SQLITE_LIMIT_WORKER_THREADS, 0)
            conn.set_authorizer(self.guard.authorize)
            conn.set_progress_handler(self.guard.progress, _STEPS)
        except BaseException:
            conn.close()
            raise
        self.conn = conn
        self._limits: tuple[int, int] = (-1, -1)

    def close(self) -> None:
        self.conn.close()

    def rows(self, sql: str, limits: Limits) -> tuple[list[Row], int]:
        """The rows `sql` gives and their size in bytes (about).

        Raises:
            QueryError: It gives none (an error, refused, past `limits`, not a query); where
                SQLite ran out of memory, this thread's connection to the file is closed.
        """
        if limits.heap_bytes is not None:
            _lower_heap_limit(limits.heap_bytes)
        if self._limits != (limits.max_value_bytes, limits.max_sql_bytes):
            self.conn.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, limits.max_value_bytes)
            self.conn.setlimit(sqlite3.SQLITE_LIMIT_SQL_LENGTH, limits.max_sql_bytes)
            self._limits = (limits.max_value_bytes, limits.max_sql_bytes)
        guard = self.guard
        guard.denied, guard.fired = None, False
        guard.until = time.monotonic() + limits.timeout
        try:
            if in_worker():
                return self._stoppable(sql, limits)
            return self._fetch(sql, limits)
        except QueryError as exc:
            if exc.kind == "memory":  # a connection that ran out of memory is not kept
                forget(self.path)
            raise

    def _stoppable(self, sql: str, limits: Limits) -> tuple[list[Row], int]:
        """`_fetch` on the query thread, stopped at `limits.timeout` even where it spins in C
        (see the module's docstring)."""
        thread = _query_thread()
        thread.start(self._fetch, sql, limits)
        try:
            ended = thread.wait(limits.timeout + _STOP_GRACE)
        except BaseException:  # the wait itself was stopped (the check's deadline): the query too
            self._stop(thread)
            raise
        if ended or self._stop(thread):
            return thread.result()  # its rows, or what SQLite said (interrupted: a timeout)
        raise QueryError("timeout", f"timed out after {limits.timeout:g}s")

    def _stop(self, thread: _QueryThread) -> bool:
        """Interrupt the query on `thread`: True where it ended; else it spins inside one of
        SQLite's C functions, where no check reaches and a thread cannot be stopped, and this
        worker retires (it answers the query's verdict, then exits)."""
        self.guard.fired = True  # what SQLite says now is a timeout
        self.conn.interrupt()  # a loop SQLite checks for it (a sort) ends here
        if thread.wait(_STOP_GRACE):
            return True
        _abandon(self, thread)
        retire()
        return False

    def _fetch(self, sql: str, limits: Limits) -> tuple[list[Row], int]:
        cursor = self.conn.cursor()
        rows: list[Row] = []
        size = 0
        try:
            cursor.execute(sql)
            if cursor.description is None:
                raise QueryError("not_a_query", "is no query (it gives no result set)")
            for row in cursor:  # one row at a time: a cap is checked before the next is made
                rows.append(row)
                size += _row_bytes(row)
                if len(rows) > limits.max_rows:
                    raise QueryError(
                        "too_large", f"returned more than {limits.max_rows:,} rows (max_rows)"
                    )
                if size > limits.max_bytes:
                    raise QueryError(
                        "too_large",
                        f"returned more than {limits.max_bytes >> 20} MiB of rows (max_result_mb)",
                    )
        except MemoryError:
            raise QueryError("memory", "ran out of memory (memory_mb)") from None
        except (sqlite3.Error, ValueError, OverflowError) as exc:
            raise self._failed(exc, limits) from None
        finally:
            cursor.close()
        return rows, size

    def _failed(self, exc: Exception, limits: Limits) -> QueryError:
        text = str(exc) or type(exc).__name__
        if self.guard.fired:
            return QueryError("timeout", f"timed out after {limits.timeout:g}s")
        if self.guard.denied is not None:
            denied = self.guard.denied
            return QueryError("refused", f"was refused: {denied} is not allowed ({text})")
        if isinstance(exc, sqlite3.DataError) and "too big" in text:
            return QueryError(
                "too_large", f"failed: {text} (max_value_bytes is {limits.max_value_bytes:,})"
            )
        if isinstance(exc, sqlite3.ProgrammingError) and "one statement" in text:
            return QueryError("refused", f"was refused: one statement only ({text})")
        return QueryError("error", f"failed: {text}")


def _row_bytes(row: Row) -> int:
    size = 16 * len(row)
    for value in row:
        if type(value) is str or type(value) is bytes:
            size += len(value)
    return size


_local = threading.local()


class _QueryThread:
    """A thread that runs one query at a time for this process (in a worker), handed over
    with two locks: a query's way there and back costs tens of microseconds."""

    def __init__(self) -> None:
        self.pid = os.getpid()
        self._go = threading.Lock()
        self._go.acquire()
        self._done = threading.Lock()
        self._done.acquire()
        self._job: tuple[Callable[[str, Limits], tuple[list[Row], int]], str, Limits] | None = None
        self._outcome: tuple[list[Row], int] | BaseException | None = None
        threading.Thread(target=self._loop, name="referee-sql", daemon=True).start()

    def _loop(self) -> None:
        while True:
            self._go.acquire()
            assert self._job is not None  # (set before `_go` is released)
            fn, sql, limits = self._job
            try:
                self._outcome = fn(sql, limits)
            except BaseException as exc:
                self._outcome = exc
            self._done.release()

    def start(
        self, fn: Callable[[str, Limits], tuple[list[Row], int]], sql: str, limits: Limits
    ) -> None:
        self._job = (fn, sql, limits)
        self._go.release()

    def wait(self, seconds: float) -> bool:
        """Whether the query ended within `seconds` (then `result` has it)."""
        return self._done.acquire(timeout=seconds)

    def result(self) -> tuple[list[Row], int]:
        outcome, self._outcome, self._job = self._outcome, None, None
        if isinstance(outcome, BaseException):
            raise outcome
        assert outcome is not None  # (the query ended: `wait`)
        return outcome


_query: list[_QueryThread] = []  # this process's query thread, once a worker runs a query
_query_lock = threading.Lock()


def _query_thread() -> _QueryThread:
    """This process's thread for queries that must be stoppable (in a worker)."""
    with _query_lock:
        if not _query or _query[0].pid != os.getpid():  # never a thread from before a fork
            _query[:] = [_QueryThread()]
        return _query[0]


def _abandon(db: Database, thread: _QueryThread) -> None:
    """Leave `db` and `thread` to the query spinning on them: later queries (were there any
    before the worker exits) get a connection and a thread of their own."""
    with _query_lock:
        if _query and _query[0] is thread:
            _query.clear()
    opened: OrderedDict[str, Database] | None = getattr(_local, "open", None)
    if opened is not None and opened.get(db.path) is db:
        del opened[db.path]  # not closed: its statement is still stepping on the other thread


def database(path: str, worker: bool) -> Database:
    """This thread's open connection to the file at the real path `path` (one per thread: a
    connection's deadline and authorizer state are its own), reopened when the file changed;
    `worker`: keep its temporary tables in SQLite's (capped) heap.

    Raises:
        OSError: The file cannot be read (`FileNotFoundError`: there is none).
        sqlite3.Error: It is no database SQLite can open.
    """
    st = os.stat(path)
    stamp = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)
    pid = os.getpid()
    if getattr(_local, "pid", None) != pid:  # never a connection from before a fork
        _local.pid, _local.open = pid, OrderedDict()
    opened: OrderedDict[str, Database] = _local.open
    db = opened.get(path)
    if db is not None and db.stamp == stamp:
        opened.move_to_end(path)
        return db
    if db is not None:
        del opened[path]
        db.close()
    db = opened[path] = Database(path, stamp, worker)
    while len(opened) > CONNECTIONS:
        opened.popitem(last=False)[1].close()
    return db


def forget(path: str) -> None:
    """Close this thread's connection to `path` (after SQLite ran out of memory on it)."""
    opened: OrderedDict[str, Database] | None = getattr(_local, "open", None)
    if opened is not None and path in opened:
        opened.pop(path).close()


def open_connections() -> int:
    """How many databases this thread holds open."""
    return len(getattr(_local, "open", ()))


def run_query(path: str, sql: str, limits: Limits) -> tuple[list[Row], int]:
    """The rows `sql` gives on the SQLite database at `path` (opened read-only, under the
    authorizer and `limits`), and their size in bytes, about.

    Raises:
        QueryError: It gives none.
    """
    return database(os.path.realpath(path), limits.heap_bytes is not None).rows(sql, limits)
