"""`sql_match`: text-to-SQL graded by running both queries on a real SQLite database.

The semantics are BIRD's, checked against BIRD's own comparison (`bird`, below: both queries
executed with plain `sqlite3`, ``set(predicted) == set(gold)``, an exception scoring 0); the
hostile table runs each attack on a database whose bytes are hashed before and after.
"""

from __future__ import annotations

import hashlib
import math
import os
import pickle
import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

import referee
from referee.cli import main
from referee.reward import needs, reference_powers
from referee.rewards import SqlMatch
from referee.rewards.sql import Limits, extract_sql, rows_match
from referee.verifiers import sql as runner
from tests.support.hostile import HOSTILE, score_guarded
from tests.support.rollouts import make

SCHOOLS = [  # id, name, city, score, students; "Oak" twice in Austin, a NULL score
    (1, "Oak", "Austin", 3.5, 120),
    (2, "Pine", "Austin", 3.25, 80),
    (3, "Elm", "Boston", 2.75, 200),
    (4, "Oak", "Austin", 3.5, 120),
    (5, "Birch", "Denver", None, 50),
    (6, "Cedar", "Boston", 1.0 / 3.0, 75),
]


def build(path: Path) -> Path:
    """A small database: schools (with a duplicate row's values and a NULL) and cities."""
    path.parent.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE schools (id INTEGER PRIMARY KEY, name TEXT, city TEXT, "
                 "score REAL, students INTEGER)")  # fmt: skip
    conn.executemany("INSERT INTO schools VALUES (?, ?, ?, ?, ?)", SCHOOLS)
    conn.execute("CREATE TABLE cities (name TEXT, state TEXT)")
    conn.executemany("INSERT INTO cities VALUES (?, ?)",
                     [("Austin", "TX"), ("Boston", "MA"), ("Denver", "CO")])  # fmt: skip
    conn.commit()
    conn.close()
    return path


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build(tmp_path_factory.mktemp("sql") / "schools.sqlite")


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def bird(predicted: str, gold: str, path: Path) -> int:
    """BIRD's ``evaluation.py`` ``execute_sql``: both queries on one connection, compared as
    sets of rows; any exception scores 0."""
    conn = sqlite3.connect(path)
    try:
        cursor = conn.cursor()
        cursor.execute(predicted)
        predicted_res = cursor.fetchall()
        cursor.execute(gold)
        ground_truth_res = cursor.fetchall()
        return 1 if set(predicted_res) == set(ground_truth_res) else 0
    except Exception:
        return 0
    finally:
        conn.close()


def inline(**options: Any) -> SqlMatch:
    reward = SqlMatch(**options)
    reward.run_in = "inline"  # fast; the process path has tests of its own below
    return reward


def one(reward: referee.Reward, completion: str, reference: Any) -> referee.Score:
    [score] = referee.score(reward, [make(completion, reference)])
    return score


# --- BIRD's semantics ---------------------------------------------------------------------

GOLD_CITY_COUNTS = "SELECT city, COUNT(*) FROM schools GROUP BY city"

PAIRS = [
    # (predicted, gold): each scored as BIRD scores it
    (GOLD_CITY_COUNTS, GOLD_CITY_COUNTS),  # the gold itself
    ("SELECT city, COUNT(id) FROM schools GROUP BY city ORDER BY city DESC",
     GOLD_CITY_COUNTS),  # row order does not count
    ("SELECT COUNT(*), city FROM schools GROUP BY city", GOLD_CITY_COUNTS),  # column order does
    ("SELECT city AS c, COUNT(*) AS n FROM schools GROUP BY city",
     GOLD_CITY_COUNTS),  # column names do not
    ("SELECT name FROM schools WHERE city = 'Austin'",
     "SELECT DISTINCT name FROM schools WHERE city = 'Austin'"),  # duplicates collapse
    ("SELECT name FROM schools", "SELECT name FROM schools WHERE id < 6"),  # an extra row
    ("SELECT name FROM schools WHERE id < 3", "SELECT name FROM schools"),  # missing rows
    ("SELECT 1", "SELECT 1.0"),  # 1 == 1.0, as in a Python set
    ("SELECT '1'", "SELECT 1"),  # text is not a number
    ("SELECT score FROM schools WHERE id = 5", "SELECT NULL"),  # NULL is None
    ("SELECT name FROM schools WHERE id > 99", "SELECT city FROM schools WHERE id > 99"),  # both
    # empty: equal sets (BIRD pays it too)
    ("SELECT name FROM schools WHERE id > 99", "SELECT name FROM schools"),
    ("SELECT upper(name) FROM schools", "SELECT name FROM schools"),  # case counts
    ("SELECT AVG(score) FROM schools", "SELECT SUM(score) / COUNT(score) FROM schools"),
    ("SELECT s.name, c.state FROM schools s JOIN cities c ON s.city = c.name WHERE s.id = 3",
     "SELECT name, 'MA' FROM schools WHERE id = 3"),
    ("SELECT nme FROM schools", "SELECT name FROM schools"),  # an error: 0
]  # fmt: skip


