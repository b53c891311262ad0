"""Tiny random reward models at fixed paths, for tables of options that need a real model path
(`tests.support.options.OPTIONS`, and through it the hostile battery).

The paths are fixed so the tables stay plain data; `ensure` (called by ``conftest`` when the
session starts) builds the models there once per machine and version, importing torch only
then. Without torch and transformers, the options name an unreachable served model instead.
Tests of their own build theirs in ``tmp_path`` (`referee.models.testing.tiny_model`).
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import tempfile
from pathlib import Path
from typing import Literal

VERSION = "1"  # change it when the models' shape changes
ROOT = Path(tempfile.gettempdir()) / f"referee-test-models-{os.getuid()}-v{VERSION}"
REWARD_MODEL = str(ROOT / "reward-model")
PROCESS_REWARD_MODEL = str(ROOT / "process-reward-model")

_HAVE_TORCH = all(importlib.util.find_spec(m) for m in ("torch", "transformers"))
# Without torch, the tables name a served model on a closed port instead: a quick,
# deterministic Failure("judge"), as the judges' entries give.
_UNREACHABLE = {"api_base": "http://127.0.0.1:9", "model": "rm", "retries": 0}
REWARD_MODEL_OPTIONS = {"model": REWARD_MODEL} if _HAVE_TORCH else dict(_UNREACHABLE)
PROCESS_REWARD_MODEL_OPTIONS = (
    {"model": PROCESS_REWARD_MODEL} if _HAVE_TORCH else dict(_UNREACHABLE)
)


def ensure() -> None:
    """Build the models where they are missing (a no-op without torch, when the tables name
    a served model instead)."""
    if all(Path(p, "config.json").is_file() for p in (REWARD_MODEL, PROCESS_REWARD_MODEL)):
        return
    from referee.models.testing import tiny_model

    ROOT.mkdir(parents=True, exist_ok=True)
    heads: tuple[tuple[str, Literal["sequence", "token"]], ...] = (
        (REWARD_MODEL, "sequence"),
        (PROCESS_REWARD_MODEL, "token"),
    )
    for path, head in heads:
        if Path(path, "config.json").is_file():
            continue
        # Built beside it, then renamed into place: a concurrent session never sees half.
        staging = Path(tempfile.mkdtemp(dir=ROOT))
        try:
            tiny_model(staging / "model", head=head)
            os.replace(staging / "model", path)
        except ImportError:
            return  # no torch or transformers here
        except OSError:
            pass  # another session got there first
        finally:
            shutil.rmtree(staging, ignore_errors=True)
