"""referee: rewards and verifiers for reinforcement learning on LLMs.

Compose rewards in Python or in a spec file, check them on logged rollouts, and hand the same
reward to TRL, verl or an HTTP service.

Example:
    ```python
    import referee

    reward = referee.load("spec.yaml")
    scores = referee.score(reward, [referee.Rollout(id="1", completion="...", reference=...)])
    ```
"""

import sys

from referee import scores as _scores
from referee._moved import MovedModule as _MovedModule
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

# `referee.score` is the function. The module that held `Score` and `Failure` is
# `referee.scores`; its old path answers, with a DeprecationWarning, for a release.
sys.modules.setdefault("referee.score", _MovedModule("referee.score", _scores))

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