@pytest.mark.parametrize(("predicted", "gold"), PAIRS)
def test_scores_as_bird_does(db: Path, predicted: str, gold: str) -> None:
    score = one(inline(), predicted, {"sql": gold, "db": str(db)})
    assert score.failure is None, score.failure
    assert score.value == bird(predicted, gold, db), score.reason


rows_ = st.lists(
    st.tuples(
        st.one_of(st.none(), st.integers(-3, 3), st.sampled_from([0.5, 1.0, 2.0, -0.0])),
        st.sampled_from(["a", "b", "", "A"]),
    ),
    max_size=8,
)


@given(rows_, rows_)
def test_ignore_is_set_equality(a: list[tuple[Any, ...]], b: list[tuple[Any, ...]]) -> None:
    assert rows_match(a, b)[0] == (set(a) == set(b))
    assert rows_match(a, a + a[:1])[0]  # a duplicate changes nothing


@given(rows_, rows_)
def test_respect_is_list_equality(a: list[tuple[Any, ...]], b: list[tuple[Any, ...]]) -> None:
    assert rows_match(a, b, "respect")[0] == (a == b)


def test_respect_counts_order_and_duplicates(db: Path) -> None:
    reward = inline(order="respect")
    ordered = "SELECT name FROM schools ORDER BY id"
    ref = {"sql": ordered, "db": str(db)}
    assert one(reward, ordered, ref).value == 1.0
    reverse = one(reward, "SELECT name FROM schools ORDER BY id DESC", ref)
    assert reverse.value == 0.0 and reverse.reason == "row 1 is ('Cedar',), gold ('Oak',)"
    distinct = one(reward, "SELECT DISTINCT name FROM schools ORDER BY id", ref)
    assert distinct.value == 0.0 and distinct.reason == "5 rows, gold 6"
    assert one(inline(), "SELECT DISTINCT name FROM schools", ref).value == 1.0  # as BIRD


# --- tolerance ----------------------------------------------------------------------------


def tolerant_oracle(a: list[tuple[Any, ...]], b: list[tuple[Any, ...]], rel: float, ab: float):
    """The documented rule, by brute force: every row of each side has a close row on the
    other; cells close when equal, or numbers (one a float) within math.isclose."""

    def cell(x: Any, y: Any) -> bool:
        nums = all(type(v) in (int, float) for v in (x, y))
        floaty = float in (type(x), type(y))
        return x == y or (nums and floaty and math.isclose(x, y, rel_tol=rel, abs_tol=ab))

    def row(x: tuple[Any, ...], y: tuple[Any, ...]) -> bool:
        return len(x) == len(y) and all(cell(p, q) for p, q in zip(x, y, strict=True))

    return all(any(row(x, y) for y in b) for x in a) and all(any(row(y, x) for x in a) for y in b)


floats = st.one_of(
    st.integers(-5, 5),
    st.floats(-10, 10, allow_nan=False).map(lambda f: round(f, 2)),
    st.sampled_from([1e-9, 1.0000001, 100.0, 100.01, 99.99]),
)
tolerant_rows = st.lists(st.tuples(floats, st.sampled_from(["x", "y"]), floats), max_size=7)


