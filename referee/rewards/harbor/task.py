"""A Harbor task folder as referee reads it (the fields of Harbor's ``TaskConfig`` it uses)."""

from __future__ import annotations

import os
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from referee.errors import NotApplicable, RewardError

__all__ = ["HarborTaskSpec", "read_task"]

_ENV_VAR = re.compile(r"\$\{(\w+)(?::-([^}]*))?\}")


@dataclass(frozen=True)
class HarborTaskSpec:
    """A Harbor task as referee reads it (the fields of Harbor's ``TaskConfig`` it uses).

    Attributes:
        name: ``[task] name``, else the folder's name.
        path: The task folder.
        context: The build context (``environment/``), when it has a Dockerfile.
        docker_image: ``[environment] docker_image``: a prebuilt image (wins over the
            Dockerfile, as in Harbor).
        workdir: ``[environment] workdir``; None: the image's ``WORKDIR``.
        verifier_timeout: ``[verifier] timeout_sec`` (Harbor's default: 600).
        verifier_env: ``[verifier] env``, ``${VAR}`` and ``${VAR:-default}`` resolved here.
        verifier_user: ``[verifier] user``; None: the image's user.
        build_timeout: ``[environment] build_timeout_sec`` (default 600).
        memory_mb: ``[environment] memory_mb``, a container limit where set.
        cpus: ``[environment] cpus``, a container limit where set.
        test_script: The test script, ``tests/test.sh``.
    """

    name: str
    path: Path
    context: Path | None
    docker_image: str | None
    workdir: str | None
    verifier_timeout: float
    verifier_env: Mapping[str, str]
    verifier_user: str | None
    build_timeout: float
    memory_mb: int | None
    cpus: float | None
    test_script: Path


def _table(config: Mapping[str, Any], key: str, where: Path) -> Mapping[str, Any]:
    value = config.get(key, {})
    if not isinstance(value, Mapping):
        raise RewardError(f"{where}: [{key}] must be a table, got {type(value).__name__}")
    return value


def _number(table: Mapping[str, Any], key: str, default: float | None, where: str) -> Any:
    value = table.get(key, default)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
        raise RewardError(f"{where}.{key} must be a positive number, got {value!r}")
    return value


def _resolve(value: str) -> str:
    return _ENV_VAR.sub(lambda m: str(os.environ.get(m.group(1), m.group(2) or "")), value)


def read_task(path: str | Path) -> HarborTaskSpec:
    """Read the Harbor task in folder `path`.

    Raises:
        NotApplicable: `path` is not a task folder (no ``task.toml``, or no test script).
        RewardError: ``task.toml`` does not parse, or a field has the wrong type.
    """
    root = Path(path)
    config_path = root / "task.toml"
    if not config_path.is_file():
        raise NotApplicable(f"{root} is not a Harbor task: it has no task.toml")
    try:
        config = tomllib.loads(config_path.read_text())
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise RewardError(f"{config_path}: {exc}") from None
    task = _table(config, "task", config_path)
    env = _table(config, "environment", config_path)
    verifier = _table(config, "verifier", config_path)
    where = f"{config_path}: "
    name = task.get("name") or root.resolve().name
    image = env.get("docker_image")
    workdir = env.get("workdir")
    for key, value in (("environment.docker_image", image), ("environment.workdir", workdir)):
        if value is not None and not isinstance(value, str):
            raise RewardError(f"{where}{key} must be a string, got {value!r}")
    if workdir is not None and not workdir.startswith("/"):
        raise RewardError(f"{where}environment.workdir must be an absolute path: {workdir!r}")
    raw_env = verifier.get("env", {})
    if not isinstance(raw_env, Mapping) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in raw_env.items()
    ):
        raise RewardError(f"{where}verifier.env must map names to strings, got {raw_env!r}")
    user = verifier.get("user")
    context = root / "environment"
    has_dockerfile = (context / "Dockerfile").is_file()
    if image is None and not has_dockerfile:
        raise NotApplicable(
            f"{root}: neither environment/Dockerfile nor [environment] docker_image in task.toml"
        )
    script = root / "tests" / "test.sh"
    if not script.is_file():
        raise NotApplicable(f"{root}: no tests/test.sh")
    return HarborTaskSpec(
        name=str(name),
        path=root,
        context=context if has_dockerfile else None,
        docker_image=image,
        workdir=workdir,
        verifier_timeout=float(_number(verifier, "timeout_sec", 600.0, where + "verifier")),
        verifier_env={k: _resolve(v) for k, v in raw_env.items()},
        verifier_user=None if user is None else str(user),
        build_timeout=float(_number(env, "build_timeout_sec", 600.0, where + "environment")),
        memory_mb=_number(env, "memory_mb", None, where + "environment"),
        cpus=_number(env, "cpus", None, where + "environment"),
        test_script=script,
    )
