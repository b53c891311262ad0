"""The verdict cache in Redis: one cache for every process and node, against a real redis-server.

Each test gets a database of its own on one redis-server started here on loopback (no
persistence, in a temporary directory, killed by its PID at the end). Without the
``redis-server`` binary (Debian: ``apt-get install redis-server``) these tests skip.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import logging
import multiprocessing
import os
import pickle
import signal
import socket
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

import referee
from referee._aio import run_sync
from referee.errors import SpecError
from referee.judges import JudgeClient, VerdictCache, cache_key, shared_cache
from referee.judges.redis_cache import NAMESPACE, RedisVerdictCache
from referee.judges.testing import FakeJudgeServer, Reply, redis_server

redis = pytest.importorskip("redis", reason="the redis client is not installed: pip install redis")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_redis(directory: Path) -> tuple[subprocess.Popen[bytes], int]:
    """A redis-server on a free loopback port, keeping nothing on disk; ready when returned."""
    started = redis_server(str(directory), "--databases", "64")
    if started is None:
        pytest.skip("redis-server is not installed (Debian: apt-get install redis-server)")
    return started


def stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        os.kill(proc.pid, signal.SIGKILL)
    proc.wait(10)


@pytest.fixture(scope="module")
def redis_port(tmp_path_factory: pytest.TempPathFactory) -> Iterator[int]:
    proc, port = start_redis(tmp_path_factory.mktemp("redis"))
    yield port
    stop(proc)


_databases = itertools.count(1)


@pytest.fixture
def url(redis_port: int) -> str:
    """A database of this test's own: `shared_cache` keeps one object (and its memory front)
    per URL for the whole process, so tests must not share one."""
    return f"redis://127.0.0.1:{redis_port}/{next(_databases)}"


def raw(url: str) -> Any:
    """A plain redis client on `url`'s database (what another writer would do)."""
    return redis.Redis.from_url(url)


class Grade(BaseModel):
    score: int


MESSAGES = [{"role": "user", "content": "grade this"}]


def client(server: FakeJudgeServer, cache: bool | str, **options: Any) -> JudgeClient:
    return JudgeClient(model="openai/judge", api_base=server.url, structured="prompt",
                       cache=cache, **options)  # fmt: skip


def key_of(judge: JudgeClient, messages: list[dict[str, Any]] = MESSAGES) -> str:
    return cache_key(judge.model, messages, judge._params(None, None), "|Grade")


# --- one cache for every process ---------------------------------------------------------------

JUDGE_IN_A_PROCESS = """
import pickle, sys
from pydantic import BaseModel
from referee._aio import run_sync

class Grade(BaseModel):
    score: int

judge = pickle.loads(bytes.fromhex(sys.argv[1]))
verdict = run_sync(judge.judge([{"role": "user", "content": "grade this"}], Grade))
print(verdict.cached, verdict.value.score)
"""


def judge_in_another_process(judge: JudgeClient) -> str:
    done = subprocess.run(
        [sys.executable, "-c", JUDGE_IN_A_PROCESS, pickle.dumps(judge).hex()],
        capture_output=True, text=True, timeout=120, check=True,
    )  # fmt: skip
    return done.stdout.strip()


def test_two_processes_share_verdicts_through_redis(url: str) -> None:
    with FakeJudgeServer(lambda r: Reply('{"score": 4}')) as server:
        judge = client(server, url)
        assert judge_in_another_process(judge) == "False 4"  # bought
        assert raw(url).exists(NAMESPACE + key_of(judge))  # where the second found it
        assert judge_in_another_process(judge) == "True 4"  # read from Redis, not bought
        assert len(server.requests) == 1