@settings(max_examples=300)
@given(tolerant_rows, tolerant_rows, st.sampled_from([(1e-6, 0.0), (0.0, 0.05), (1e-3, 1e-3)]))
def test_tolerance_matches_its_definition(
    a: list[tuple[Any, ...]], b: list[tuple[Any, ...]], tol: tuple[float, float]
) -> None:
    rel, ab = tol
    assert rows_match(a, b, "ignore", rel, ab)[0] == tolerant_oracle(a, b, rel, ab)
    same_len = len(a) == len(b)
    pairwise = same_len and all(
        tolerant_oracle([x], [y], rel, ab) for x, y in zip(a, b, strict=True)
    )
    assert rows_match(a, b, "respect", rel, ab)[0] == pairwise


@pytest.mark.parametrize(
    ("predicted", "gold", "options", "value"),
    [
        ("SELECT 0.1 + 0.2", "SELECT 0.3", {}, 0.0),  # exact by default, as BIRD
        ("SELECT 0.1 + 0.2", "SELECT 0.3", {"rel_tol": 1e-9}, 1.0),
        ("SELECT 3.333", "SELECT 10.0 / 3", {"abs_tol": 0.001}, 1.0),
        ("SELECT 3.33", "SELECT 10.0 / 3", {"abs_tol": 0.001}, 0.0),
        ("SELECT 100", "SELECT 101", {"rel_tol": 0.1}, 0.0),  # two integers: exact
        ("SELECT 100", "SELECT 100.5", {"rel_tol": 0.01}, 1.0),  # one float: close
        ("SELECT 'a', 1.0", "SELECT 'b', 1.0", {"rel_tol": 0.5}, 0.0),  # text stays exact
        # set semantics with tolerance: each side covered by the other
        ("SELECT 1.0 UNION ALL SELECT 1.0000001", "SELECT 1.0", {"rel_tol": 1e-6}, 1.0),
        ("SELECT 1.0 UNION ALL SELECT 2.0", "SELECT 1.0", {"rel_tol": 1e-6}, 0.0),
    ],
)
def test_tolerance_on_queries(
    db: Path, predicted: str, gold: str, options: dict[str, float], value: float
) -> None:
    score = one(inline(**options), predicted, {"sql": gold, "db": str(db)})
    assert score.value == value, score.reason


def test_tolerance_on_many_rows_is_not_quadratic() -> None:
    gold = [(i, "x", i / 7) for i in range(20_000)]
    near = [(i, "x", i / 7 + 1e-12) for i in range(20_000)]
    start = time.perf_counter()
    assert rows_match(near, gold, "ignore", 1e-9, 1e-9)[0]
    assert time.perf_counter() - start < 5.0  # a windowed search, not 4e8 comparisons


# --- references -------------------------------------------------------------------------


def test_reference_shapes(db: Path, tmp_path: Path) -> None:
    gold = "SELECT name FROM schools WHERE id = 1"
    good = "SELECT 'Oak'"
    with_file = inline(database_file=str(db))
    assert one(with_file, good, gold).value == 1.0  # plain text: the spec's database
    assert one(inline(), good, {"sql": gold, "db": str(db)}).value == 1.0
    assert one(inline(), good, {"SQL": gold, "db": str(db)}).value == 1.0  # BIRD's key
    assert one(inline(), good, {"query": gold, "db": str(db)}).value == 1.0  # Spider's
    # BIRD's and Spider's layout: <root>/<db_id>/<db_id>.sqlite
    build(tmp_path / "dev_databases" / "california" / "california.sqlite")
    rooted = inline(database_root=str(tmp_path / "dev_databases"))
    assert one(rooted, good, {"SQL": gold, "db_id": "california"}).value == 1.0
    assert one(rooted, good, {"sql": gold, "db": "california/california.sqlite"}).value == 1.0
    # a reference's database wins over the spec's
    other = build(tmp_path / "other.sqlite")
    conn = sqlite3.connect(other)
    conn.execute("UPDATE schools SET name = 'Fir' WHERE id = 1")
    conn.commit()
    conn.close()
    assert one(with_file, "SELECT 'Fir'", {"sql": gold, "db": str(other)}).value == 1.0


