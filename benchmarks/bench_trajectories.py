"""Agent trajectories: referee's tool_use + tool_call_match + final_answer against a hand-written
loop doing the same checks, same run; and tool_call_match's agreement with BFCL's checker.

1. 10,000 ten-step trajectories (nine tool-calling turns and a final answer; some calls to
   unknown tools, some with invalid arguments, some tool errors, some repeated calls, some
   wrong final answers), scored by a weighted spec of the three rewards, against a plain loop
   over the same message objects doing the same checks (jsonschema-rs for the argument
   schemas, as referee). Values checked equal on every trajectory. Target: referee at most
   1.5x the loop's time.
2. With bfcl-eval installed: BFCL's AST checker and referee's tool_call_match on BFCL's Python
   categories, on the ground-truth answers and on five perturbations of each (the test suite
   asserts the same; here the counts are printed).

Usage: python benchmarks/bench_trajectories.py [--trajectories 10000] [--repeats 3]
"""

from __future__ import annotations

import argparse
import gc
import json
import random
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import jsonschema_rs  # noqa: E402

import referee  # noqa: E402
from referee import Rollout  # noqa: E402

TOOLS = [
    {"type": "function", "function": {"name": "search", "parameters": {
        "type": "object", "required": ["query"],
        "properties": {"query": {"type": "string"}, "k": {"type": "integer"}}}}},
    {"type": "function", "function": {"name": "fetch", "parameters": {
        "type": "object", "required": ["url"], "properties": {"url": {"type": "string"}}}}},
    {"type": "function", "function": {"name": "calc", "parameters": {
        "type": "object", "required": ["expr"], "properties": {"expr": {"type": "string"}}}}},
]  # fmt: skip
SPEC = {
    "name": "agent",
    "combine": "weighted",
    "components": {
        "process": {"type": "tool_use", "weight": 0.2},
        "calls": {"type": "tool_call_match", "reference_key": "calls", "weight": 0.3},
        "answer": {"type": "final_answer", "weight": 0.5,
                   "reward": {"type": "exact_match", "reference_key": "answer"}},
    },
}  # fmt: skip


def trajectories(n: int, seed: int = 0) -> list[Rollout]:
    rng = random.Random(seed)
    out = []
    for i in range(n):
        messages: list[dict[str, Any]] = []
        expected = []
        for t in range(9):
            kind = rng.random()
            name = ("search", "fetch", "calc")[t % 3]
            key = {"search": "query", "fetch": "url", "calc": "expr"}[name]
            args: dict[str, Any] = {key: f"{name}-{i}-{t}"}
            expected.append({name: {key: [args[key]]}})
            if kind < 0.05:
                name = "browse"  # an unknown tool
            elif kind < 0.10:
                args = {"k": "three"}  # invalid arguments
            elif kind < 0.13 and t > 0:
                args = json.loads(messages[-2]["tool_calls"][0]["function"]["arguments"])
                name = messages[-2]["tool_calls"][0]["function"]["name"]  # repeated call
            call = {"id": f"c{t}", "type": "function",
                    "function": {"name": name, "arguments": json.dumps(args)}}  # fmt: skip
            messages.append({"role": "assistant", "content": f"step {t}", "tool_calls": [call]})
            result = "Error: timeout" if rng.random() < 0.05 else f"result {t}"
            messages.append({"role": "tool", "tool_call_id": f"c{t}", "content": result})
        answer = str(i % 97)
        final = answer if rng.random() < 0.8 else str(i % 97 + 1)
        messages.append({"role": "assistant", "content": final})
        out.append(Rollout(id=str(i), prompt="task", completion=messages,  # type: ignore[arg-type]
                           reference={"calls": expected, "answer": answer},
                           metadata={"tools": TOOLS}))  # fmt: skip
    return out


# --- the hand-written loop -----------------------------------------------------------------

_SCHEMAS = {t["function"]["name"]: jsonschema_rs.validator_for(t["function"]["parameters"])
            for t in TOOLS}  # fmt: skip
_PARAMS = {t["function"]["name"]: t["function"]["parameters"] for t in TOOLS}


def _call_ok(call: dict[str, Any], expected: dict[str, Any]) -> bool:
    (name, answers), (got_name, args) = next(iter(expected.items())), next(iter(call.items()))
    if got_name != name or args is None:
        return False
    params = _PARAMS[name]
    if any(p not in args for p in params.get("required", [])):
        return False
    for param, value in args.items():
        if param not in params["properties"] or param not in answers:
            return False
        if type(value) is not str:
            return False
        std = value.replace(" ", "").lower()
        if std not in [a.replace(" ", "").lower() for a in answers[param] if isinstance(a, str)]:
            return False
    return all(p in args or "" in v for p, v in answers.items())


