"""verl's per-sample reward function (`compute_score`, `compute_score_async`), and what the
managers share with it: the spec's reward, loaded once per process; a sample as a Rollout;
a Score as verl's per-sample dict."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from referee.backends.contract import Bridge, Door, Outlet, decode_json_text, refuse_unfit, resolve
from referee.errors import SpecError
from referee.reward import Need, Reward
from referee.rollout import Rollout
from referee.scores import Score

__all__ = [
    "DEFAULT_FAILURE_VALUE",
    "bridge_for",
    "compute_score",
    "compute_score_async",
    "function_door",
    "manager_door",
    "result_dict",
    "result_keys",
    "reward_for",
    "rollout_from_verl",
]

DEFAULT_FAILURE_VALUE = 0.0
PROMPT_KEYS = ("prompt", "question")

_loaded: dict[str, Reward] = {}


_LOOP_MANAGER = (
    "the reward manager: reward.reward_manager.source=importlib "
    "reward.reward_manager.name=RefereeRewardLoopManager "
    "reward.reward_manager.module.path=pkg://referee.backends.verl"
)
_INSTEAD: dict[Need, str] = {
    "group": _LOOP_MANAGER + " (it groups the attempts by verl's uid)",
    "messages": _LOOP_MANAGER + " with +reward.reward_kwargs.per_turn=true (it reads the "
    "model's turns and the tools' apart from response_mask)",
    "tokens": _LOOP_MANAGER + " (it counts the response's tokens)",
}


def function_door(solution_str: Any, extra_info: Mapping[str, Any] | None) -> Door:
    """What `compute_score` carries for a sample: the response as verl's managers give it,
    text (a trajectory only where a script passes chat messages), and no token count unless
    ``extra_info`` holds one."""
    carries: set[Need] = set()
    if not isinstance(solution_str, str):
        carries.add("messages")
    if extra_info and ("completion_tokens" in extra_info or "completion_ids" in extra_info):
        carries.add("tokens")
    return Door("verl's compute_score (one sample at a time)", frozenset(carries), _INSTEAD)


def manager_door(per_turn: bool) -> Door:
    """What referee's reward managers carry: whole groups, the response's token count, and a
    trajectory where `per_turn` reads the turns apart."""
    needs: list[Need] = ["group", "tokens", "messages"] if per_turn else ["group", "tokens"]
    carries = frozenset(needs)
    fix = "per_turn=True (reward_kwargs per_turn: true), which reads the turns from response_mask"
    return Door("this reward manager without per_turn", carries, {"messages": fix})


def reward_for(spec: str | Path | Mapping[str, Any] | Reward | None, *, door: Door) -> Reward:
    """The reward a spec describes, loaded once per process, if `door` carries what it needs
    (`referee.backends.contract.refuse_unfit`)."""
    if spec is None:
        raise SpecError(
            "referee's verl entry point needs a spec: set "
            "+reward.custom_reward_function.reward_kwargs={spec: /abs/path/spec.yaml}"
        )
    source: str | dict[str, Any]
    if isinstance(spec, (str, Path)):
        source = str(Path(spec).expanduser().resolve())
        key = source
    elif isinstance(spec, Mapping):
        # An inline spec (Hydra hands a DictConfig) arrives with every sample: loaded once by
        # its content, so a judge keeps its client, cache and concurrency limit.
        source = plain(spec)
        key = json.dumps(source, sort_keys=True, default=str)
    else:
        return refuse_unfit(resolve(spec), door)
    reward = _loaded.get(key)
    if reward is None:
        reward = _loaded[key] = resolve(source)
    return refuse_unfit(reward, door)


_bridges: dict[int, tuple[Reward, Bridge]] = {}


def bridge_for(reward: Reward) -> Bridge:
    """The one bridge of a reward in this process (its threads, its loop), made on first use."""
    held = _bridges.get(id(reward))
    if held is None or held[0] is not reward:
        held = _bridges[id(reward)] = (reward, Bridge(reward))
    return held[1]


def plain(value: Any) -> Any:
    """numpy arrays and scalars (what parquet columns become) as plain Python values."""
    if isinstance(value, Mapping):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, Sequence) and not isinstance(value, (str, bytes)):
        return [plain(v) for v in value]  # lists, tuples, omegaconf's ListConfig
    tolist = getattr(value, "tolist", None)
    if tolist is not None and type(value).__module__ == "numpy":
        return plain(tolist())
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if value is None or isinstance(value, (str, bool, int, float)):
        return value
    return str(value)


def rollout_from_verl(
    data_source: Any,
    solution_str: str | list[Any],
    ground_truth: Any,
    extra_info: Mapping[str, Any] | None,
    *,
    prompt: Any = None,
    group: str | None = None,
) -> Rollout:
    """The Rollout referee scores for one verl sample."""
    info = plain(extra_info or {})
    if prompt is None:
        prompt = next((info[k] for k in PROMPT_KEYS if isinstance(info.get(k), (str, list))), "")
    metadata = {k: v for k, v in info.items() if v is not None}
    if data_source is not None:
        metadata["data_source"] = plain(data_source)
    return Rollout(
        id=str(info.get("index", "")),
        prompt=plain(prompt),
        completion=solution_str,
        reference=decode_json_text(plain(ground_truth)),
        group=group,
        metadata=metadata,
    )


def outlet(reward: Reward, failure_value: float) -> Outlet:
    """verl's policy: `failure_value` for a sample with no score (verl cannot mask one), None
    for a skipped component (its metrics leave None out of their means; NaN would poison
    them)."""
    return Outlet.of(reward, failure_value=failure_value, skipped=None)


def result_keys(reward: Reward) -> list[str]:
    """The keys of every sample's result dict, the same for every sample of a reward."""
    return ["score", *outlet(reward, DEFAULT_FAILURE_VALUE).keys()]