def test_a_relative_database_file_is_the_spec_folders(db: Path, tmp_path: Path) -> None:
    build(tmp_path / "specs" / "data" / "s.sqlite")
    spec = tmp_path / "specs" / "sql.yaml"
    spec.write_text("type: sql_match\ndatabase_file: data/s.sqlite\nrun_in: inline\n")
    reward = referee.load(spec)
    assert one(reward, "SELECT 3", "SELECT COUNT(*) FROM cities").value == 1.0


@pytest.mark.parametrize(
    ("reference", "says"),
    [
        (None, "no reference"),
        (42, "needs the gold SQL as text or a mapping"),
        ({"db": "x.sqlite"}, "under one of 'sql', 'SQL' or 'query'"),
        ({"sql": "SELECT 1", "query": "SELECT 1"}, "under one of"),
        ({"sql": "", "db": "x"}, "non-empty text"),
        ({"sql": ["SELECT 1"]}, "non-empty text"),
        ("SELECT 1", "names no database"),  # text, and no database_file
        ({"sql": "SELECT 1", "db": "/no/such/file.sqlite"}, "'/no/such/file.sqlite' not found"),
        ({"sql": "SELECT 1", "db": "a.sqlite", "db_id": "a"}, "give db or db_id"),
        ({"sql": "SELECT 1", "db_id": "../etc"}, "plain name"),
        ({"sql": "SELECT 1", "db": 7}, "must be a path"),
    ],
)
def test_a_missing_or_wrong_reference_is_never_paid(reference: Any, says: str) -> None:
    score = one(inline(), "SELECT 1", reference)
    assert score.value is None and score.failure is not None
    assert score.failure.type == "not_applicable" and says in score.failure.message


def test_the_root_confines_what_a_reference_may_open(db: Path, tmp_path: Path) -> None:
    root = tmp_path / "root"
    build(root / "a" / "a.sqlite")
    (root / "escape.sqlite").symlink_to(db)  # inside by name, outside once followed
    reward = inline(database_root=str(root))
    for bad, says in [
        ("../schools.sqlite", "'..'"),
        (str(db), "outside database_root"),
        ("escape.sqlite", "outside database_root"),
    ]:
        score = one(reward, "SELECT 1", {"sql": "SELECT 1", "db": bad})
        assert score.failure is not None and says in score.failure.message, bad
    assert one(reward, "SELECT 1", {"sql": "SELECT 1", "db": "a/a.sqlite"}).value == 1.0
    # the power `referee serve` refuses without --trust-clients
    assert reference_powers(inline()) == [
        ("sql_match", "opens the database file each reference names (db), anywhere on the host")
    ]
    assert reference_powers(reward) == []


def test_a_missing_database_file_in_the_spec_is_an_error_naming_it(tmp_path: Path) -> None:
    with pytest.raises(referee.SpecError, match=r"no-such\.sqlite"):
        referee.load({"type": "sql_match", "database_file": str(tmp_path / "no-such.sqlite")})


@pytest.mark.parametrize(
    "options",
    [{"timeout": 0}, {"rel_tol": -1}, {"max_rows": 0}, {"memory_mb": 0}, {"order": "sorted"}],
)
def test_bad_options_do_not_load(options: dict[str, Any]) -> None:
    with pytest.raises(referee.SpecError):
        referee.load({"type": "sql_match", **options})


def test_it_needs_a_reference_and_a_missing_one_fails_the_total(db: Path) -> None:
    assert [n for _, n in needs(referee.load({"type": "sql_match"}))] == ["reference"]
    spec = {"name": "t2s", "combine": "weighted", "components": {
        "sql": {"type": "sql_match", "run_in": "inline", "weight": 0.9},
        "short": {"type": "length", "max_length": 1000, "weight": 0.1}}}  # fmt: skip
    [score] = referee.score(referee.load(spec), [make("SELECT 1", None)])
    assert score.value is None and score.failure is not None
    assert score.failure.where == "sql" and "no reference" in score.failure.message


