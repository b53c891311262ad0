"""`harbor_task`: grade an agent in its task's own environment, as Harbor grades it.

A Harbor task is a folder: ``instruction.md``, ``task.toml``, ``environment/Dockerfile`` (or
an image named by ``[environment] docker_image``) and ``tests/test.sh``, which writes the
reward to ``/logs/verifier/reward.txt`` (a number) or ``/logs/verifier/reward.json``
(``{"reward": value, other numeric keys: components}``). The rollout names its task and
carries the agent's change to the workspace as a unified diff; referee builds the task's
image once (cached by content, `referee.verifiers.containers`), applies the diff in a fresh
container at the task's working directory, copies the task's ``tests/`` to ``/tests``
*afterwards* (the agent cannot change them), runs the test script under the verifier's
timeout, and reads the reward file as Harbor does.

The task folder is the user's, trusted: its Dockerfile builds with the engine's network, its
``[verifier] env`` is passed in. The diff and everything the container writes are hostile:
the diff is capped and applied as root inside the container only (the agent had root there
too, under Harbor), stale reward files are removed before the tests run, and the reward file
is read capped and parsed strictly.
"""

from __future__ import annotations

from referee.rewards.harbor.files import parse_reward_json, parse_reward_text
from referee.rewards.harbor.harbor_task import HarborTask
from referee.rewards.harbor.task import HarborTaskSpec, read_task

__all__ = ["HarborTask", "HarborTaskSpec", "parse_reward_json", "parse_reward_text", "read_task"]
