"""The number every trainer optimises is the number `referee score` prints for the same rollout.

One set of rollouts, one spec (deterministic checks plus an async judge on a loopback server),
scored through the Python API, the CLI, the TRL adapter, verl's compute_score through the
legacy manager and through the reward loop on Ray, and the HTTP service (`/score`, OpenRLHF's
`/get_reward`, NeMo Gym's `/verify`, an ORS episode): the values must be
identical (trainers keep rewards as float32, so compared after that cast).
"""

from __future__ import annotations

import json
import subprocess
import sys
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml

pytest.importorskip("trl", reason="the trl extra is not installed")

import referee
from referee import Rollout
from referee.backends import verl as rv
from referee.backends.trl import reward_funcs
from referee.judges.testing import FakeJudgeServer
from tests.support import tiny
from tests.support.extras import needs
from tests.support.ors import events, http
from tests.support.serving import Server, request
from tests.support.verl import last_token_positions, loop_config, make_batch

pytestmark = needs("verl", reason="the verl extra is not installed")

ROWS = [  # prompt, completion, reference
    ("Extract the amount: paid 12 dollars", '{"amount": 12, "currency": "USD"}',
     {"amount": 12, "currency": "USD"}),
    ("Extract the amount: three euros", '{"amount": 3.0, "currency": "GBP"}',
     {"amount": 3, "currency": "EUR"}),
    ("Extract the amount: none here", '{"amount": null}', {"amount": None, "currency": None}),
    ("Extract the amount: 7 yen", "seven yen, I believe", {"amount": 7, "currency": "JPY"}),
    ("Extract the amount: 1e3 pesos", '{"amount": 1000, "currency": "MXN", "extra": 1}',
     {"amount": 1000, "currency": "MXN"}),
]  # fmt: skip


def spec(judge: FakeJudgeServer) -> dict[str, Any]:
    return {
        "name": "same",
        "combine": "weighted",
        "components": {
            "valid": {"type": "json_valid", "weight": 0.1, "gate": True},
            "fields": {"type": "field_match", "weight": 0.6, "extra_fields": "penalize",
                       "fields": {"amount": "number", "currency": "exact"}},
            "judge": {"type": "rubric_judge", "rubric": "helpfulness", "model": "openai/j",
                      "api_base": judge.url, "structured": "prompt", "cache": False,
                      "weight": 0.3},
        },
    }  # fmt: skip


def verify_body(prompt: str, completion: str, reference: Any) -> dict[str, Any]:
    """NeMo Gym's verify request for a rollout (its wire shape; `test_nemo_gym` sends it with
    NeMo Gym's own client)."""
    message = {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "status": "completed",
        "content": [{"type": "output_text", "text": completion, "annotations": []}],
    }
    response = {"id": "resp_1", "object": "response", "created_at": 0.0, "model": "policy",
                "output": [message], "parallel_tool_calls": False, "tool_choice": "auto",
                "tools": []}  # fmt: skip
    return {"responses_create_params": {"input": [{"role": "user", "content": prompt}]},
            "response": response, "expected_answer": reference}  # fmt: skip


def ors_episode(url: str, index: int, answer: str) -> float | None:
    """One ORS episode on task `index` (`test_ors` drives the same with the SDK's client)."""
    sid = {"X-Session-ID": f"same-{index}"}
    assert http(url, "POST", "/create", {"split": "train", "index": index}, headers=sid)[0] == 200
    call = {"name": "submit_answer", "input": {"answer": answer}}
    status, _, stream = http(url, "POST", "/same/call", call, headers=sid)
    assert status == 200
    data = "".join(d for e, d in events(stream) if e in ("chunk", "end"))
    reward: float | None = json.loads(data)["output"]["reward"]
    return reward


def f32(values: list[Any]) -> list[float]:
    return [float(np.float32(v)) for v in values]