# --- the gold query is the data's ----------------------------------------------------------


@pytest.mark.parametrize(
    ("gold", "kind", "says"),
    [
        ("SELECT * FROM no_such_table", "not_applicable", "no such table: no_such_table"),
        ("SELEC 1", "not_applicable", "syntax error"),
        ("-- nothing", "not_applicable", "is no query"),
        ("WITH RECURSIVE r(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM r) "
         "SELECT COUNT(*) FROM r", "not_applicable", "timed out after 0.3s"),  # the data's
        ("WITH RECURSIVE r(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM r LIMIT 50) "
         "SELECT x FROM r", "not_applicable", "more than 20 rows (max_rows)"),
    ],
)  # fmt: skip
def test_a_gold_query_that_fails_is_a_failure_not_a_zero(
    db: Path, gold: str, kind: str, says: str
) -> None:
    score = one(inline(timeout=0.3, max_rows=20), "SELECT 1", {"sql": gold, "db": str(db)})
    assert score.value is None and score.failure is not None
    assert score.failure.type == kind and says in score.failure.message
    assert str(db) in score.failure.message  # names the database


def test_the_gold_result_is_cached_per_database_state(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = build(tmp_path / "c.sqlite")
    ran: list[str] = []
    real = runner.Database.rows

    def counting(db: runner.Database, sql: str, limits: Limits) -> Any:
        ran.append(sql)
        return real(db, sql, limits)

    monkeypatch.setattr(runner.Database, "rows", counting)
    reward = inline()
    ref = {"sql": "SELECT COUNT(*) FROM schools", "db": str(path)}
    group = [make(f"SELECT {n}", ref) for n in (6, 5, 6, 7)]  # a GRPO group, one gold
    assert [s.value for s in referee.score(reward, group)] == [1.0, 0.0, 1.0, 0.0]
    assert ran.count(ref["sql"]) == 1
    conn = sqlite3.connect(path)  # the data changes: the gold runs again
    conn.execute("DELETE FROM schools WHERE id = 6")
    conn.commit()
    conn.close()
    os.utime(path, ns=(time.time_ns(), time.time_ns() + 10**9))
    assert one(reward, "SELECT 5", ref).value == 1.0
    assert ran.count(ref["sql"]) == 2


# --- the policy's query is hostile ------------------------------------------------------------

ATTACKS = [
    # (query, what the reason says)
    ("ATTACH DATABASE 'attached.sqlite' AS x", "ATTACH"),
    ("DETACH DATABASE main", "DETACH"),
    ("PRAGMA writable_schema = 1", "PRAGMA writable_schema"),
    ("PRAGMA journal_mode = DELETE", "PRAGMA journal_mode"),
    ("PRAGMA journal_mode", "PRAGMA journal_mode"),
    ("SELECT * FROM pragma_table_info('schools')", "not allowed"),
    ("INSERT INTO schools VALUES (9, 'x', 'y', 1.0, 1)", "INSERT schools"),
    ("UPDATE schools SET name = 'x'", "UPDATE schools"),
    ("DELETE FROM schools", "DELETE schools"),
    ("DROP TABLE schools", "not allowed"),
    ("CREATE TABLE t (a)", "not allowed"),
    ("CREATE TEMP TABLE t (a)", "not allowed"),
    ("CREATE VIEW v AS SELECT 1", "not allowed"),
    ("ALTER TABLE schools ADD COLUMN x", "not allowed"),
    ("BEGIN", "TRANSACTION"),
    ("SAVEPOINT s", "SAVEPOINT"),
    ("ANALYZE", "not allowed"),
    ("VACUUM", "not allowed"),
    ("VACUUM INTO 'copy.sqlite'", "not allowed"),
    ("SELECT 1; DROP TABLE schools", "one statement only"),
    ("SELECT 1; SELECT 2", "one statement only"),
    ("SELECT load_extension('/tmp/evil.so')", "FUNCTION load_extension"),
    ("SELECT fts3_tokenizer('simple')", "FUNCTION fts3_tokenizer"),  # hands out a pointer
    ("REPLACE INTO schools VALUES (1, 'x', 'y', 1.0, 1)", "INSERT schools"),
]


@pytest.mark.parametrize(("query", "says"), ATTACKS)
def test_a_query_that_would_change_anything_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, query: str, says: str
) -> None:
    monkeypatch.chdir(tmp_path)  # where a relative ATTACH or VACUUM INTO would write
    path = build(tmp_path / "data" / "s.sqlite")
    before = digest(path)
    score = one(inline(), query, {"sql": "SELECT COUNT(*) FROM schools", "db": str(path)})
    assert score.value == 0.0 and score.reason is not None, score
    assert says in score.reason and "refused" in score.reason, score.reason
    assert digest(path) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["data"]  # nothing written beside it
    assert sorted(p.name for p in path.parent.iterdir()) == ["s.sqlite"]