def total(score: Score, failure_value: float) -> float:
    """What verl optimises for a sample: its score, or `failure_value` where it has none."""
    return failure_value if score.value is None else score.value


def result_dict(reward: Reward, score: Score, failure_value: float) -> dict[str, float | None]:
    """A Score as verl's per-sample dict: fixed keys, finite numbers, None for a skipped
    component (see the package docstring)."""
    return {"score": total(score, failure_value), **outlet(reward, failure_value).row(score)}


def _sample(
    spec: str | Mapping[str, Any] | None, data_source: Any, solution_str: str,
    ground_truth: Any, extra_info: Mapping[str, Any] | None,
) -> tuple[Reward, Rollout]:  # fmt: skip
    """What both reward functions start from: the spec's reward and the sample's rollout."""
    reward = reward_for(spec, door=function_door(solution_str, extra_info))
    return reward, rollout_from_verl(data_source, solution_str, ground_truth, extra_info)


def compute_score(
    data_source: Any = None,
    solution_str: str = "",
    ground_truth: Any = None,
    extra_info: Mapping[str, Any] | None = None,
    spec: str | Mapping[str, Any] | None = None,
    failure_value: float = DEFAULT_FAILURE_VALUE,
    **_: Any,
) -> dict[str, float | None]:
    """verl's per-sample reward function, synchronous (legacy managers, or any verl).

    Extra keyword arguments verl adds (``reward_router_address`` and the like) are ignored.
    """
    reward, rollout = _sample(spec, data_source, solution_str, ground_truth, extra_info)
    [score] = bridge_for(reward).score([rollout])
    return result_dict(reward, score, failure_value)


async def compute_score_async(
    data_source: Any = None,
    solution_str: str = "",
    ground_truth: Any = None,
    extra_info: Mapping[str, Any] | None = None,
    spec: str | Mapping[str, Any] | None = None,
    failure_value: float = DEFAULT_FAILURE_VALUE,
    **_: Any,
) -> dict[str, float | None]:
    """`compute_score` for verl's reward loop, which awaits it: judges run concurrently."""
    reward, rollout = _sample(spec, data_source, solution_str, ground_truth, extra_info)
    [score] = await bridge_for(reward).score_async([rollout])
    return result_dict(reward, score, failure_value)
