"""referee's reward functions loaded by Axolotl's own code, from the example config.

Axolotl 0.19 is installed ``--no-deps`` (its requirements pin trl 1.9 and a CUDA torch). Its
GRPO module imports ``trl.experimental.prm.PRMConfig``, which trl 1.16 (our trainers extra) no
longer has: the test gives that one class an empty stand-in before importing Axolotl. Everything
else, the loader that turns ``trl.reward_funcs`` into functions included, is Axolotl's code.
"""

from __future__ import annotations

import asyncio
import importlib
import json
import sys
import types
from pathlib import Path
from typing import Any

import pytest
import yaml

import referee
from referee import Rollout

ROOT = Path(__file__).resolve().parents[2]
CONFIG = ROOT / "examples" / "axolotl" / "grpo.yaml"
SPEC = ROOT / "examples" / "verl" / "spec.yaml"
ROWS = [json.loads(line) for line in (ROOT / "examples/axolotl/extraction.jsonl").open()]


def _axolotl() -> Any:
    pytest.importorskip("axolotl", reason="axolotl is not installed (make install adds it)")
    if "trl.experimental.prm" not in sys.modules:
        try:
            importlib.import_module("trl.experimental.prm")
        except ModuleNotFoundError:  # trl >= 1.1x dropped it; Axolotl 0.19 imports it
            stand_in = types.ModuleType("trl.experimental.prm")
            stand_in.PRMConfig = type("PRMConfig", (), {})  # type: ignore[attr-defined]
            sys.modules[stand_in.__name__] = stand_in
    from axolotl.core.trainers.grpo import GRPOStrategy
    from axolotl.utils.dict import DictDefault

    return GRPOStrategy, DictDefault


@pytest.fixture
def axolotl(monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.setenv("REFEREE_SPEC", str(SPEC))
    monkeypatch.delenv("REFEREE_REFERENCE", raising=False)
    return _axolotl()


COMPLETIONS = [
    json.dumps(ROWS[0]["reference"]),  # right
    '{"company": "Acme", "amount": 1, "date": "2020-01-01", "provinces": []}',  # wrong fields
    "not json",  # fails the gate
    json.dumps(ROWS[1]["reference"]) + "\n",
]
PROMPTS = [ROWS[0]["prompt"]] * 3 + [ROWS[1]["prompt"]]
REFERENCES = [ROWS[0]["reference"]] * 3 + [ROWS[1]["reference"]]


def call(fn: Any) -> list[float | None]:
    out = fn(prompts=PROMPTS, completions=COMPLETIONS, completion_ids=None, reference=REFERENCES)
    return asyncio.run(out) if asyncio.iscoroutine(out) else out  # type: ignore[no-any-return]


def expected() -> list[referee.Score]:
    rollouts = [Rollout(prompt=p, completion=c, reference=r)
                for p, c, r in zip(PROMPTS, COMPLETIONS, REFERENCES, strict=True)]  # fmt: skip
    return referee.score(referee.load(SPEC), rollouts)


def test_the_example_config_loads_referee_through_axolotl(axolotl: Any) -> None:
    strategy, dict_default = axolotl
    cfg = dict_default(yaml.safe_load(CONFIG.read_text()))
    [funcs] = strategy.set_trainer_args(cfg)  # Axolotl's own loop over trl.reward_funcs
    [fn] = funcs
    values = call(fn)
    assert values == [s.value for s in expected()]
    assert values[0] == 1.0  # a perfect answer
    assert values[2] == 0.0  # a failed gate


def test_one_function_per_component_with_the_spec_weights(axolotl: Any) -> None:
    strategy, _ = axolotl
    from referee.backends import axolotl as referee_axolotl

    assert referee_axolotl.weights() == [("valid", 0.2), ("fields", 0.8)]
    scores = expected()
    for name, _ in referee_axolotl.weights():
        fn = strategy.get_reward_func(f"referee.backends.axolotl.component.{name}")
        assert fn.__name__ == name
        assert call(fn) == [s.components.get(name) for s in scores]


def test_the_printed_config_block() -> None:
    import os
    import subprocess

    out = subprocess.run([sys.executable, "-m", "referee.backends.axolotl"], check=True,
                         capture_output=True, text=True,
                         env={**os.environ, "REFEREE_SPEC": str(SPEC)}).stdout  # fmt: skip
    block = yaml.safe_load(out)
    assert block == {"trl": {
        "reward_funcs": ["referee.backends.axolotl.component.valid",
                         "referee.backends.axolotl.component.fields"],
        "reward_weights": [0.2, 0.8],
    }}  # fmt: skip


def test_the_config_block_without_a_spec_is_one_line_naming_the_variable() -> None:
    import os
    import subprocess

    env = {k: v for k, v in os.environ.items() if k != "REFEREE_SPEC"}
    done = subprocess.run([sys.executable, "-m", "referee.backends.axolotl"],
                          capture_output=True, text=True, env=env)  # fmt: skip
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert done.stderr.startswith("error: referee.backends.axolotl: set REFEREE_SPEC")


def test_clear_errors(axolotl: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    strategy, _ = axolotl
    with pytest.raises(AttributeError, match="no top-level component 'nope'; it has: valid"):
        strategy.get_reward_func("referee.backends.axolotl.component.nope")
    monkeypatch.delenv("REFEREE_SPEC")
    with pytest.raises(referee.SpecError, match="set REFEREE_SPEC to your spec file"):
        strategy.get_reward_func("referee.backends.axolotl.reward")