def test_the_same_number_everywhere(
    tmp_path: Path, judge_server: FakeJudgeServer, local_ray: None
) -> None:
    from verl.experimental.reward_loop import RewardLoopManager
    from verl.workers.reward_manager import NaiveRewardManager

    spec_path = tmp_path / "spec.yaml"
    spec_path.write_text(yaml.safe_dump(spec(judge_server), sort_keys=False))
    rollouts = [
        Rollout(id=str(i), prompt=p, completion=c, reference=r) for i, (p, c, r) in enumerate(ROWS)
    ]
    results: dict[str, list[float]] = {}

    # Python API
    api = [s.value for s in referee.score(referee.load(str(spec_path)), rollouts)]
    assert all(v is not None for v in api) and len(set(api)) > 3  # varied, not all 0
    results["api"] = f32(api)

    # CLI
    rollouts_path = tmp_path / "rollouts.jsonl"
    rollouts_path.write_text("".join(r.model_dump_json() + "\n" for r in rollouts))
    out_path = tmp_path / "scored.jsonl"
    subprocess.run(
        [sys.executable, "-m", "referee.cli", "score", str(rollouts_path), "--spec",
         str(spec_path), "-o", str(out_path), "-q"], check=True,
    )  # fmt: skip
    results["cli"] = f32([json.loads(line)["reward"] for line in out_path.read_text().splitlines()])

    # TRL
    [fn] = reward_funcs(str(spec_path))
    import asyncio

    trl_values = asyncio.run(
        fn(prompts=[p for p, _, _ in ROWS], completions=[c for _, c, _ in ROWS],
           completion_ids=None, reference=[r for *_, r in ROWS])
    )  # fmt: skip
    results["trl"] = f32(trl_values)

    # verl: compute_score through the legacy NaiveRewardManager
    tok = tiny.tokenizer()
    batch = make_batch(tok, list(ROWS), prompt_len=64, response_len=64)
    legacy = NaiveRewardManager(
        tok, num_examine=0, compute_score=partial(rv.compute_score, spec=str(spec_path))
    )
    tensor = legacy(batch)
    positions = last_token_positions(batch)
    results["verl_legacy"] = [tensor[i, p].item() for i, p in enumerate(positions)]

    # verl: compute_score_async through the reward loop on Ray (one worker: test_verl.py splits
    # a batch over two)
    config = loop_config(tmp_path, {}, {"spec": str(spec_path)}, n=1, workers=1)
    rm = RewardLoopManager(config).compute_rm_score(batch).batch["rm_scores"]
    results["verl_reward_loop"] = [rm[i, p].item() for i, p in enumerate(positions)]

    # HTTP: /score, OpenRLHF's /get_reward, NeMo Gym's /verify, an ORS episode
    tasks_path = tmp_path / "tasks.jsonl"
    tasks_path.write_text("".join(json.dumps({"id": str(i), "prompt": p, "reference": r}) + "\n"
                                  for i, (p, _, r) in enumerate(ROWS)))  # fmt: skip
    server = Server(spec_path, "--tasks", str(tasks_path), "--env-name", "same")
    try:
        _, body = request(server.url + "/score",
                          {"rollouts": [r.model_dump() for r in rollouts]})  # fmt: skip
        results["http_score"] = f32([s["reward"] for s in body["scores"]])
        _, body = request(server.url + "/get_reward", {
            "query": [p + c for p, c, _ in ROWS], "prompts": [p for p, _, _ in ROWS],
            "labels": [json.dumps(r) for *_, r in ROWS],
        })  # fmt: skip
        results["http_openrlhf"] = f32(body["rewards"])
        verified = [request(server.url + "/verify", verify_body(p, c, r))[1] for p, c, r in ROWS]
        results["http_nemo_gym"] = f32([v["reward"] for v in verified])
        results["http_ors"] = f32([ors_episode(server.url, i, c) for i, (_, c, _) in
                                   enumerate(ROWS)])  # fmt: skip
    finally:
        assert server.stop() == 0

    for name, values in results.items():
        assert values == results["api"], f"{name} differs from the Python API: {results}"
