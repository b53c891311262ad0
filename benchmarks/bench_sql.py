"""sql_match against running both queries with `sqlite3` directly, same run: pairs/s.

A database of BIRD's size class (three tables, 20,000 schools, 60,000 test scores, 500
districts, indexed as a BIRD database is) and N (predicted, gold) pairs in GRPO groups of 8
attempts at one question (default 4,000 pairs: 500 questions): per group one gold query from
20 shapes (filters, joins, GROUP BY, ORDER BY with LIMIT, subqueries, aggregates), and
attempts that are the gold itself, the gold rewritten (other aliases, row order, a join
written as a subquery), wrong (another filter, other columns, a missing DISTINCT) or broken
(a misspelt column, a syntax error).

- direct: one `sqlite3` connection opened once, for each pair the predicted query then the
  gold one, ``fetchall`` each, ``set(predicted) == set(gold)`` (BIRD's ``execute_sql``; an
  exception is 0). The floor: no guard, no limits, nothing cached.
- bird: the same, connecting for each pair, as BIRD's ``evaluation.py`` does.
- referee inline: ``run_in: inline`` (the caller's thread).
- referee process: the default, the worker pool (`referee.workers`), up to
  ``REFEREE_WORKERS`` processes (default: the CPUs, at most 8) where direct uses one.

Both referee paths run the gold query once per group (it is cached by database state and
query); direct runs it for every pair, as BIRD's harness does. Printed: pairs/s of each, the
ratio of referee's time to direct's, and agreement (pairs where referee's value equals
direct's). Each side is timed best-of-N in wall time after a warm-up, the sides alternating
run by run. No target: reported.

Usage: python benchmarks/bench_sql.py [--pairs 4000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import os
import random
import sqlite3
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import referee  # noqa: E402
from benchmarks.bench_deterministic import best_of_interleaved  # noqa: E402
from referee.workers import pool  # noqa: E402

CITIES = [f"City{i}" for i in range(40)]
COUNTIES = [f"County{i}" for i in range(12)]
GROUP = 8


def build(path: Path, schools: int, seed: int = 0) -> None:
    """districts, schools, 3 test scores a school, with the indexes a BIRD database has."""
    rng = random.Random(seed)
    conn = sqlite3.connect(path)
    conn.executescript(
        """
        CREATE TABLE districts (id INTEGER PRIMARY KEY, name TEXT, county TEXT, budget REAL);
        CREATE TABLE schools (id INTEGER PRIMARY KEY, name TEXT, city TEXT, district_id INTEGER
            REFERENCES districts(id), enrollment INTEGER, charter INTEGER, opened TEXT);
        CREATE TABLE scores (school_id INTEGER REFERENCES schools(id), year INTEGER,
            math REAL, reading REAL, takers INTEGER);
        CREATE INDEX schools_city ON schools(city);
        CREATE INDEX schools_district ON schools(district_id);
        CREATE INDEX scores_school ON scores(school_id);
        """
    )
    conn.executemany(
        "INSERT INTO districts VALUES (?, ?, ?, ?)",
        [(d, f"District {d}", rng.choice(COUNTIES), round(rng.uniform(1e5, 1e7), 2))
         for d in range(1, schools // 40 + 2)],
    )  # fmt: skip
    conn.executemany(
        "INSERT INTO schools VALUES (?, ?, ?, ?, ?, ?, ?)",
        [(s, f"School {s}", rng.choice(CITIES), rng.randint(1, schools // 40 + 1),
          rng.randint(50, 3000),
          rng.randint(0, 1), f"{rng.randint(1950, 2020)}-0{rng.randint(1, 9)}-1{rng.randint(0, 9)}")
         for s in range(1, schools + 1)],
    )  # fmt: skip
    conn.executemany(
        "INSERT INTO scores VALUES (?, ?, ?, ?, ?)",
        [(rng.randint(1, schools), rng.choice([2019, 2020, 2021]), round(rng.uniform(300, 800), 1),
          round(rng.uniform(300, 800), 1), rng.randint(5, 500)) for _ in range(3 * schools)],
    )  # fmt: skip
    conn.commit()
    conn.close()


def questions(rng: random.Random) -> list[tuple[str, list[str]]]:
    """One (gold, attempts) per shape, for a random city, county, year and threshold: the
    first attempt is right (rewritten), the others wrong or broken."""
    city, other = rng.sample(CITIES, 2)
    county = rng.choice(COUNTIES)
    year = rng.choice([2019, 2020, 2021])
    size = rng.choice([500, 1000, 2000])
    top = rng.choice([3, 5, 10])
    big = size * 2
    often = size // 4
    join_d = "FROM schools AS T1 INNER JOIN districts AS T2 ON T1.district_id = T2.id"
    join_s = "FROM schools AS T1 INNER JOIN scores AS T2 ON T1.id = T2.school_id"
    taken = f"WHERE id IN (SELECT school_id FROM scores WHERE year = {year} AND takers > 490)"
    in_scores = "WHERE id IN (SELECT school_id FROM scores"
    # fmt: off
    return [
        (f"SELECT name FROM schools WHERE city = '{city}' AND enrollment > {size}", [
            f"SELECT s.name FROM schools AS s WHERE s.enrollment > {size} AND s.city = '{city}'",
            f"SELECT name FROM schools WHERE city = '{other}' AND enrollment > {size}",
            f"SELECT name, city FROM schools WHERE city = '{city}' AND enrollment > {size}",
            f"SELECT nme FROM schools WHERE city = '{city}'",
        ]),
        (f"SELECT COUNT(*) FROM schools WHERE city = '{city}' AND charter = 1", [
            f"SELECT COUNT(id) FROM schools WHERE charter = 1 AND city = '{city}'",
            f"SELECT COUNT(*) FROM schools WHERE city = '{city}'",
            f"SELECT SUM(charter) FROM schools WHERE city = '{city}'",
            f"SELEC COUNT(*) FROM schools WHERE city = '{city}'",
        ]),
        (f"SELECT T1.name {join_d} WHERE T2.county = '{county}' AND T1.enrollment > {big}", [
            f"SELECT name FROM schools WHERE enrollment > {big} AND district_id IN "
            f"(SELECT id FROM districts WHERE county = '{county}')",
            f"SELECT T1.name {join_d} WHERE T2.county = '{county}'",
            f"SELECT T2.name {join_d} WHERE T2.county = '{county}' AND T1.enrollment > {big}",
            f"SELECT T1.name {join_d.replace('T2.id', 'T2.idd')} WHERE T2.county = '{county}'",
        ]),
        (f"SELECT city, AVG(enrollment) FROM schools GROUP BY city HAVING COUNT(*) > {often}", [
            f"SELECT city, AVG(enrollment) AS a FROM schools GROUP BY city "
            f"HAVING COUNT(id) > {often} ORDER BY a DESC",
            "SELECT city, AVG(enrollment) FROM schools GROUP BY city",
            f"SELECT city, SUM(enrollment) / COUNT(*) FROM schools GROUP BY city "
            f"HAVING COUNT(*) > {often}",
            "SELECT city, AVG(enrollment) FROM schools GROUP BY cty",
        ]),
        (f"SELECT T1.name {join_s} WHERE T2.year = {year} ORDER BY T2.math DESC LIMIT {top}", [
            f"SELECT s.name FROM scores AS t JOIN schools AS s ON s.id = t.school_id "
            f"WHERE t.year = {year} ORDER BY t.math DESC LIMIT {top}",
            f"SELECT T1.name {join_s} WHERE T2.year = {year} ORDER BY T2.reading DESC LIMIT {top}",
            f"SELECT T1.name {join_s} ORDER BY T2.math DESC LIMIT {top}",
            f"SELECT T1.name {join_s} WHERE year = {year} ORDER BY math DESC LIMIT",
        ]),
        (f"SELECT DISTINCT T2.county {join_d} WHERE T1.city = '{city}'", [
            f"SELECT T2.county {join_d} WHERE T1.city = '{city}'",  # duplicates: a set, as BIRD
            f"SELECT DISTINCT county FROM districts WHERE id IN "
            f"(SELECT district_id FROM schools WHERE city = '{city}')",
            f"SELECT DISTINCT T2.name {join_d} WHERE T1.city = '{city}'",
            f"SELECT DISTINCT county FROM schools WHERE city = '{city}'",
        ]),
        (f"SELECT CAST(SUM(CASE WHEN charter = 1 THEN 1 ELSE 0 END) AS REAL) * 100 / COUNT(*) "
         f"FROM schools WHERE city = '{city}'", [
            f"SELECT 100.0 * SUM(charter) / COUNT(*) FROM schools WHERE city = '{city}'",
            f"SELECT SUM(charter) * 100 / COUNT(*) FROM schools WHERE city = '{city}'",
            f"SELECT AVG(charter) FROM schools WHERE city = '{city}'",
            "SELECT CAST(SUM(charter) AS REAL) * 100 / COUNT(*) FROM schools WHERE city = AND",
        ]),
        (f"SELECT name, enrollment FROM schools {taken}", [
            f"SELECT DISTINCT T1.name, T1.enrollment {join_s} "
            f"WHERE T2.year = {year} AND T2.takers > 490",
            f"SELECT enrollment, name FROM schools {taken}",
            f"SELECT name, enrollment FROM schools {in_scores} WHERE takers > 490)",
            f"SELECT name, enrollment FROM school {in_scores} WHERE year = {year})",
        ]),
    ]
    # fmt: on


def pairs(n: int, group: int, seed: int = 1) -> list[tuple[str, str]]:
    """Groups of `group` attempts at one question: the gold twice, the three other attempts
    of its shape, and three of them again. With groups of 1, every gold query is its own
    (a comment numbers it), so no gold result is ever reused."""
    rng = random.Random(seed)
    out: list[tuple[str, str]] = []
    while len(out) < n:
        gold, attempts = rng.choice(questions(rng))
        attempts = [gold, attempts[0], gold, *attempts[1:], attempts[0], rng.choice(attempts[1:])]
        if group == 1:
            out.append((rng.choice(attempts), f"{gold} -- question {len(out)}"))
        else:
            out.extend((attempt, gold) for attempt in attempts[:group])
    return out[:n]


def direct(path: str, work: list[tuple[str, str]]) -> list[float]:
    """Both queries on one connection opened once; BIRD's comparison."""
    conn = sqlite3.connect(path)
    values = []
    for predicted, gold in work:
        try:
            a = conn.execute(predicted).fetchall()
            b = conn.execute(gold).fetchall()
            values.append(1.0 if set(a) == set(b) else 0.0)
        except sqlite3.Error:
            values.append(0.0)
    conn.close()
    return values