@pytest.mark.parametrize(
    ("query", "says"),
    [
        ("SELECT * FROM no_such_table", "the query failed: no such table: no_such_table"),
        ("SELECT nme FROM schools", "the query failed: no such column: nme"),
        ("SELEC name FROM schools", 'the query failed: near "SELEC": syntax error'),
        ("SELECT randomblob(2000000000)", "string or blob too big (max_value_bytes"),
        ("SELECT zeroblob(2000000000)", "string or blob too big"),
        ("SELECT hex(zeroblob(600000))", "string or blob too big"),  # 1.2 MB of text
        ("WITH RECURSIVE r(x) AS (SELECT 'a' UNION ALL SELECT x || x FROM r) "
         "SELECT length(x) FROM r", "string or blob too big"),
        ("SELECT group_concat(randomblob(1000)) FROM (WITH RECURSIVE r(x) AS (SELECT 1 UNION "
         "ALL SELECT x + 1 FROM r LIMIT 5000) SELECT x FROM r)", "string or blob too big"),
        ("WITH RECURSIVE r(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM r LIMIT 200000) "
         "SELECT x FROM r", "returned more than 100,000 rows (max_rows)"),
        ("WITH RECURSIVE r(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM r LIMIT 100) "
         "SELECT randomblob(1000000) FROM r", "returned more than 64 MiB of rows"),
        ("SELECT 1\x00", "null character"),
        ("SELECT '\udcff'", "surrogates not allowed"),
        ("-- only a comment", "is no query"),
        ("SELECT " + "(" * 5000 + "1" + ")" * 5000, "failed"),  # the parser's depth limit
    ],
)  # fmt: skip
def test_a_query_that_fails_scores_zero_with_the_databases_error(
    db: Path, query: str, says: str
) -> None:
    score = one(inline(), query, {"sql": "SELECT 1", "db": str(db)})
    assert score.value == 0.0 and score.failure is None
    assert score.reason is not None and says in score.reason, score.reason


def test_a_recursive_query_with_no_end_times_out_quickly(db: Path) -> None:
    forever = "WITH RECURSIVE r(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM r) SELECT COUNT(*) "
    forever += "FROM r"
    ordered = "WITH RECURSIVE r(x) AS (SELECT 1 UNION SELECT x + 1 FROM r) SELECT x FROM r "
    ordered += "ORDER BY 1"  # a sort that never gets its last row
    for query in (forever, ordered):
        start = time.monotonic()
        score = one(inline(timeout=0.5), query, {"sql": "SELECT 1", "db": str(db)})
        took = time.monotonic() - start
        assert score.value == 0.0 and score.reason == "the query timed out after 0.5s"
        assert took < 2.0, took


def test_long_and_empty_completions(db: Path) -> None:
    ref = {"sql": "SELECT 1", "db": str(db)}
    long = one(inline(max_query_chars=1000), "SELECT 1 " + "-" * 5000, ref)
    assert long.value == 0.0 and long.reason is not None and "over max_query_chars" in long.reason
    assert one(inline(), "", ref).reason == "no SQL in the completion"
    assert one(inline(), "```sql\n;\n```", ref).reason == "no SQL in the completion"


