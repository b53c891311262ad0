"""Real models behind a real OpenAI-compatible server: SmolLM2-135M-Instruct and Gemma 3 270M
(their GGUFs ship in PyPI packages) served by llama.cpp's own ``llama-server``, which referee
starts for a ``local/<name>`` judge (`referee.judges.local`).

Every part of the judge path meets real tokens here: grammar-constrained verdicts, the cache,
logprob scores, retries that run out, a panel of the two models, a pairwise tournament, and an
audit. A 135M model grades poorly: what is checked is that each verdict arrives, fits its
schema and is read, not what it says. Skipped, saying how to install them, where the server
wheel or a model's package is missing (`make install` brings both).
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Literal

import pytest
from pydantic import BaseModel

import referee
from referee import Rollout
from referee._aio import run_sync
from referee.errors import JudgeError, MissingDependency
from referee.judges import JudgeClient
from referee.judges.local import (
    LOCAL_MODELS,
    LocalServer,
    UnsupportedCPU,
    local_server,
    server_commands,
)

pytestmark = pytest.mark.local_model


def _need(name: str) -> None:
    try:
        server_commands()
    except MissingDependency as exc:
        pytest.skip(str(exc))
    model = LOCAL_MODELS[name]
    if importlib.util.find_spec(model.package) is None:
        pytest.skip(f"the local model {name} is not installed: {model.install}")
    try:
        run_sync(local_server(f"local/{name}"))  # started once per process, then shared
    except UnsupportedCPU as exc:
        pytest.skip(str(exc))


@pytest.fixture(autouse=True)
def _cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REFEREE_CACHE_DIR", str(tmp_path))


class Grade(BaseModel):
    score: Literal[1, 2, 3, 4, 5]  # an enum: llama.cpp's grammar keeps numbers to it
    reasoning: str


QUESTION = "What is the capital of France?"
RIGHT = Rollout(prompt=QUESTION, completion="The capital of France is Paris.", reference="Paris")
WRONG = Rollout(prompt=QUESTION, completion="The capital of France is Lyon.", reference="Paris")


def test_a_verdict_arrives_fits_the_schema_and_is_cached() -> None:
    _need("smollm2")
    client = JudgeClient(model="local/smollm2", timeout=120, retries=1)
    messages = [{"role": "user", "content": "Rate from 1 to 5 how correct this is: 2 + 2 = 4."}]
    verdict = run_sync(client.judge(messages, Grade))
    assert 1 <= verdict.value.score <= 5  # llama.cpp's grammar kept it in the schema
    assert verdict.prompt_tokens > 0 and verdict.completion_tokens > 0 and verdict.cost == 0
    again = run_sync(client.judge(messages, Grade))
    assert again.cached and again.value == verdict.value


def test_rubric_judge_end_to_end_on_both_models() -> None:
    for name in LOCAL_MODELS:
        _need(name)
        spec = {"type": "rubric_judge", "rubric": "helpfulness", "model": f"local/{name}",
                "timeout": 120, "cache": False}  # fmt: skip
        judge = referee.load(spec)
        [score] = referee.score(judge, [RIGHT])
        assert score.failure is None, (name, score.failure)
        assert score.value is not None and 0.0 <= score.value <= 1.0
        assert set(score.components) == {"addresses_request", "completeness", "actionable",
                                         "concise"}  # fmt: skip


def test_logprob_scores_come_from_the_servers_candidates() -> None:
    _need("smollm2")
    judge = referee.load({"type": "reference_judge", "model": "local/smollm2",
                          "score_from": "logprobs", "top_logprobs": 5, "cache": False})  # fmt: skip
    scores = referee.score(judge, [RIGHT, WRONG])
    for s in scores:
        assert s.failure is None and s.value is not None and 0.0 <= s.value <= 1.0, s
        assert "no usable logprobs" not in (s.reason or ""), s.reason  # expected, not sampled
    assert any(0.0 < s.value < 1.0 for s in scores if s.value is not None)  # a probability


def test_retries_that_run_out_are_a_timeout_failure() -> None:
    _need("smollm2")
    judge = referee.load({"type": "reference_judge", "model": "local/smollm2", "cache": False,
                          "timeout": 0.001, "retries": 1, "backoff": 0.01})  # fmt: skip
    [s] = referee.score(judge, [RIGHT])
    assert s.value is None and s.failure is not None and s.failure.type == "timeout"
    assert "timed out 2 times" in s.failure.message


def test_a_panel_of_the_two_models() -> None:
    _need("smollm2")
    _need("gemma3-270m")
    judge = referee.load({"type": "reference_judge", "models": ["local/smollm2",
                          "local/gemma3-270m"], "vote": "mean", "cache": False})  # fmt: skip
    [s] = referee.score(judge, [RIGHT])
    assert s.failure is None and s.value in (0.0, 0.5, 1.0), s


def test_a_pairwise_tournament_on_real_tokens() -> None:
    _need("smollm2")
    judge = referee.load({"type": "pairwise_tournament", "model": "local/smollm2",
                          "aggregate": "win_rate", "cache": False})  # fmt: skip
    group = [r.model_copy(update={"group": "g", "id": f"a{i}"})
             for i, r in enumerate([RIGHT, WRONG, RIGHT.model_copy(
                 update={"completion": "Paris, on the Seine."})])]  # fmt: skip
    scores = referee.score(judge, group)
    assert all(s.failure is None and s.value is not None for s in scores), scores
    assert sum(s.value for s in scores if s.value is not None) == pytest.approx(1.5)  # 3 pairs


def test_an_audit_on_a_real_judge_completes() -> None:
    _need("smollm2")
    from referee.report.audit import AuditOptions, reseed, run_audit

    spec = {"type": "reference_judge", "model": "local/smollm2", "cache": False,
            "temperature": 0.7}  # fmt: skip
    rollouts = [RIGHT.model_copy(update={"id": "r", "metadata": {"label": 1.0}}),
                WRONG.model_copy(update={"id": "w", "metadata": {"label": 0.0}})]  # fmt: skip
    # Padding and a second seed: the other measures ask the same path other prompts
    # (tests/report/test_audit.py takes each on planted judges), at about 4 s a verdict here.
    options = AuditOptions(repeats=2, measures=frozenset({"length", "consistency"}))
    audit = run_sync(run_audit(referee.load(spec), rollouts, options,
                               reseeded=lambda r: referee.load(reseed(spec, r))))  # fmt: skip
    assert audit.failed == {} and audit.verdicts == 2 * 2 + 2  # padded, then a second seed
    assert audit.prefer_longer is not None and audit.consistency is not None


def test_a_server_that_cannot_start_says_why(tmp_path: Path) -> None:
    _need("smollm2")
    bad = tmp_path / "broken.gguf"
    bad.write_bytes(b"not a model")
    with pytest.raises(JudgeError, match="exited"):
        LocalServer(str(bad)).start()
