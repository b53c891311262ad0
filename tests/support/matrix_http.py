"""The conformance matrix's HTTP doors: one ``referee serve`` per type (``--tasks`` for ORS,
``--group-size`` for a group reward, ``--trust-clients`` for a spec whose references carry
code), asked in each protocol as its client asks: ``POST /score``, OpenRLHF's
``/get_reward`` and NeMo Gym's ``/verify`` (one sample a request), an ORS episode."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import referee
from referee.rollout import Rollout
from tests.support.doors import cell, door
from tests.support.matrix import SERVE, Case, Context, Outcome, timed
from tests.support.matrix_doors import END, ROOT, label_of, messages_of


def door_serve(cases: Sequence[Case], ctx: Context) -> dict[str, dict[str, Outcome]]:
    """Each type's ``referee serve`` (all in one process: `tests.support.matrix_cli`), asked
    in every protocol; for a group reward, also ``referee serve --tasks``, which must refuse
    to start. Each type's outcome per door."""
    jobs, refusals = [], []
    for case in cases:
        argv = ["serve", "--spec", str(case.path), *(["--trust-clients"] if case.powers else [])]
        tasks = ctx.folder(case, "serve") / "tasks.jsonl"
        tasks.write_text("".join(
            json.dumps({"id": str(i), "prompt": messages_of(r, "prompt") or "(none)",
                        "reference": r.reference}) + "\n"
            for i, r in enumerate(case.rollouts)
        ))  # fmt: skip
        ors = ["--tasks", str(tasks), "--env-name", "matrix"]
        reward = referee.load(case.path).name  # what its /health names
        grouped = ["--group-size", str(case.group_size)] if case.grouped else []
        if _ors_refuses(case):
            jobs.append({"name": case.name, "reward": reward, "argv": [*argv, *grouped]})
            refusals.append({"name": f"{case.name}|ors", "argv": [*argv, *ors]})
        else:
            jobs.append({"name": case.name, "reward": reward, "argv": [*argv, *grouped, *ors]})
    plan = ctx.root / "serve-jobs.json"
    plan.write_text(json.dumps({"mode": "serve", "jobs": jobs + refusals}))
    helper = subprocess.Popen(
        [sys.executable, "-m", "tests.support.matrix_cli", str(plan)], stdin=subprocess.PIPE,
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=ctx.env, cwd=ROOT,
    )  # fmt: skip
    assert helper.stdout is not None and helper.stdin is not None
    said: dict[str, dict[str, Any]] = {}
    try:
        for line in helper.stdout:
            found = json.loads(line)
            said[found["name"]] = found
            if len(said) == len(jobs) + len(refusals):
                break
        return {case.name: _ask(case, said) for case in cases}
    finally:
        helper.stdin.close()
        try:
            helper.wait(timeout=60)
        except subprocess.TimeoutExpired:
            helper.kill()


def _ors_refuses(case: Case) -> bool:
    """Whether ``referee serve --tasks`` must refuse to start with this type's spec."""
    return cell(door("serve_ors"), case.needs) == "refused"


def _ask(case: Case, said: Mapping[str, Mapping[str, Any]]) -> dict[str, Outcome]:
    """One type's server asked in every protocol (what the helper said of it: its URL, or
    why it stopped)."""
    from tests.support.serving import request

    out: dict[str, Outcome] = {}
    if _ors_refuses(case):
        refused = said.get(f"{case.name}|ors", {})
        out["serve_ors"] = (
            Outcome(refused=str(refused["error"])[-2000:])
            if "error" in refused
            else Outcome(error="referee serve --tasks started with a spec it cannot feed")
        )
    server = said.get(case.name, {})
    if "url" not in server:
        error = Outcome(error=f"the server did not start: {server.get('error')}")
        return {d: out.get(d, error) for d in SERVE}
    url, rollouts = server["url"], case.rollouts
    out["serve"] = timed(lambda: _http_score(url, rollouts, request))
    out["serve_openrlhf"] = timed(lambda: _http_openrlhf(url, rollouts, request))
    out["serve_nemo_gym"] = timed(lambda: _http_verify(url, case, request))
    if not _ors_refuses(case):
        out["serve_ors"] = timed(lambda: _http_ors(url, rollouts))
    return out


def _http_score(url: str, rollouts: list[Rollout], request: Any) -> Outcome:
    status, body = request(url + "/score", {"rollouts": [r.model_dump() for r in rollouts]})
    if status != 200:
        return Outcome(error=f"/score answered {status}: {body}")
    scores = body["scores"]
    return Outcome(
        [s["reward"] for s in scores],
        [s["failure"] is not None for s in scores],
        notes=[json.dumps(s["failure"]) if s["failure"] else "" for s in scores],
    )


def _http_openrlhf(url: str, rollouts: list[Rollout], request: Any) -> Outcome:
    values: list[float | None] = []
    failed: list[bool] = []
    for r in rollouts:  # OpenRLHF's client sends one sample a request
        prompt = r.prompt_text
        status, body = request(url + "/get_reward", {
            "query": [prompt + r.completion_text + END], "prompts": [prompt],
            "labels": [label_of(r.reference)],
        })  # fmt: skip
        if status == 422 and body.get("error", {}).get("type") == "unfit_spec":
            return Outcome(refused=body["error"]["message"])
        if status != 200:
            return Outcome(error=f"/get_reward answered {status}: {body}")
        values.append(body["rewards"][0])
        failed.append(body["extra_logs"]["referee_failed"][0] == 1.0)
    return Outcome(values, failed)


