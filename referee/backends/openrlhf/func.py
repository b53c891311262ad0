"""OpenRLHF's other form: a ``reward_func(queries, prompts, labels)`` in a Python file."""

from __future__ import annotations

import textwrap
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from referee.backends.contract import Bridge, refuse_unfit, resolve
from referee.backends.openrlhf.markers import EndMarkers
from referee.backends.openrlhf.query import in_place, rollouts_from
from referee.backends.openrlhf.wire import DOOR, component_keys, reward_response
from referee.reward import Reward
from referee.rollout import Rollout

__all__ = ["RewardFunc", "reward_func_source"]


class RewardFunc:
    """OpenRLHF's ``reward_func(queries, prompts, labels)`` for a referee reward.

    Bind it as ``reward_func`` in a file and pass the file to ``--reward.remote_url``;
    ``referee openrlhf-func SPEC -o FILE`` writes such a file. It answers as ``/get_reward``
    does (`reward_response`: lists, one value per query), which OpenRLHF reads as it reads its
    HTTP client's answer. OpenRLHF calls it from several threads at once: a sync reward scores
    in the calling thread, an async one (a judge) on the process's one bridge loop
    (`referee.backends.contract.Bridge`), so its connections are pooled across calls.
    Picklable.

    Example:
        ```python
        # reward_func.py, passed as --reward.remote_url /abs/path/reward_func.py
        from referee.backends.openrlhf import RewardFunc

        reward_func = RewardFunc("/abs/path/extraction.yaml")
        ```

    Args:
        reward_or_spec: A reward, or a spec (path or mapping) to load.
        end_markers: What to strip from the end of each response (default: the common
            templates' markers, `COMMON_END_MARKERS`).
        failure_value: The reward of a rollout that gets no score.
        concurrency: How many rollouts an async reward scores at once within a call.

    Raises:
        SpecError: The spec needs what OpenRLHF cannot give a reward (`DOOR`): a group, a
            trajectory, the response's token count.
    """

    def __init__(
        self,
        reward_or_spec: Reward | str | Path | Mapping[str, Any],
        *,
        end_markers: EndMarkers | None = None,
        failure_value: float = 0.0,
        concurrency: int | None = None,
    ) -> None:
        self.reward = refuse_unfit(resolve(reward_or_spec), DOOR)
        self.end_markers = EndMarkers() if end_markers is None else end_markers
        self.failure_value = float(failure_value)
        self.concurrency = concurrency
        self._setup()

    def _setup(self) -> None:
        self._components = component_keys(self.reward)
        self._bridge = Bridge(self.reward, concurrency=self.concurrency)

    def __getstate__(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in ("reward", "end_markers", "failure_value",
                                              "concurrency")}  # fmt: skip

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._setup()

    def __call__(self, queries: Any, prompts: Any = None, labels: Any = None) -> dict[str, Any]:
        items = rollouts_from(queries, prompts, labels, end_markers=self.end_markers)
        rollouts = [r for r in items if isinstance(r, Rollout)]
        scores = in_place(items, self._bridge.score(rollouts) if rollouts else [])
        return reward_response(scores, self._components, self.failure_value)

    def __repr__(self) -> str:
        return (
            f"RewardFunc({self.reward.name!r}, end_markers={self.end_markers.describe()}, "
            f"failure_value={self.failure_value})"
        )


def reward_func_source(
    spec: str | Path,
    *,
    end_markers: EndMarkers | None = None,
    failure_value: float = 0.0,
    written_to: str | Path | None = None,
) -> str:
    """The text of a ``reward_func.py`` for OpenRLHF's ``--reward.remote_url``, bound to `spec`.

    The spec is named by its absolute path and loaded (and so checked) when OpenRLHF loads the
    file; the markers are written out, so the file says what it strips. `written_to`, where
    the file will be, goes into its docstring's command line.
    """
    path = Path(spec).resolve()
    markers = EndMarkers() if end_markers is None else end_markers
    where = "/abs/path/to/this/file.py" if written_to is None else str(Path(written_to).resolve())
    default = markers == EndMarkers()
    # The default is written by name: the file then follows referee's list as it grows.
    marker_arg = "EndMarkers()" if default else f"EndMarkers({markers.markers!r})"
    stripped = (
        "the common chat templates' end markers (COMMON_END_MARKERS in referee.backends.openrlhf)"
        if default
        else markers.describe()
    )
    doc = (
        f"OpenRLHF reward function for the referee spec {str(path)!r}.\n\n"
        f"Written by `referee openrlhf-func`. Pass this file to OpenRLHF:\n\n"
        f"    --reward.remote_url {where}\n\n"
    ) + textwrap.fill(
        "It scores as `referee serve`'s /get_reward does, with the same numbers, and strips "
        f"the same end markers from each response: {stripped}.",
        width=96,
    )
    # Text from the user (paths, markers) must not end the docstring or escape out of it.
    doc = doc.replace("\\", "\\\\").replace('"""', '\\"\\"\\"')
    return (
        f'"""{doc}\n"""\n\n'
        f"from referee.backends.openrlhf import EndMarkers, RewardFunc\n\n"
        f"reward_func = RewardFunc(\n"
        f"    {str(path)!r},\n"
        f"    end_markers={marker_arg},\n"
        f"    failure_value={float(failure_value)!r},\n"
        f")\n"
    )
