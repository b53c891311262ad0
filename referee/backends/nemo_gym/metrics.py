"""NeMo Gym's ``/aggregate_metrics``, by its own rules, without pandas."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from referee.backends.nemo_gym.wire import ROLLOUT_INDEX, TASK_INDEX

__all__ = ["aggregate_metrics"]


def aggregate_metrics(verify_responses: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """NeMo Gym's ``AggregateMetrics`` of verify responses, by its rules
    (``nemo_gym.reward_profile.compute_aggregate_metrics``, 0.7), without pandas.

    Masked samples (``mask_sample``) are left out of the quality metrics and counted under
    ``coverage/*`` (present only when something was masked). Each response's numbers (its
    top-level numbers and booleans not starting with ``_``, and ``response.usage``'s) get
    ``mean/``, ``max/``, ``min/``, ``median/`` and ``std/`` (sample standard deviation),
    per task (``group_level_metrics``, by ``_ng_task_index``) and over all
    (``agent_metrics``, with ``num_repeats``); ``key_metrics`` are the ``mean/`` ones.
    Not computed: NeMo Gym's across-repeat statistics (``*_across_repeats/*``,
    ``repeat_level_metrics``), histograms and ``perf_summary``.
    """
    empty: dict[str, Any] = {"group_level_metrics": [], "agent_metrics": {}, "key_metrics": {},
                             "perf_summary": None, "repeat_level_metrics": []}  # fmt: skip
    if not verify_responses:
        return empty
    scored = [r for r in verify_responses if not r.get("mask_sample")]
    masked = len(verify_responses) - len(scored)
    coverage: dict[str, Any] = {}
    if masked:
        tasks_total = {r.get(TASK_INDEX, 0) for r in verify_responses}
        tasks_measured = {r.get(TASK_INDEX, 0) for r in scored}
        coverage = {
            "coverage/measured_rollouts": len(scored),
            "coverage/masked_rollouts": masked,
            "coverage/measured_tasks": len(tasks_measured),
            "coverage/fully_masked_tasks": len(tasks_total - tasks_measured),
        }
    if not scored:
        return {**empty, "agent_metrics": dict(coverage), "key_metrics": dict(coverage)}
    rows = [_numbers(r) for r in scored]
    columns = list(dict.fromkeys(name for row in rows for name in row))
    by_task: dict[int, list[tuple[Mapping[str, Any], dict[str, float]]]] = {}
    for response, row in zip(scored, rows, strict=True):
        by_task.setdefault(response.get(TASK_INDEX, 0), []).append((response, row))
    groups = []
    for task in sorted(by_task):
        members = by_task[task]
        infos = sorted((_rollout_info(r) for r, _ in members), key=lambda i: i[ROLLOUT_INDEX])
        groups.append({
            TASK_INDEX: task, **_describe([row for _, row in members], columns),
            "sample": {"agent_ref": {"name": "agent"}}, "num_rollouts": len(members),
            "expected_num_rollouts": len(members), "missing_num_rollouts": 0,
            "reward_profile_completion_pct": 100.0, "rollout_infos": infos,
        })  # fmt: skip
    agent = {**_describe(rows, columns), **coverage}
    agent["num_repeats"] = len({r.get(ROLLOUT_INDEX, 0) for r in verify_responses})
    key = {k: v for k, v in agent.items() if k.startswith("mean/")}
    return {**empty, "group_level_metrics": groups, "agent_metrics": agent,
            "key_metrics": {**key, **coverage}}  # fmt: skip


def _number(value: Any) -> float | None:
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, (int, float)) and math.isfinite(value):
        return value
    return None


def _numbers(response: Mapping[str, Any]) -> dict[str, float]:
    """A response's numbers as NeMo Gym's profiler reads them: its own, then its usage's."""
    usage = response.get("response")
    usage = usage.get("usage") if isinstance(usage, Mapping) else None
    merged = {**response, **(usage if isinstance(usage, Mapping) else {})}
    out: dict[str, float] = {}
    for name, value in merged.items():
        number = _number(value)
        if number is not None and not name.startswith("_") and name != "mask_sample":
            out[name] = number
    return out


def _rollout_info(response: Mapping[str, Any]) -> dict[str, Any]:
    task, index = response.get(TASK_INDEX, 0), response.get(ROLLOUT_INDEX, 0)
    info: dict[str, Any] = {"rollout_id": f"{task}:{index}", TASK_INDEX: task, ROLLOUT_INDEX: index}
    if "reward" in response:
        info["reward"] = response["reward"]
    usage = response.get("response")
    usage = usage.get("usage") if isinstance(usage, Mapping) else None
    for name, value in (usage if isinstance(usage, Mapping) else {}).items():
        if (number := _number(value)) is not None:
            info[name] = int(number) if isinstance(value, bool) else value
    for name, value in response.items():
        if name.startswith("_") or name in ("reward", "response", "mask_sample"):
            continue
        if (number := _number(value)) is not None:
            info[name] = int(number) if isinstance(value, bool) else value
    return info


def _describe(rows: Sequence[Mapping[str, float]], columns: Sequence[str]) -> dict[str, float]:
    """pandas' ``mean``/``max``/``min``/``median``/``std`` per column, missing values skipped;
    a std of one value is dropped, unless no column has two, when a column with no value
    missing reads 0.0 (NeMo Gym's ``describe_dataframe``)."""
    stats: dict[str, dict[str, float]] = {s: {} for s in ("mean", "max", "min", "median", "std")}
    full: list[str] = []
    for name in columns:
        values = [row[name] for row in rows if name in row]
        if len(values) == len(rows):
            full.append(name)
        if not values:
            continue
        ordered = sorted(values)
        mean = math.fsum(values) / len(values)
        half = len(ordered) // 2
        stats["mean"][name] = mean
        stats["max"][name] = ordered[-1]
        stats["min"][name] = ordered[0]
        stats["median"][name] = (
            ordered[half] if len(ordered) % 2 else (ordered[half - 1] + ordered[half]) / 2
        )
        if len(values) > 1:
            spread = math.fsum((v - mean) ** 2 for v in values) / (len(values) - 1)
            stats["std"][name] = math.sqrt(spread)
    if not stats["std"]:
        stats["std"] = dict.fromkeys(full, 0.0)
    return {
        f"{stat}/{name}": value for stat, values in stats.items() for name, value in values.items()
    }
