"""What litellm says of a model (prices, schema support), kept between processes so that a
process judging over referee's own transport does not import litellm."""

from __future__ import annotations

import importlib.metadata
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from referee.judges import via_litellm
from referee.judges.testing import FakeJudgeServer, Reply
from tests.support.extras import JUDGES

pytestmark = JUDGES

PRICED = "openai/gpt-4.1-mini"  # in litellm's bundled cost map
UNPRICED = "openai/a-local-server-model"


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty cache folder, a process that knows nothing yet, and litellm (already imported
    by this test process) taken for not imported, as in a process that has not imported it."""
    monkeypatch.setenv("REFEREE_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("LITELLM_LOCAL_MODEL_COST_MAP", raising=False)
    monkeypatch.setattr(via_litellm, "_known", {})
    via_litellm.import_litellm()  # kept by referee, so asking it does not import it again
    monkeypatch.setattr(via_litellm, "_loaded", lambda: False)
    return tmp_path


def _memo_file(cache: Path) -> Path:
    return cache / "litellm" / f"{importlib.metadata.version('litellm')}.json"


def _memo(cache: Path) -> dict[str, Any]:
    [path] = (cache / "litellm").iterdir()
    assert path == _memo_file(cache)
    loaded: dict[str, Any] = json.loads(path.read_text())
    return loaded


def _refuse_litellm(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse() -> Any:
        raise AssertionError("litellm was asked")

    monkeypatch.setattr(via_litellm, "import_litellm", refuse)


def test_litellm_s_answers_are_kept_then_read_without_it(
    cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    litellm = via_litellm.import_litellm()
    rate_in, rate_out = litellm.cost_per_token(model=PRICED, prompt_tokens=1, completion_tokens=1)
    want = 1000 * rate_in + 100 * rate_out
    assert want > 0
    assert via_litellm.price(PRICED, 1000, 100) == pytest.approx(want, rel=1e-12)
    assert via_litellm.supports_schema(PRICED) is bool(
        litellm.supports_response_schema(model=PRICED)
    )
    assert via_litellm.price(UNPRICED, 1000, 100) == 0.0
    assert set(_memo(cache)) == {PRICED, UNPRICED}
    # A new process (nothing known, litellm not imported) reads them, and never asks litellm.
    monkeypatch.setattr(via_litellm, "_known", {})
    _refuse_litellm(monkeypatch)
    assert via_litellm.price(PRICED, 1000, 100) == pytest.approx(want, rel=1e-12)
    assert via_litellm.price(UNPRICED, 1000, 100) == 0.0
    assert via_litellm.supports_schema(PRICED) is bool(
        litellm.supports_response_schema(model=PRICED)
    )


def test_a_process_that_imported_litellm_asks_it_and_keeps_nothing(
    cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Its litellm may hold prices the process registered: they are its answers, not the
    bundled map's, and go in no file other processes read."""
    monkeypatch.setattr(via_litellm, "_loaded", lambda: True)
    _memo_file(cache).parent.mkdir()
    _memo_file(cache).write_text(json.dumps({PRICED: [1.0, 1.0, False]}))
    assert via_litellm.price(PRICED, 1, 0) < 0.01  # litellm's price, not the file's 1.0
    assert via_litellm.price(UNPRICED, 1, 0) == 0.0
    assert set(_memo(cache)) == {PRICED}


@pytest.mark.parametrize(
    "content",
    ['{"openai/gpt-4.1-mini": ', "[1, 2]", '{"openai/gpt-4.1-mini": [1.0, "x", false]}',
     '{"openai/gpt-4.1-mini": [true, 1.0, false]}', '{"openai/gpt-4.1-mini": [1.0, 1.0]}'],
    ids=["torn", "not an object", "a price not a number", "a bool price", "short"],
)  # fmt: skip
def test_a_bad_answers_file_is_asked_again_and_rewritten(cache: Path, content: str) -> None:
    _memo_file(cache).parent.mkdir()
    _memo_file(cache).write_text(content)
    assert 0 < via_litellm.price(PRICED, 1000, 0) < 0.01
    entry = _memo(cache)[PRICED]
    assert len(entry) == 3 and entry[0] > 0 and isinstance(entry[2], bool)


def test_a_fetched_cost_map_is_not_kept(cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """With LITELLM_LOCAL_MODEL_COST_MAP off, litellm fetches its map (which can change)."""
    monkeypatch.setenv("LITELLM_LOCAL_MODEL_COST_MAP", "False")
    assert via_litellm._memo_file() is None
    monkeypatch.setenv("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    assert via_litellm._memo_file() is not None


def test_without_litellm_nothing_is_priced_or_kept(
    cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def missing() -> Any:
        raise via_litellm.MissingDependency("litellm", "judges", "LLM judges")

    monkeypatch.setattr(via_litellm, "import_litellm", missing)
    assert via_litellm.price(PRICED, 1000, 100) == 0.0
    assert via_litellm.supports_schema(PRICED) is False
    assert not (cache / "litellm").exists()


_JUDGE = """
import json, sys
from pydantic import BaseModel
from referee._aio import run_sync
from referee.judges import JudgeClient

class Grade(BaseModel):
    score: int

client = JudgeClient(model=sys.argv[1], api_base=sys.argv[2], cache=False)
verdict = run_sync(client.judge([{"role": "user", "content": "grade"}], Grade))
print(json.dumps({"score": verdict.value.score, "cost": verdict.cost,
                  "litellm": "litellm" in sys.modules}))
"""


def test_a_judging_process_with_the_answers_kept_does_not_import_litellm(cache: Path) -> None:
    assert via_litellm.price(PRICED, 1, 1) > 0  # kept by this process: litellm asked once
    with FakeJudgeServer(lambda r: Reply('{"score": 4}')) as server:
        run = subprocess.run(
            [sys.executable, "-c", _JUDGE, PRICED, server.url],
            capture_output=True, text=True, timeout=120,
            env={**os.environ, "REFEREE_CACHE_DIR": str(cache)},
        )  # fmt: skip
    assert run.returncode == 0, run.stderr[-2000:]
    out = json.loads(run.stdout)
    assert out["score"] == 4 and out["litellm"] is False
    assert out["cost"] == pytest.approx(via_litellm.price(PRICED, 50, 10), rel=1e-12)
    assert out["cost"] > 0
