"""The table of sandbox backends (name -> options model), and the sandboxes of a process."""

from __future__ import annotations

import atexit
import threading
import typing
from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError

from referee.verifiers.sandbox.base import BackendOptions, Sandbox
from referee.verifiers.sandbox.docker import DockerOptions
from referee.verifiers.sandbox.local import LocalOptions

__all__ = ["BACKENDS", "Backend", "get_sandbox", "sandbox_options"]

Backend = typing.Literal["local", "docker"]
"""The built-in backends' names. ``local``: bubblewrap namespaces on this machine
(`LocalSandbox`). ``docker``: containers on a Docker Engine
(`referee.verifiers.sandbox.docker.DockerSandbox`; ``pip install "referee[docker]"``)."""

BACKENDS: dict[str, type[BackendOptions]] = {
    "local": LocalOptions,
    "docker": DockerOptions,
}
"""Backend name -> its options model, whose `BackendOptions.create` starts the sandbox."""

_lock = threading.RLock()  # a backend may wrap another: its `create` may call get_sandbox
_shared: dict[BackendOptions, Sandbox] = {}


def sandbox_options(
    value: BackendOptions | str | Mapping[str, Any] | None = None, /, **options: Any
) -> BackendOptions:
    """Read sandbox options into the chosen backend's own model.

    Args:
        value: A backend's name, a mapping of its options with ``backend`` (default
            ``local``), options already read, or None (the default backend's defaults).
        **options: More options (None: not given), e.g. a reward's flat ``isolation=``; one
            also given in `value` must agree with it.

    Raises:
        ValueError: An unknown backend, an option the backend does not take, or a wrong
            value; the message names the option and the backend.

    Example:
        ```python
        sandbox_options({"backend": "docker", "runtime": "runsc"})  # DockerOptions(...)
        sandbox_options("local", isolation="bwrap")  # LocalOptions(isolation="bwrap")
        ```
    """
    given = {key: v for key, v in options.items() if v is not None}
    if isinstance(value, BackendOptions) and not given:
        return value
    data = _as_mapping(value)
    for key, v in given.items():
        if key in data and data[key] != v:
            raise ValueError(f"sandbox option {key} is given twice: {data[key]!r} and {v!r}")
        data[key] = v
    name = data.pop("backend", "local")
    model = BACKENDS.get(name) if isinstance(name, str) else None
    if model is None:
        raise ValueError(
            f"unknown sandbox backend {name!r}; the backends are {', '.join(sorted(BACKENDS))}"
        )
    for key in data:
        if key not in model.model_fields:
            raise ValueError(_not_an_option(key, name, model))
    try:
        return model(**data)
    except ValidationError as exc:
        error = exc.errors()[0]
        where = ".".join(str(part) for part in error["loc"])
        raise ValueError(
            f"sandbox option {where} of the {name} backend: {error['msg']}, got {error['input']!r}"
        ) from None


def _as_mapping(value: object) -> dict[str, Any]:
    if value is None:
        return {}
    if isinstance(value, str):
        return {"backend": value}
    if isinstance(value, BackendOptions):
        return {"backend": value.backend, **value.model_dump(exclude_unset=True)}
    if isinstance(value, Mapping):
        return {str(key): v for key, v in value.items()}
    raise ValueError(
        f"sandbox must be a backend name ({', '.join(sorted(BACKENDS))}) or a mapping of "
        f"its options, got {value!r}"
    )


def _not_an_option(key: str, name: str, model: type[BackendOptions]) -> str:
    others = [other for other, m in BACKENDS.items() if other != name and key in m.model_fields]
    if others:
        backends = "backends" if len(others) > 1 else "backend"
        return f"{key} is an option of the {' and '.join(others)} {backends}, not {name}"
    takes = ", ".join(field for field in model.model_fields if field != "backend")
    return f"{key} is not an option of the {name} sandbox backend (it takes: {takes})"


def get_sandbox(
    backend: BackendOptions | str | Mapping[str, Any] | None = "local", /, **options: Any
) -> Sandbox:
    """The process-wide sandbox for these options, started on first use.

    Args:
        backend: A backend's name, its options (a mapping or a `BackendOptions`), or None
            (the default backend); see `sandbox_options`.
        **options: The backend's options, e.g. ``workers=4`` (None: the default).

    Raises:
        ValueError: An option the backend does not take, or a wrong value.
        SandboxError: The sandbox cannot be started here (the message says why).
    """
    key = sandbox_options(backend, **options)
    with _lock:
        sandbox = _shared.get(key)
        if sandbox is None:
            sandbox = _shared[key] = key.create()
        return sandbox


@atexit.register
def _close_shared() -> None:
    with _lock:
        for sandbox in _shared.values():
            sandbox.close()
        _shared.clear()
