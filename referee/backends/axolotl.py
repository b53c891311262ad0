"""referee rewards by dotted path, for Axolotl's GRPO config (`trl.reward_funcs`).

Axolotl names each reward function by a dotted path and imports it itself
(``importlib.import_module`` of all but the last part, then ``getattr`` of the last). Its
config cannot pass arguments to the function, so this module reads the spec from the
environment, when Axolotl first asks for a function:

```yaml
# REFEREE_SPEC=/abs/path/spec.yaml axolotl train grpo.yaml
rl: grpo
trl:
  reward_funcs:
    - referee.backends.axolotl.reward          # the whole spec, one function
```

or one function per top-level component of the spec, for TRL's own aggregation, with the
spec's weights in ``trl.reward_weights`` in the same order (``REFEREE_SPEC=spec.yaml python -m
referee.backends.axolotl`` prints this block for your spec):

```yaml
trl:
  reward_funcs:
    - referee.backends.axolotl.component.valid
    - referee.backends.axolotl.component.fields
  reward_weights: [0.2, 0.8]
```

Environment:

- ``REFEREE_SPEC``: the spec file (required);
- ``REFEREE_REFERENCE``: the dataset column that holds the ground truth (``reference``).

The functions are `referee.backends.trl.reward_funcs`'s: TRL's signature, the same numbers as
``referee score``, async where the spec waits. Several specs in one run: write a module of your
own (``my_rewards.py``: ``from referee.backends.trl import reward_funcs``, ``answer, =
reward_funcs("answer.yaml")``) and name ``my_rewards.answer``.
"""

from __future__ import annotations

import os
import sys
import threading
import types
from typing import Any

from referee.backends.trl import RewardFuncs, TRLRewardFunction, reward_funcs
from referee.errors import RefereeError, SpecError

# and `reward`, made on first access (module __getattr__)
__all__ = ["component", "weights"]

SPEC_ENV = "REFEREE_SPEC"
REFERENCE_ENV = "REFEREE_REFERENCE"

_lock = threading.Lock()
_loaded: dict[tuple[str, str, bool], RewardFuncs] = {}


def _funcs(per_component: bool) -> RewardFuncs:
    """The spec's TRL functions, loaded once per process (per spec, column and form)."""
    path = os.environ.get(SPEC_ENV)
    if not path:
        raise SpecError(
            f"set {SPEC_ENV} to your spec file "
            f"({SPEC_ENV}=/abs/path/spec.yaml axolotl train config.yaml)",
            source="referee.backends.axolotl",
        )
    key = (os.path.abspath(os.path.expanduser(path)), os.environ.get(REFERENCE_ENV, "reference"),
           per_component)  # fmt: skip
    with _lock:
        funcs = _loaded.get(key)
        if funcs is None:
            funcs = _loaded[key] = reward_funcs(key[0], reference=key[1],
                                                per_component=per_component)  # fmt: skip
    return funcs


class _Components(types.ModuleType):
    """``referee.backends.axolotl.component``: one function per top-level component."""

    def __getattr__(self, name: str) -> TRLRewardFunction:
        if name.startswith("__"):
            raise AttributeError(name)
        funcs = _funcs(per_component=True)
        for fn in funcs:
            if fn.__name__ == name:
                return fn  # type: ignore[no-any-return]
        names = ", ".join(fn.__name__ for fn in funcs)
        raise AttributeError(
            f"{os.environ[SPEC_ENV]} has no top-level component {name!r}; it has: {names}"
        )


component = _Components("referee.backends.axolotl.component")
sys.modules[component.__name__] = component  # importable by its dotted path, as Axolotl does


def weights() -> list[tuple[str, float]]:
    """The spec's top-level components and weights, in order (for ``trl.reward_weights``)."""
    funcs = _funcs(per_component=True)
    return [(fn.__name__, w) for fn, w in zip(funcs, funcs.weights, strict=True)]


def __getattr__(name: str) -> Any:
    if name == "reward":
        [whole] = _funcs(per_component=False)
        return whole
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


if __name__ == "__main__":
    import sys

    try:
        pairs = weights()
    except RefereeError as exc:  # a missing or bad spec: one line, no traceback
        sys.exit(f"error: {exc}")
    print("trl:\n  reward_funcs:")
    for name, _ in pairs:
        print(f"    - {component.__name__}.{name}")
    print(f"  reward_weights: [{', '.join(f'{w:g}' for _, w in pairs)}]")