def handwritten(rollouts: list[Rollout]) -> list[float]:
    out = []
    for r in rollouts:
        ref: Any = r.reference
        steps = []
        seen = set()
        calls = []
        final = ""
        for m in r.completion:  # type: ignore[union-attr]
            if m.role != "assistant":
                continue
            if not m.tool_calls:
                steps.append(1.0)
                final = m.content or ""
                continue
            values = []
            for tc in m.tool_calls:
                try:
                    args = (
                        json.loads(tc.arguments) if isinstance(tc.arguments, str) else tc.arguments
                    )
                except ValueError:
                    args = None
                calls.append({tc.name: args})
                if tc.name not in _SCHEMAS:
                    values.append(0.0)
                    continue
                if args is None or not _SCHEMAS[tc.name].is_valid(args):
                    values.append(0.0)
                    continue
                result = next((x.content for x in r.completion  # type: ignore[union-attr]
                               if x.role == "tool" and x.tool_call_id == tc.id), "")  # fmt: skip
                value = (
                    0.5
                    if (result or "").lower().startswith(("error", "exception", "traceback"))
                    else 1.0
                )
                key = tc.name + json.dumps(args, sort_keys=True)
                if key in seen:
                    value = max(0.0, value - 0.5)
                seen.add(key)
                values.append(value)
            steps.append(sum(values) / len(values))
        process = sum(steps) / len(steps)
        expected = ref["calls"]
        matched: list[int] = []
        for exp in expected:
            for j, call in enumerate(calls):
                if j not in matched and _call_ok(call, exp):
                    matched.append(j)
                    break
        calls_ok = 1.0 if len(calls) == len(expected) == len(matched) else 0.0
        answer = 1.0 if final.strip() == str(ref["answer"]).strip() else 0.0
        out.append(0.2 * process + 0.3 * calls_ok + 0.5 * answer)
    return out


def bfcl_agreement() -> None:
    try:
        from tests.rewards.test_tools import compare_with_bfcl

        verdicts = compare_with_bfcl()
    except Exception as exc:  # bfcl-eval missing
        print(f"BFCL agreement: skipped ({exc})")
        return
    agree: dict[str, list[int]] = {}
    for _, kind, theirs, ours in verdicts:
        counts = agree.setdefault(kind, [0, 0])
        counts[0] += theirs == ours
        counts[1] += 1
    print("tool_call_match against BFCL's AST checker (8 Python categories):")
    for kind, (same, total) in agree.items():
        print(f"  {kind:26s} agree on {same:5d} of {total:5d} ({100 * same / total:.1f}%)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trajectories", type=int, default=10_000)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    rollouts = trajectories(args.trajectories)
    reward = referee.load(SPEC)
    got = [s.value for s in referee.score(reward, rollouts[:200])]
    want = handwritten(rollouts[:200])
    assert all(g is not None and abs(g - w) < 1e-9 for g, w in zip(got, want, strict=True)), (
        "referee and the loop disagree"
    )
    times: dict[str, list[float]] = {"loop": [], "referee": []}
    for i in range(args.repeats):
        for name in ("loop", "referee") if i % 2 == 0 else ("referee", "loop"):
            fresh = [r.model_copy() for r in rollouts]  # no trajectory cache carried over
            gc.collect()
            start = time.perf_counter()
            if name == "loop":
                values = handwritten(fresh)
            else:
                values = [s.value for s in referee.score(reward, fresh)]  # type: ignore[misc]
            times[name].append(time.perf_counter() - start)
    same = sum(abs(a - b) < 1e-9 for a, b in zip(values, handwritten(rollouts), strict=True))
    best = {k: min(v) for k, v in times.items()}
    print(f"{args.trajectories:,} ten-step trajectories, tool_use + tool_call_match + "
          f"final_answer (weighted), best of {args.repeats}:")  # fmt: skip
    print(f"  hand-written loop {best['loop']:.3f} s")
    print(f"  referee           {best['referee']:.3f} s "
          f"({args.trajectories / best['referee']:,.0f} trajectories/s)")  # fmt: skip
    print(f"  same values on {same:,}/{args.trajectories:,}")
    print(f"  ratio referee/loop: {best['referee'] / best['loop']:.2f}x (target <= 1.5x)")
    bfcl_agreement()


if __name__ == "__main__":
    main()