@pytest.mark.parametrize("label", sorted(HOSTILE))
def test_hostile_completions_never_crash_or_stall(db: Path, label: str) -> None:
    score = score_guarded(inline(), HOSTILE[label], {"sql": "SELECT 1", "db": str(db)})
    assert score.value == 0.0 and score.failure is None, score


# --- where it runs: a worker process, killed at its deadline ----------------------------------


def test_it_runs_in_a_worker_process_by_default() -> None:
    assert SqlMatch.default_run_in == "process"
    assert referee.load({"type": "sql_match"}).runs_in == "process"  # type: ignore[attr-defined]
    assert SqlMatch(timeout=2).deadline_seconds == 9.0  # both queries' timeout, and 5 s


def test_the_process_path_gives_the_inline_path_number(db: Path) -> None:
    ref = {"sql": GOLD_CITY_COUNTS, "db": str(db)}
    queries = [q for q, _ in PAIRS] + [q for q, _ in ATTACKS[:6]] + ["SELECT * FROM nope"]
    rollouts = [make(q, ref) for q in queries] + [make("SELECT 1", None)]
    want = [s.to_dict() for s in referee.score(inline(), rollouts)]
    got = [s.to_dict() for s in referee.score(SqlMatch(), rollouts)]
    assert got == want


# One call of SQLite's printf repeats a character 2e9 times inside one step of its virtual
# machine, where `timeout` is never checked (3.4 s a call, SQLite 3.40); six in one expression
# are one step too, and no interrupt reaches them: only a process's end stops them.
SPIN = "SELECT " + " + ".join(["length(printf('%.*c', 2000000000, 'x'))"] * 6)


@pytest.mark.slow
def test_a_query_that_spins_in_c_is_stopped_at_its_timeout_not_the_deadline(db: Path) -> None:
    reward = referee.load({"type": "sql_match", "timeout": 1})
    assert reward.deadline_seconds == 7.0  # the backstop, where the worker is killed
    ref = {"sql": "SELECT name FROM schools WHERE city = 'Austin'", "db": str(db)}
    right = "SELECT DISTINCT name FROM schools WHERE city = 'Austin'"
    start = time.monotonic()
    [spun] = referee.score(reward, [make(SPIN, ref)])
    took = time.monotonic() - start
    # Its own timeout, as a query the progress handler stops: not the deadline's kill (whose
    # reason is "ran past its limit"), and well before the deadline (1.5 s here, unloaded).
    assert (spun.value, spun.failure, spun.reason) == (0.0, None, "the query timed out after 1s")
    assert took < 5.0, took
    # In a batch: the worker retired after the verdict, the rest is scored in another.
    scores = referee.score(reward, [make(q, ref) for q in (right, SPIN, right, "SELECT 42")])
    assert [s.value for s in scores] == [1.0, 0.0, 1.0, 0.0]
    # The gold query spinning is the reference's fault: a Failure naming it, never a 0.
    [gold] = referee.score(reward, [make("SELECT 1", {"sql": SPIN, "db": str(db)})])
    assert gold.value is None and gold.failure is not None, gold
    assert gold.failure.type == "not_applicable", gold.failure
    assert gold.failure.message == f"the gold query on {str(db)!r} timed out after 1s"


@pytest.mark.slow
def test_past_a_deadline_under_the_timeout_the_gold_query_alone_decides(db: Path) -> None:
    # A deadline below `timeout` kills the worker first: the backstop, and its blame.
    reward = referee.load({"type": "sql_match", "timeout": 1, "deadline": 0.4})
    ref = {"sql": "SELECT name FROM schools WHERE city = 'Austin'", "db": str(db)}
    right = "SELECT DISTINCT name FROM schools WHERE city = 'Austin'"
    spun, paid, wrong = referee.score(reward, [make(q, ref) for q in (SPIN, right, "SELECT 42")])
    # The policy's query past its limit is its verdict (a masked sample would pay it to spin).
    assert spun.failure is None and spun.value == 0.0, spun
    assert spun.reason is not None and spun.reason.startswith("the query ran past its limit")
    assert (paid.value, wrong.value) == (1.0, 0.0)  # the rest of the batch is scored
    [gold] = referee.score(reward, [make("SELECT 1", {"sql": SPIN, "db": str(db)})])
    assert gold.value is None and gold.failure is not None, gold
    assert gold.failure.type == "not_applicable", gold.failure
    assert "the gold query" in gold.failure.message and str(db) in gold.failure.message


