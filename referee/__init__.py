"""referee: rewards and verifiers for reinforcement learning on LLMs.

Compose rewards in Python or in a spec file, check them on logged rollouts, and hand the same
reward to TRL, verl or an HTTP service.

Example:
    ```python
    import referee

    reward = referee.load("spec.yaml")
    scores = referee.score(reward, [referee.Rollout(id="1", completion="...", reference=...)])
    ```

``import referee`` imports none of the names below: each comes from its module on first use.
"""

from referee import _moved
from referee._lazy import exports as _exports

TYPE_CHECKING = False  # `typing.TYPE_CHECKING` without importing typing (type checkers know it)
if TYPE_CHECKING:  # what type checkers and the docs read; `_EXPORTS` below is what runs
    from referee.compose import (
        Combined,
        Component,
        Transform,
        cascade,
        clip,
        gate,
        maximum,
        mean,
        minimum,
        product,
        scale,
        weighted,
    )
    from referee.errors import (
        MissingDependency,
        NotApplicable,
        RefereeError,
        RewardError,
        RolloutError,
        SpecError,
        VerifierTimeout,
    )
    from referee.function import reward
    from referee.registry import register, registered_types
    from referee.reward import (
        AsyncReward,
        CheckReward,
        Composite,
        GroupReward,
        GroupRewardBase,
        Part,
        Reward,
        RewardBase,
        SyncReward,
        score,
    )
    from referee.rollout import Message, Rollout, ToolCall
    from referee.scores import Failure, Score
    from referee.spec import load

__version__ = "0.1.0"

# Old module paths answer, with a DeprecationWarning, for a release (`referee._moved.MOVED`):
# among them `referee.score`, the module that held `Score` and `Failure` (`referee.scores`),
# whose name is now the function's.
_moved.install()

__all__ = [
    "AsyncReward",
    "CheckReward",
    "Combined",
    "Component",
    "Composite",
    "Failure",
    "GroupReward",
    "GroupRewardBase",
    "Message",
    "MissingDependency",
    "NotApplicable",
    "Part",
    "RefereeError",
    "Reward",
    "RewardBase",
    "RewardError",
    "Rollout",
    "RolloutError",
    "Score",
    "SpecError",
    "SyncReward",
    "ToolCall",
    "Transform",
    "VerifierTimeout",
    "__version__",
    "cascade",
    "clip",
    "gate",
    "load",
    "maximum",
    "mean",
    "minimum",
    "product",
    "register",
    "registered_types",
    "reward",
    "scale",
    "score",
    "weighted",
]

# `import referee` imports none of these: each is imported from its module on first use (the
# core pulls in pydantic, `load` the spec loader), so a command or a worker that needs one
# part of referee pays for that part alone.
_EXPORTS = {
    "referee.compose": ("Combined", "Component", "Transform", "cascade", "clip", "gate", "maximum",
                        "mean", "minimum", "product", "scale", "weighted"),
    "referee.errors": ("MissingDependency", "NotApplicable", "RefereeError", "RewardError",
                       "RolloutError", "SpecError", "VerifierTimeout"),
    "referee.function": ("reward",),
    "referee.registry": ("register", "registered_types"),
    "referee.reward": ("AsyncReward", "CheckReward", "Composite", "GroupReward", "GroupRewardBase",
                       "Part", "Reward", "RewardBase", "SyncReward", "score"),
    "referee.rollout": ("Message", "Rollout", "ToolCall"),
    "referee.scores": ("Failure", "Score"),
    "referee.spec": ("load",),
}  # fmt: skip

if not TYPE_CHECKING:  # undefined for mypy, so a misspelt name stays an error
    __getattr__, __dir__ = _exports(__name__, _EXPORTS, globals())
