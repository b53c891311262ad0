"""referee rewards in verl: a `compute_score` function and reward managers.

The reward function (verl 0.9; the old top-level ``custom_reward_function.*`` keys are silently
ignored there, use the ``reward.`` ones)::

    reward.custom_reward_function.path=pkg://referee.backends.verl
    reward.custom_reward_function.name=compute_score_async     # or compute_score (sync)
    +reward.custom_reward_function.reward_kwargs={spec: /abs/path/spec.yaml}

Every sample gets a dict with the same keys: ``score``, ``referee_failed`` (1.0 when referee
could give no score), and for each top-level component of a combination ``referee/<component>``
and ``referee/<component>/skipped`` (1.0 where the component did not run because a gate, or a
failure, before it stopped the rollout; else 0.0). verl has no way to mask a sample, so a
rollout that gets no score is given ``failure_value`` (0.0 unless ``reward_kwargs`` says
otherwise) with ``referee_failed`` set; a component that ran and failed reads ``failure_value``
too. ``score`` is always a finite number.

A skipped component has no value, which is not a zero: it reads None, the value verl itself
gives a sample that lacks an extra-info key. verl keeps these keys as numpy arrays (never
tensors) and its validation metrics leave None out of their means, so ``referee/<component>``
averages over the rollouts where the component ran; NaN would turn those means into NaN. (A
key used as DAPO's ``filter_groups.metric`` must be a number on every sample: use ``score``.)

``compute_score`` sees one sample: its ``solution_str``, ``ground_truth`` (the reference; text
that is a JSON object or array is decoded, so store nested references as JSON strings, which
parquet keeps exactly),
``data_source`` and ``extra_info`` (metadata). The prompt reaches rewards that need it (judges)
from ``extra_info["prompt"]`` (or ``"question"``); put it there when preparing the parquet, or
use a referee reward manager, which decodes the prompt itself.

Group rewards (``group_rank``, pairwise judges) need every attempt at a prompt; use a reward
manager, which groups by verl's ``uid``:

- the reward loop (verl's current trainer): ``reward.reward_manager.source=importlib``,
  ``reward.reward_manager.name=RefereeRewardLoopManager``,
  ``reward.reward_manager.module.path=pkg://referee.backends.verl``, with the spec in
  ``+reward.reward_kwargs={spec: ...}``. Samples reach it one at a time, on several workers,
  so members of a group meet in a named Ray actor and are scored together once the group is
  complete (``actor_rollout_ref.rollout.n`` members, ``val_kwargs.n`` in validation), or after
  ``group_timeout`` seconds with whatever arrived. Identical attempts count as members (a
  group often has them); so do the copies verl pads a batch with when its size is not a
  multiple of ``reward.num_workers``, which can leave a group's last member to be scored on
  its own: keep the batch size a multiple of the worker count.
- verl's legacy batch managers: `RefereeRewardManager`, registered as ``referee``; it sees the
  whole batch, so groups are whole.
"""

import sys
from typing import TYPE_CHECKING, Any

from referee.backends.verl.function import (
    DEFAULT_FAILURE_VALUE,
    compute_score,
    compute_score_async,
    function_door,
    manager_door,
    result_dict,
    result_keys,
    reward_for,
    rollout_from_verl,
)
from referee.errors import MissingDependency

if TYPE_CHECKING:  # loaded by `__getattr__` at run time (below); named here for types and docs
    from referee.backends.verl.batch import RefereeRewardManager, options_of
    from referee.backends.verl.loop import (
        DEFAULT_GROUP_TIMEOUT,
        GroupCollector,
        RefereeRewardLoopManager,
    )

__all__ = [
    "DEFAULT_FAILURE_VALUE",
    "DEFAULT_GROUP_TIMEOUT",
    "GroupCollector",
    "RefereeRewardLoopManager",
    "RefereeRewardManager",
    "compute_score",
    "compute_score_async",
    "function_door",
    "manager_door",
    "options_of",
    "result_dict",
    "result_keys",
    "reward_for",
    "rollout_from_verl",
]

# The reward function needs neither verl nor torch: a script that calls `compute_score` does
# not pay their import (seconds of CPU in every process). The managers subclass verl's, so
# they load verl when first named (`__getattr__`), as verl's importlib loader names them.
_MANAGERS = {
    "RefereeRewardManager": "referee.backends.verl.batch",
    "options_of": "referee.backends.verl.batch",
    "DEFAULT_GROUP_TIMEOUT": "referee.backends.verl.loop",
    "GroupCollector": "referee.backends.verl.loop",
    "RefereeRewardLoopManager": "referee.backends.verl.loop",
}


def __getattr__(name: str) -> Any:
    module = _MANAGERS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    _register()
    value = globals()[name] = getattr(sys.modules[module], name)  # looked up once
    return value


def _register() -> None:
    """Load the managers and make them reachable by name (``reward_manager.name=referee``)
    where verl's registries allow it."""
    try:
        import torch  # noqa: F401
        import verl  # noqa: F401  (fails early, with the message below, where verl is missing)
    except ImportError as exc:  # pragma: no cover - exercised only without the extra
        raise MissingDependency("verl", "verl", "referee.backends.verl") from exc
    from verl.experimental.reward_loop.reward_manager import registry as loop_registry
    from verl.workers.reward_manager import registry as legacy_registry

    from referee.backends.verl.batch import RefereeRewardManager
    from referee.backends.verl.loop import RefereeRewardLoopManager

    loop_registry.REWARD_MANAGER.setdefault("referee", RefereeRewardLoopManager)
    legacy_registry.REWARD_MANAGER_REGISTRY.setdefault("referee", RefereeRewardManager)


if "verl" in sys.modules:  # in verl's own processes: registered by name at once
    _register()
