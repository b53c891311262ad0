"""The verdict cache: SQLite shared by processes, with a memory front in each."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from referee._aio import run_sync
from referee.judges import JudgeClient, VerdictCache, cache, shared_cache
from referee.judges.testing import FakeJudgeServer, Reply


def write_from_another_process(path: Path, key: str, raw: str) -> None:
    code = "import sys\nfrom referee.judges import VerdictCache\n"
    code += "VerdictCache(sys.argv[1]).put(sys.argv[2], {'raw': sys.argv[3]})\n"
    subprocess.run([sys.executable, "-c", code, str(path), key, raw], check=True, timeout=60)


def test_a_miss_is_not_remembered_so_another_process_write_is_seen(tmp_path: Path) -> None:
    mine = VerdictCache(tmp_path / "c.sqlite")
    assert mine.get("k") is None
    write_from_another_process(tmp_path / "c.sqlite", "k", "theirs")
    assert mine.get("k") == {"raw": "theirs"}


def test_hits_are_served_from_memory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    mine = VerdictCache(tmp_path / "c.sqlite")
    mine.put("written", {"raw": "1"})
    write_from_another_process(tmp_path / "c.sqlite", "read", "2")
    assert mine.get("read") == {"raw": "2"}  # read once from the file

    def broken() -> sqlite3.Connection:
        raise AssertionError("the file was read again")

    monkeypatch.setattr(mine, "_conn", broken)
    assert mine.get("written") == {"raw": "1"} and mine.get("read") == {"raw": "2"}


def test_the_front_is_bounded_and_the_file_keeps_everything(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(cache, "FRONT_SIZE", 3)
    mine = VerdictCache(tmp_path / "c.sqlite")
    for i in range(10):
        mine.put(f"k{i}", {"raw": str(i)})
    assert len(mine._front) <= 3 and "k9" in mine._front and "k0" not in mine._front
    assert len(mine) == 10 and mine.get("k0") == {"raw": "0"}


def test_one_cache_object_per_file(tmp_path: Path) -> None:
    path = tmp_path / "c.sqlite"
    assert shared_cache(str(path)) is shared_cache(path) is shared_cache(str(path))
    assert shared_cache(tmp_path / "other.sqlite") is not shared_cache(path)


class Grade(BaseModel):
    score: int


def test_a_chatty_cached_verdict_is_read_as_when_it_was_stored(tmp_path: Path) -> None:
    # Stored verdicts are plain JSON (read by pydantic's parser) or, as here, text around it
    # (read by the tolerant parser that accepted it first).
    with FakeJudgeServer(lambda r: Reply('Here: {"score": 3} as asked.')) as server:
        judge = JudgeClient(model="openai/gpt-4.1-mini", api_base=server.url,
                            structured="prompt", cache_path=str(tmp_path / "c.sqlite"))  # fmt: skip
        messages = [{"role": "user", "content": "grade"}]
        first = run_sync(judge.judge(messages, Grade))
        again = run_sync(judge.judge(messages, Grade))
        assert len(server.requests) == 1
    assert again.cached and again.value == first.value == Grade(score=3)


CALL: tuple[str, list[dict[str, Any]], dict[str, Any], str] = (
    "openai/gpt-4.1-mini",
    [{"role": "system", "content": "Grade: «ça va» \u2028 \x00\x1f \"q\" \\ 名前"},
     {"content": [{"type": "text", "text": "x"}], "role": "user", "name": "n"}],
    {"temperature": 0.7, "max_tokens": 1024, "seed": None, "top_p": 1.0},
    "v1|Grade",
)  # fmt: skip


def test_the_key_is_pinned_so_a_changed_encoding_cannot_orphan_every_cache() -> None:
    # A different key for the same call silently re-buys every verdict a user has paid for.
    assert cache.cache_key(*CALL) == (
        "4831781d5b7c7c58c9ec94735e22b36fde8e83bacf5da9ccadf7259066ce0891"
    )
    # the key referee wrote before 0.2 (json.dumps with spaces), computed by that version
    assert cache.legacy_cache_key(*CALL) == (
        "d08e1a73931013fee42099c1159e8b4a65297665376ea9bbfc65e2d3bc5fd640"
    )


def test_the_key_is_the_same_with_and_without_orjson() -> None:
    assert cache._canonical(CALL[1]) == cache._compact_json(CALL[1])
    whole = {"model": CALL[0], "messages": CALL[1], "params": CALL[2], "version": CALL[3]}
    assert cache._canonical(whole) == cache._compact_json(whole)


def test_the_key_does_not_depend_on_key_order() -> None:
    model, messages, params, version = CALL
    reordered = [{k: m[k] for k in reversed(m)} for m in messages]
    assert cache.cache_key(model, reordered, dict(reversed(params.items())), version) == (
        cache.cache_key(*CALL)
    )


def test_values_orjson_refuses_still_have_a_key() -> None:
    model, _, params, version = CALL
    odd = [{"role": "user", "content": "lone \ud800", "n": 2**70}]
    assert cache.cache_key(model, odd, params, version) != cache.cache_key(*CALL)
    assert cache.cache_key(model, odd, params, version) == cache.cache_key(
        model, odd, params, version
    )


def test_a_cache_filled_under_the_old_key_is_still_read_and_moved(tmp_path: Path) -> None:
    path, messages = tmp_path / "c.sqlite", [{"role": "user", "content": "grade this"}]
    with FakeJudgeServer(lambda r: Reply('{"score": 1}')) as server:
        judge = JudgeClient(model="openai/gpt-4.1-mini", api_base=server.url,
                            structured="prompt", cache_path=str(path))  # fmt: skip
        call = (judge.model, messages, judge._params(None, None), "v1|Grade")
        write_from_another_process(path, cache.legacy_cache_key(*call), '{"score": 4}')
        verdict = run_sync(judge.judge(messages, Grade, version="v1"))
        assert not server.requests
    assert verdict.cached and verdict.value == Grade(score=4)
    assert VerdictCache(path).get(cache.cache_key(*call)) == {"raw": '{"score": 4}'}


def test_a_damaged_entry_is_a_miss_not_a_crash(tmp_path: Path) -> None:
    path = tmp_path / "c.sqlite"
    VerdictCache(path).put("k", {"raw": "1"})
    with sqlite3.connect(path) as conn:  # a half-written value, as a full disk leaves
        conn.execute("UPDATE verdicts SET value = ? WHERE key = ?", ('{"raw": "1', "k"))
    assert VerdictCache(path).get("k") is None
