"""The examples run: the TRL script on a tiny local model, verl's data script and command line."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from importlib import resources
from pathlib import Path

import pytest

pytest.importorskip("trl", reason="the trl extra is not installed")

import referee
from referee.backends import verl as rv
from referee.rollouts import RowOk, read_rollouts
from tests.support import tiny
from tests.support.extras import needs

pytestmark = needs("verl", reason="the verl extra is not installed")

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
DEMO = resources.files("referee") / "data" / "demo"


def test_trl_grpo_example_trains_and_reports_its_share(tmp_path: Path) -> None:
    model = tiny.save(tmp_path / "model")
    run = subprocess.run(
        [sys.executable, str(EXAMPLES / "trl_grpo.py"), "--model", str(model), "--steps", "2",
         "--num-generations", "4", "--batch-size", "4", "--max-completion-length", "16",
         "--output-dir", str(tmp_path / "out")],
        capture_output=True, text=True, timeout=300, cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )  # fmt: skip
    assert run.returncode == 0, run.stderr[-3000:]
    assert "trained 2 steps" in run.stdout
    assert re.search(r"time in referee's reward function: [\d.]+ s, [\d.]+% of", run.stdout)


def test_verl_prepare_writes_rows_compute_score_scores_like_referee(tmp_path: Path) -> None:
    import pyarrow.parquet as pq

    subprocess.run(
        [sys.executable, str(EXAMPLES / "verl" / "prepare.py"), "--out", str(tmp_path)],
        check=True, capture_output=True, timeout=120,
    )  # fmt: skip
    rows = pq.read_table(tmp_path / "train.parquet").to_pylist()
    rows += pq.read_table(tmp_path / "test.parquet").to_pylist()
    with resources.as_file(DEMO / "extraction.jsonl") as path:
        demo = [r.rollout for r in read_rollouts(path, format="canonical") if isinstance(r, RowOk)]
    with resources.as_file(DEMO / "extraction.yaml") as spec_path:
        reward = referee.load(str(spec_path))
    by_prompt = {row["extra_info"]["prompt"]: row for row in rows}
    assert len(by_prompt) == len({r.prompt_text for r in demo})
    spec = str(EXAMPLES / "verl" / "spec.yaml")
    for rollout, want in zip(demo, referee.score(reward, demo), strict=True):
        row = by_prompt[rollout.prompt_text]
        got = rv.compute_score(
            row["data_source"], rollout.completion_text, row["reward_model"]["ground_truth"],
            row["extra_info"], spec=spec,
        )  # fmt: skip
        assert got["score"] == want.value, rollout.id


def overrides(script: Path, commented: bool = False) -> list[str]:
    """The key=value overrides of run.sh's main_ppo command (or of its commented variant)."""
    text = script.read_text()
    if commented:
        lines = [ln.lstrip("# ").rstrip(" \\") for ln in text.splitlines()
                 if re.match(r"#\s+\"?\+?reward\.", ln)]  # fmt: skip
    else:
        body = text.split("python3 -m verl.trainer.main_ppo", 1)[1].split('"$@"', 1)[0]
        lines = [ln.strip().rstrip("\\").strip() for ln in body.splitlines() if ln.strip()]
    env = {"HERE": str(script.parent), "DATA": "/data", "MODEL": "some/model"}
    out = []
    for line in lines:
        for name, value in env.items():
            line = line.replace(f"${name}", value)
        out.extend(shlex.split(line))
    return out


def compose(extra: list[str]):  # type: ignore[no-untyped-def]
    import verl
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir

    config_dir = os.path.join(os.path.dirname(verl.__file__), "trainer", "config")
    with initialize_config_dir(config_dir=config_dir, version_base=None):
        return hydra_compose(config_name="ppo_trainer", overrides=extra)


def test_verl_command_line_keys_reach_referee() -> None:
    from verl.trainer.ppo.reward import get_custom_reward_fn, resolve_reward_manager_cls

    script = EXAMPLES / "verl" / "run.sh"
    config = compose(overrides(script))
    assert config.custom_reward_function.path is None  # the legacy key, which verl 0.9 ignores
    fn = get_custom_reward_fn(config)
    assert fn is not None and fn.func.__name__ == "_call_with_kwargs_async"
    assert fn.args[0] is rv.compute_score_async
    assert fn.args[1] == {"spec": str(script.parent / "spec.yaml")}

    grouped = compose([*overrides(script), *overrides(script, commented=True)])
    assert resolve_reward_manager_cls(grouped) is rv.RefereeRewardLoopManager
    assert rv.options_of(grouped)["spec"] == str(script.parent / "group_spec.yaml")


def test_unsloth_example_compiles_and_its_reward_part_imports() -> None:
    """Unsloth cannot run here (it needs a GPU): the script compiles, and what it takes from
    referee and TRL exists (its reward call is TRL's own, see the script's docstring)."""
    source = (EXAMPLES / "unsloth_grpo.py").read_text()
    compile(source, "unsloth_grpo.py", "exec")
    imports = [ln for ln in source.splitlines() if ln.startswith(("from trl", "from referee"))]
    assert len(imports) == 2
    exec("\n".join(imports), {})