@pytest.mark.parametrize("run_in", ["inline", "process"])
def test_who_ran_past_the_deadline_is_decided_by_the_gold_query_alone(
    db: Path, run_in: str
) -> None:
    # What the deadline machinery hands back for a check past it, by either path: a
    # Failure("timeout"), or (where the core already calls it the policy's) a 0 with `fault`.
    reward = SqlMatch(timeout=0.5)
    reward.run_in = run_in  # type: ignore[assignment]
    killed = referee.Score.failed("timeout", "its worker process was killed", "sql_match")
    ok = make("SELECT 1", {"sql": "SELECT name FROM schools", "db": str(db)})
    spun = reward.overran(ok, killed)
    assert spun.failure is None and spun.value == 0.0, spun
    assert spun.reason == "the query ran past its limit (its worker process was killed)"
    forever = (
        "WITH RECURSIVE r(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM r) SELECT COUNT(*) FROM r"
    )
    bad = reward.overran(make("SELECT 1", {"sql": forever, "db": str(db)}), killed)
    assert bad.failure is not None and bad.failure.type == "not_applicable", bad
    assert "the gold query" in bad.failure.message and "timed out after 0.5s" in bad.failure.message
    fine = referee.Score(value=1.0, reason="the same 1 distinct rows")
    assert reward.overran(ok, fine) is fine  # anything else, as it is


def test_memory_is_capped_in_a_worker(db: Path) -> None:
    # 1,000 copies of a 1 MB blob in one row: 28 s and 7 GB inline, measured; a worker caps
    # SQLite's heap (memory_mb) and the query runs out of it instead.
    wide = "WITH b(x) AS (SELECT randomblob(1000000)) SELECT " + ", ".join(["x"] * 1000) + " FROM b"
    score = one(SqlMatch(memory_mb=64), wide, {"sql": "SELECT 1", "db": str(db)})
    assert score.value == 0.0 and score.reason == "the query ran out of memory (memory_mb)"


# --- the rest of the contract -----------------------------------------------------------------


def test_pickles_and_scores_the_same(db: Path) -> None:
    reward = inline(order="respect", rel_tol=1e-6, database_file=str(db))
    clone = pickle.loads(pickle.dumps(reward))
    assert clone == reward
    rollouts = [make("SELECT 3.0000000001", "SELECT 3.0"), make("SELECT 4", "SELECT 3")]
    assert referee.score(clone, rollouts) == referee.score(reward, rollouts)
    assert [s.value for s in referee.score(clone, rollouts)] == [1.0, 0.0]


def test_referee_types_lists_it() -> None:
    listing = CliRunner().invoke(main, ["types"])
    assert listing.exit_code == 0 and "sql_match" in listing.output
    page = CliRunner().invoke(main, ["types", "sql_match"])
    assert page.exit_code == 0 and "database_root" in page.output


@pytest.mark.parametrize(
    ("text", "sql"),
    [
        ("SELECT 1;", "SELECT 1"),
        ("  SELECT 1 ;; \n", "SELECT 1"),
        ("Here:\n```sql\nSELECT a FROM t;\n```\nDone.", "SELECT a FROM t"),
        ("```sql\nSELECT 1\n```\nbetter:\n```sqlite\nSELECT 2\n```", "SELECT 2"),  # the last
        ("```python\nprint(1)\n```\n```\nSELECT 3\n```", "SELECT 3"),  # untagged counts
        ("```python\nprint(1)\n```", "```python\nprint(1)\n```"),  # no SQL block: the text
        ("SELECT 1; -- done", "SELECT 1; -- done"),  # a comment after it is SQLite's
    ],
)
def test_extract_sql(text: str, sql: str) -> None:
    assert extract_sql(text) == sql


@pytest.fixture(autouse=True)
def _no_leaked_connections() -> Iterator[None]:
    yield
    assert runner.open_connections() <= runner.CONNECTIONS