def _responses_items(rollout: Rollout) -> list[dict[str, Any]]:
    """The completion as OpenAI Responses output items (NeMo Gym's ``response.output``)."""

    def text(t: str) -> dict[str, Any]:
        return {"id": "msg", "type": "message", "role": "assistant", "status": "completed",
                "content": [{"type": "output_text", "text": t, "annotations": []}]}  # fmt: skip

    if isinstance(rollout.completion, str):
        return [text(rollout.completion)]
    items: list[dict[str, Any]] = []
    for m in rollout.completion:
        if m.role == "assistant":
            if m.text:
                items.append(text(m.text))
            for c in m.tool_calls or ():
                arguments = c.arguments if isinstance(c.arguments, str) else json.dumps(c.arguments)
                items.append({"type": "function_call", "call_id": c.id or "", "name": c.name,
                              "arguments": arguments, "id": f"fc_{c.id}"})  # fmt: skip
        elif m.role == "tool":
            items.append({"type": "function_call_output", "call_id": m.tool_call_id or "",
                          "output": m.text})  # fmt: skip
    return items


def _responses_tool(tool: Mapping[str, Any]) -> dict[str, Any]:
    """A chat-completions tool definition in the Responses API's flat shape."""
    fn = tool.get("function", tool)
    return {"type": "function", "name": fn.get("name"), "parameters": fn.get("parameters", {}),
            **({"description": fn["description"]} if "description" in fn else {})}  # fmt: skip


def verify_body(rollout: Rollout, task: int, attempt: int, grouped: bool) -> dict[str, Any]:
    """NeMo Gym's ``/verify`` request for a rollout, as its rollout collection sends one."""
    prompt = messages_of(rollout, "prompt")
    params: dict[str, Any] = {"input": prompt}
    tools = rollout.metadata.get("tools")
    if isinstance(tools, list):
        params["tools"] = [_responses_tool(t) for t in tools]
    response: dict[str, Any] = {
        "id": "resp", "object": "response", "created_at": 0.0, "model": "policy",
        "output": _responses_items(rollout), "parallel_tool_calls": False,
        "tool_choice": "auto", "tools": params.get("tools", []),
    }  # fmt: skip
    tokens = rollout.metadata.get("completion_tokens")
    if isinstance(tokens, int):
        response["usage"] = {"input_tokens": 0, "output_tokens": tokens, "total_tokens": tokens,
                             "input_tokens_details": {"cached_tokens": 0},
                             "output_tokens_details": {"reasoning_tokens": 0}}  # fmt: skip
    body: dict[str, Any] = {"responses_create_params": params, "response": response,
                            "expected_answer": rollout.reference}  # fmt: skip
    if grouped:
        body["_ng_group_id"] = str(rollout.group)
    body["_ng_task_index"], body["_ng_rollout_index"] = task, attempt
    return body


def _http_verify(url: str, case: Case, request: Any) -> Outcome:
    """Each rollout's ``/verify``: a group's members (one task, a rollout index each) sent at
    once, the last first, a moment apart: the order they arrive in is the network's, and the
    rollout index says theirs."""
    groups = list(dict.fromkeys(r.group for r in case.rollouts))
    bodies = []
    for i, r in enumerate(case.rollouts):
        task = groups.index(r.group) if case.grouped else i
        attempt = [x.group for x in case.rollouts[:i]].count(r.group) if case.grouped else 0
        bodies.append(verify_body(r, task, attempt, case.grouped))

    def send(i: int) -> tuple[int, Any]:
        if case.grouped:
            time.sleep(0.25 * (len(bodies) - 1 - i))
        return request(url + "/verify", bodies[i])  # type: ignore[no-any-return]

    # A group's members are verified at once (each request waits for its group to be whole).
    with ThreadPoolExecutor(max(1, len(bodies))) as pool:
        answers = list(pool.map(send, range(len(bodies))))
    bad = [(s, b) for s, b in answers if s != 200]
    if bad:
        return Outcome(error=f"/verify answered {bad[0][0]}: {bad[0][1]}")
    return Outcome(
        [b["reward"] for _, b in answers],
        [bool(b["mask_sample"]) for _, b in answers],
        notes=[str(b.get("failure_reason") or "") for _, b in answers],
    )


def _http_ors(url: str, rollouts: list[Rollout]) -> Outcome:
    from tests.support.ors import events, http

    values: list[float | None] = []
    failed: list[bool] = []
    for i, r in enumerate(rollouts):
        sid = {"X-Session-ID": f"matrix-{i}"}
        status, _, _ = http(url, "POST", "/create", {"split": "train", "index": i}, headers=sid)
        assert status == 200, f"ORS /create answered {status}"
        call = {"name": "submit_answer", "input": {"answer": r.completion_text}}
        status, _, stream = http(url, "POST", "/matrix/call", call, headers=sid)
        assert status == 200, f"ORS call answered {status}"
        data = "".join(d for e, d in events(stream) if e in ("chunk", "end"))
        output = json.loads(data)["output"]
        values.append(output["reward"])
        failed.append(output["reward"] is None)
    return Outcome(values, failed)