def test_the_keys_and_entries_are_the_sqlite_cache_s(url: str, tmp_path: Path) -> None:
    path = tmp_path / "c.sqlite"
    with FakeJudgeServer(lambda r: Reply('{"score": 2}')) as server:
        run_sync(client(server, True, cache_path=str(path)).judge(MESSAGES, Grade))
        judge = client(server, url)
        key = key_of(judge)
        with sqlite3.connect(path) as conn:  # the key judge() computes is the SQLite row's
            (row,) = conn.execute("SELECT value FROM verdicts WHERE key = ?", (key,)).fetchone()
        assert json.loads(row)["raw"] == '{"score": 2}'
        # the SQLite row, copied as it is under the same key, is a hit in Redis
        raw(url).set(NAMESPACE + key, row)
        verdict = run_sync(judge.judge(MESSAGES, Grade))
        assert verdict.cached and verdict.value == Grade(score=2)
        assert len(server.requests) == 1
    # and what the Redis cache writes is read back by the SQLite one
    other = [{"role": "user", "content": "another"}]
    with FakeJudgeServer(lambda r: Reply('{"score": 3}')) as server:
        run_sync(client(server, url).judge(other, Grade))
    stored = raw(url).get(NAMESPACE + key_of(judge, other))
    sqlite = VerdictCache(tmp_path / "d.sqlite")
    sqlite.put(key_of(judge, other), json.loads(stored))
    assert sqlite.get(key_of(judge, other)) == json.loads(stored)


def test_keys_live_under_the_namespace_and_len_counts_only_them(url: str) -> None:
    store = RedisVerdictCache(url)
    store.put("k1", {"raw": "1"})
    store.put("k2", {"raw": "2"})
    raw(url).set("someone-else:key", "x")
    assert sorted(raw(url).keys(NAMESPACE + "*")) == [
        f"{NAMESPACE}k1".encode(),
        f"{NAMESPACE}k2".encode(),
    ]
    assert len(store) == 2
    assert RedisVerdictCache(url).get("k2") == {"raw": "2"}  # a fresh front: from Redis


def test_one_cache_object_per_url(url: str, redis_port: int) -> None:
    assert shared_cache(url) is shared_cache(url)
    assert isinstance(shared_cache(url), RedisVerdictCache)
    assert shared_cache(url) is not shared_cache(f"redis://127.0.0.1:{redis_port}/63")


def test_ttl_in_the_url_lets_entries_expire(url: str) -> None:
    store = RedisVerdictCache(url + "?ttl=100")
    store.put("k", {"raw": "1"})
    assert 0 < raw(url).ttl(NAMESPACE + "k") <= 100
    RedisVerdictCache(url).put("forever", {"raw": "1"})
    assert raw(url).ttl(NAMESPACE + "forever") == -1  # the control: no ttl, no expiry


def test_concurrent_lookups_of_one_loop_turn_share_one_round_trip(url: str) -> None:
    writer = RedisVerdictCache(url)
    for i in range(300):
        writer.put(f"k{i}", {"raw": str(i)})
    raw(url).config_resetstat()
    reader = RedisVerdictCache(url)  # an empty front: every lookup goes to Redis

    async def lookups() -> list[dict[str, Any] | None]:
        return await asyncio.gather(*(reader.aget(f"k{i}") for i in range(300)))

    assert run_sync(lookups()) == [{"raw": str(i)} for i in range(300)]
    assert raw(url).info("commandstats")["cmdstat_mget"]["calls"] == 1


# --- pickling and forking --------------------------------------------------------------------


def test_a_pickled_client_holds_only_the_url(url: str) -> None:
    judge = JudgeClient(model="openai/judge", cache=url)
    run_sync(shared_cache(url).aput("k", {"raw": "1"}))  # the connection is open here
    again = pickle.loads(pickle.dumps(judge))
    assert again == judge and again.cache == url
    assert b"Redis" not in pickle.dumps(judge)


def _read_in_child(url: str, queue: Any) -> None:
    queue.put(shared_cache(url).get("from-parent-read-in-child"))


