"""`referee.verifiers.sql`: one query on a connection that cannot change anything, under limits.

The hostile table (writes, ATTACH, PRAGMA, extensions, huge values) is in
tests/rewards/test_sql.py, through the reward; here the runner alone, and what only a worker
process gives it: a query stopped at its own timeout even where it spins in C.
"""

from __future__ import annotations

import os
import sqlite3
import time
from dataclasses import replace
from pathlib import Path

import pytest

from referee import workers
from referee.verifiers.sql import CONNECTIONS, Limits, QueryError, open_connections, run_query

LIMITS = Limits(timeout=1.0, max_rows=10, max_bytes=1 << 20, max_value_bytes=1 << 20,
                max_sql_bytes=1 << 16, heap_bytes=None)  # fmt: skip
# One step of SQLite's virtual machine that repeats a character 2e9 times, six times over:
# no progress handler and no interrupt reaches inside it (3.4 s a call, SQLite 3.40).
COUNTING = "WITH RECURSIVE r(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM r)"  # no end
SPIN = "SELECT " + " + ".join(["length(printf('%.*c', 2000000000, 'x'))"] * 6)


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("sql") / "t.sqlite"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, name TEXT)")
    conn.executemany("INSERT INTO t VALUES (?, ?)", [(1, "Oak"), (2, "Pine"), (3, "Elm")])
    conn.commit()
    conn.close()
    return path


def test_run_query_alone(db: Path) -> None:
    rows, size = run_query(str(db), "SELECT name FROM t WHERE id < 3 ORDER BY id", LIMITS)
    assert rows == [("Oak",), ("Pine",)] and size > 0
    with pytest.raises(QueryError) as caught:
        run_query(str(db), "DELETE FROM t", LIMITS)
    assert caught.value.kind == "refused"
    assert open_connections() <= CONNECTIONS


@pytest.mark.parametrize(
    ("sql", "kind", "says"),
    [
        ("SELECT * FROM nope", "error", "failed: no such table: nope"),
        ("PRAGMA journal_mode", "refused", "was refused: PRAGMA journal_mode"),
        ("SELECT 1; SELECT 2", "refused", "one statement only"),
        (f"{COUNTING} SELECT * FROM r", "too_large", "more than 10 rows"),  # each row fetched
        (f"{COUNTING} SELECT COUNT(*) FROM r", "timeout", "timed out after 0.2s"),  # no end
        ("SELECT randomblob(2000000)", "too_large", "max_value_bytes"),
    ],
)
def test_what_a_query_that_gives_no_rows_says(db: Path, sql: str, kind: str, says: str) -> None:
    with pytest.raises(QueryError) as caught:
        run_query(str(db), sql, replace(LIMITS, timeout=0.2))
    assert caught.value.kind == kind and says in caught.value.message, caught.value.message


def _spin_in_a_worker(path: str, timeout: float) -> list[object]:
    """In a worker: run SPIN under `timeout`; [kind, message, seconds, pid] (a `call`)."""
    limits = replace(LIMITS, timeout=timeout, heap_bytes=64 << 20)
    start = time.monotonic()
    try:
        run_query(path, SPIN, limits)
    except QueryError as exc:
        return [exc.kind, exc.message, time.monotonic() - start, os.getpid()]
    return ["rows", "", time.monotonic() - start, os.getpid()]


def _pid() -> int:
    return os.getpid()


@pytest.mark.slow
def test_in_a_worker_a_query_spinning_in_c_stops_at_its_timeout(db: Path) -> None:
    pool = workers.WorkerPool(1)
    try:
        kind, message, took, pid = pool.call(_spin_in_a_worker, (str(db), 0.5), 30)
        # At its timeout and a grace or two (0.5 s + 0.5 s), not after the spin (20 s): the
        # verdict is a timeout, and the worker retired so the thread spinning in C ends with it.
        assert (kind, message) == ("timeout", "timed out after 0.5s")
        assert took < 3.0, took
        assert pool.call(_pid, (), 30) != pid  # the next call: a fresh worker
        deadline = time.monotonic() + 5
        while os.path.exists(f"/proc/{pid}") and _state(pid) not in ("Z", "X"):
            assert time.monotonic() < deadline, "the retired worker is still running"
            time.sleep(0.05)
    finally:
        pool.close()


def _state(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return "X"


def test_outside_a_worker_nothing_is_retired(db: Path) -> None:
    # The calling thread runs the query: a query the progress handler stops is all it needs.
    assert not workers.in_worker()
    with pytest.raises(QueryError) as caught:
        run_query(str(db), f"{COUNTING} SELECT COUNT(*) FROM r", replace(LIMITS, timeout=0.2))
    assert caught.value.kind == "timeout"
    assert not workers._common.retiring()