def bird(path: str, work: list[tuple[str, str]]) -> list[float]:
    """BIRD's evaluation.py: a connection per pair."""
    values = []
    for predicted, gold in work:
        conn = sqlite3.connect(path)
        try:
            cursor = conn.cursor()
            cursor.execute(predicted)
            a = cursor.fetchall()
            cursor.execute(gold)
            b = cursor.fetchall()
            values.append(1.0 if set(a) == set(b) else 0.0)
        except sqlite3.Error:
            values.append(0.0)
        finally:
            conn.close()
    return values


def compare(title: str, path: str, work: list[tuple[str, str]], group: int, repeat: int) -> None:
    """Print each side's pairs/s on `work` and its ratio to direct's time; check agreement."""
    rollouts = [
        referee.Rollout(id=str(i), completion=f"```sql\n{p}\n```",
                        reference={"sql": g, "db": path}, group=str(i // group))
        for i, (p, g) in enumerate(work)
    ]  # fmt: skip

    def fresh(run_in: str) -> Callable[[], list[referee.Score]]:
        # A new reward each run: its gold cache starts empty, as a new step's would.
        return lambda: referee.score(
            referee.load({"type": "sql_match", "run_in": run_in}), rollouts
        )

    direct(path, work[:200])  # warm-up: the page cache, the workers, imports
    fresh("inline")()
    fresh("process")()
    (t_direct, want), (t_inline, got_inline) = best_of_interleaved(
        lambda: direct(path, work), fresh("inline"), repeat
    )
    (t_bird, want_bird), (t_process, got_process) = best_of_interleaved(
        lambda: bird(path, work), fresh("process"), repeat
    )
    n = len(work)
    print(f"{title}: {n:,} (predicted, gold) pairs, groups of {group}")
    sides = [("direct (one connection)", t_direct), ("bird (a connection a pair)", t_bird),
             ("referee inline", t_inline), ("referee process", t_process)]  # fmt: skip
    for label, seconds in sides:
        print(f"  {label:<27} {seconds:7.3f}s {n / seconds:9,.0f} pairs/s  "
              f"{seconds / t_direct:5.2f}x direct's time")  # fmt: skip
    for label, scores in [("inline", got_inline), ("process", got_process)]:
        same = sum(1 for s, w in zip(scores, want, strict=True) if s.value == w)
        print(f"  agreement, referee {label} with direct: {same:,}/{n:,}")
    assert want == want_bird
    print(f"  paid: {sum(want):,.0f}/{n:,} pairs")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--pairs", type=int, default=2000, help="on the BIRD-sized database")
    parser.add_argument("--small-pairs", type=int, default=8000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()

    print(f"sql_match, SQLite {sqlite3.sqlite_version}, {os.cpu_count()} CPUs; referee process: "
          f"{pool().size} workers; direct and bird: one thread")  # fmt: skip
    with tempfile.TemporaryDirectory() as tmp:
        big, small = str(Path(tmp) / "big.sqlite"), str(Path(tmp) / "small.sqlite")
        build(Path(big), 20_000)
        build(Path(small), 200)
        compare("BIRD-sized database (20,000 schools, 60,000 scores)", big,
                pairs(args.pairs, GROUP), GROUP, args.repeat)  # fmt: skip
        compare("small database (200 schools): referee's own cost shows", small,
                pairs(args.small_pairs, GROUP), GROUP, args.repeat)  # fmt: skip
        compare("small database, no gold shared (each pair its own question)", small,
                pairs(args.small_pairs, 1), 1, args.repeat)  # fmt: skip


if __name__ == "__main__":
    main()