def test_a_forked_child_opens_its_own_connection(url: str) -> None:
    parent = shared_cache(url)
    parent.put("warm", {"raw": "0"})  # a pooled connection now exists in the parent
    raw(url).set(NAMESPACE + "from-parent-read-in-child", '{"raw": "7"}')
    context = multiprocessing.get_context("fork")
    queue = context.Queue()
    child = context.Process(target=_read_in_child, args=(url, queue))
    child.start()
    assert queue.get(timeout=60) == {"raw": "7"}
    child.join(60)
    assert child.exitcode == 0
    assert parent.get("warm") == {"raw": "0"}  # the parent's connection still works
    assert parent._client.ping()


# --- options -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("given", "cached_in"),
    [
        (True, VerdictCache),  # the SQLite default, as before
        ("yes", VerdictCache),  # a spec's boolean string is still a boolean
        ("redis://127.0.0.1:6379/0", RedisVerdictCache),
        ("rediss://user:pw@cache.example:6380/2", RedisVerdictCache),
        ("unix:///run/redis/redis.sock?db=3", RedisVerdictCache),
    ],
)
def test_cache_takes_a_boolean_or_a_redis_url(given: Any, cached_in: type) -> None:
    reward = referee.load({"type": "rubric_judge", "rubric": "helpfulness",
                           "model": "openai/judge", "cache": given})  # fmt: skip
    judge = reward.client  # type: ignore[attr-defined]
    assert isinstance(judge._store(), cached_in)  # opens no file and no connection yet


@pytest.mark.parametrize(
    ("given", "says"),
    [
        ("http://10.0.0.5:6379/0", "redis"),  # not a cache scheme: never silently no cache
        ("memcached://10.0.0.5", "redis"),
        ("redis://10.0.0.5:port/0", "not a URL"),
        ("redis://10.0.0.5:6379/zero", "database"),
        ("redis://10.0.0.5:6379/0?ttl=-5", "ttl"),
        ("redis://10.0.0.5:6379/0?ttl=soon", "ttl"),
        ("redis://10.0.0.5:6379/0?socket_timeout=soon", "socket_timeout"),  # redis-py's own
        ("redis://10.0.0.5:6379/0?colour=red", "colour"),  # no such option
    ],
)
def test_a_cache_that_is_not_a_redis_url_is_refused_at_load(given: str, says: str) -> None:
    spec = {"type": "rubric_judge", "rubric": "helpfulness", "model": "openai/judge",
            "cache": given}  # fmt: skip
    with pytest.raises(SpecError, match="cache") as caught:
        referee.load(spec)
    assert says in str(caught.value)
    with pytest.raises(ValueError, match=says):
        JudgeClient(model="openai/judge", cache=given)


def test_cache_path_with_a_redis_url_is_refused() -> None:
    with pytest.raises(ValueError, match="cache_path"):
        JudgeClient(model="openai/judge", cache="redis://127.0.0.1/0", cache_path="/tmp/c.db")


def test_a_password_never_reaches_an_error_or_a_log(caplog: pytest.LogCaptureFixture) -> None:
    with pytest.raises(ValueError, match="database") as caught:
        JudgeClient(model="openai/judge", cache="redis://:s3cret@10.0.0.5:6379/zero")
    assert "s3cret" not in str(caught.value)
    with caplog.at_level(logging.WARNING, logger="referee.judges"):
        RedisVerdictCache(f"redis://:s3cret@127.0.0.1:{free_port()}/0").get("k")
    assert caplog.records and "s3cret" not in caplog.text


# --- failures cost model calls, never verdicts ----------------------------------------------------


def test_an_unreachable_redis_is_a_miss_with_one_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    closed = f"redis://127.0.0.1:{free_port()}/0"  # nothing listens there
    with FakeJudgeServer(lambda r: Reply('{"score": 5}')) as server:
        judge = client(server, closed)
        with caplog.at_level(logging.WARNING, logger="referee.judges"):
            for i in range(3):
                verdict = run_sync(judge.judge([{"role": "user", "content": f"{i}"}], Grade))
                assert verdict.value == Grade(score=5) and not verdict.cached
        assert len(server.requests) == 3
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "failed" in warnings[0].getMessage()


def test_a_server_killed_mid_run_costs_calls_not_scores(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    proc, port = start_redis(tmp_path)
    url = f"redis://127.0.0.1:{port}/0"
    try:
        with FakeJudgeServer(lambda r: Reply('{"score": 1}')) as server:
            judge = client(server, url)
            first = run_sync(judge.judge(MESSAGES, Grade))
            assert raw(url).exists(NAMESPACE + key_of(judge))  # stored while it was up
            stop(proc)
            with caplog.at_level(logging.WARNING, logger="referee.judges"):
                others = [
                    run_sync(judge.judge([{"role": "user", "content": f"{i}"}], Grade))
                    for i in range(3)
                ]
                again = run_sync(judge.judge(MESSAGES, Grade))  # this process remembers it
            assert len(server.requests) == 4
    finally:
        stop(proc)
    assert not first.cached and again.cached and again.value == Grade(score=1)
    assert all(v.value == Grade(score=1) and not v.cached for v in others)
    assert len([r for r in caplog.records if r.levelno == logging.WARNING]) == 1


def test_a_server_that_stops_answering_cannot_hang_scoring(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    proc, port = start_redis(tmp_path)
    url = f"redis://127.0.0.1:{port}/0"
    try:
        with FakeJudgeServer(lambda r: Reply('{"score": 2}')) as server:
            judge = client(server, url)
            run_sync(judge.judge([{"role": "user", "content": "warm"}], Grade))  # connected
            os.kill(proc.pid, signal.SIGSTOP)  # it holds its connections and answers nothing
            with caplog.at_level(logging.WARNING, logger="referee.judges"):
                verdicts = [
                    run_sync(judge.judge([{"role": "user", "content": f"{i}"}], Grade))
                    for i in range(3)
                ]
            assert len(server.requests) == 4
    finally:
        os.kill(proc.pid, signal.SIGCONT)
        stop(proc)
    assert all(v.value == Grade(score=2) and not v.cached for v in verdicts)
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "Timeout" in warnings[0].getMessage()


@pytest.mark.parametrize(
    "stored",
    [
        b"\xff\xfe not UTF-8",
        b'{"raw": "{\\"score\\": 1',  # cut short
        b"[1, 2]",  # JSON, not an entry
        b'{"cost": 0}',  # no reply
        b'{"raw": 5}',  # a reply that is not text
        b'{"raw": "{\\"score\\": \\"high\\"}"}',  # a reply the schema rejects
        b'{"raw": "{\\"score\\": 1}", "candidates": {"/score": [["1"]]}}',  # a bad candidate
        b'{"raw": "{\\"score\\": 1}", "candidates": {"/score": [["1", "x"]]}}',
        b'{"raw": "{\\"score\\": 1}", "candidates": [1]}',
    ],
)
def test_a_malformed_entry_is_a_miss_not_a_failure(url: str, stored: bytes) -> None:
    with FakeJudgeServer(lambda r: Reply('{"score": 3}')) as server:
        judge = client(server, url)
        raw(url).set(NAMESPACE + key_of(judge), stored)
        verdict = run_sync(judge.judge(MESSAGES, Grade))
        assert len(server.requests) == 1
    assert verdict.value == Grade(score=3) and not verdict.cached
    # and the judge's verdict replaced it
    assert json.loads(raw(url).get(NAMESPACE + key_of(judge)))["raw"] == '{"score": 3}'


def test_a_well_formed_entry_is_a_hit(url: str) -> None:
    # the control for the table above: the same key, a good entry, no call
    with FakeJudgeServer(lambda r: Reply('{"score": 3}')) as server:
        judge = client(server, url)
        entry = b'{"raw": "{\\"score\\": 1}", "candidates": {"/score": [["1", -0.1]]}}'
        raw(url).set(NAMESPACE + key_of(judge), entry)
        verdict = run_sync(judge.judge(MESSAGES, Grade))
        assert not server.requests
    assert verdict.cached and verdict.value == Grade(score=1)
    assert verdict.candidates == {"/score": (("1", -0.1),)}
