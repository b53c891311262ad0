"""The backend table: backends chosen by name, each with options checked by its own model."""

from __future__ import annotations

import inspect
import re
import typing
from typing import Any, Literal

import pytest

from referee.verifiers.sandbox import (
    BACKENDS,
    Backend,
    BackendOptions,
    DockerOptions,
    Job,
    LocalOptions,
    LocalSandbox,
    Pipelining,
    RunResult,
    Sandbox,
    SandboxSession,
    get_sandbox,
    sandbox_options,
)
from referee.verifiers.sandbox.docker import DockerSandbox


def test_the_table_holds_the_built_in_backends() -> None:
    assert set(BACKENDS) == set(typing.get_args(Backend))
    for name, model in BACKENDS.items():
        assert model().backend == name


@pytest.mark.parametrize(
    ("model", "sandbox"), [(LocalOptions, LocalSandbox), (DockerOptions, DockerSandbox)]
)
def test_options_are_the_backends_arguments(
    model: type[BackendOptions], sandbox: type[Any]
) -> None:
    # Each option is an argument of the backend's class, with the same default.
    arguments = inspect.signature(sandbox).parameters
    for name, field in model.model_fields.items():
        if name != "backend":
            assert arguments[name].default == field.default, name


@pytest.mark.parametrize(
    ("value", "options", "expected"),
    [
        (None, {}, LocalOptions()),
        ("local", {"workers": None}, LocalOptions()),  # None: not given
        ("docker", {"runtime": "runsc"}, DockerOptions(runtime="runsc")),
        ({"backend": "docker", "pids": 64}, {}, DockerOptions(pids=64)),
        ({"isolation": "bwrap"}, {"workers": 2}, LocalOptions(isolation="bwrap", workers=2)),
        (
            LocalOptions(workers=2),
            {"isolation": "process"},
            LocalOptions(workers=2, isolation="process"),
        ),
        (DockerOptions(workers=2), {"workers": 2}, DockerOptions(workers=2)),  # agreeing twice
    ],
)
def test_sandbox_options(value: Any, options: dict[str, Any], expected: BackendOptions) -> None:
    assert sandbox_options(value, **options) == expected


@pytest.mark.parametrize(
    ("value", "options", "message"),
    [
        (
            "docker",
            {"isolation": "bwrap"},
            "isolation is an option of the local backend, not docker",
        ),
        (
            {"backend": "local", "runtime": "runsc"},
            {},
            "runtime is an option of the docker backend, not local",
        ),
        (
            {"recycle": 3},
            {},
            "recycle is not an option of the local sandbox backend (it takes: workers,",
        ),
        (
            {"backend": "docker", "pids": "many"},
            {},
            "sandbox option pids of the docker backend: Input should",
        ),
        ({"backend": 3}, {}, "unknown sandbox backend 3; the backends are docker, local"),
        ({"workers": 2}, {"workers": 3}, "sandbox option workers is given twice: 2 and 3"),
        (["local"], {}, "sandbox must be a backend name (docker, local) or a mapping"),
    ],
)
def test_sandbox_options_errors(value: Any, options: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        sandbox_options(value, **options)


class _Echo:
    """A backend of one's own: it runs nothing, it says what it was asked."""

    def __init__(self, greeting: str) -> None:
        self.greeting = greeting

    def run(self, job: Job) -> RunResult:
        return RunResult(0, None, False, False, self.greeting.encode(), b"", False, False, 0.0)

    def session(self, job: Job, call_timeout: float | None = None) -> SandboxSession:
        raise NotImplementedError

    def close(self) -> None:
        pass


class _EchoOptions(BackendOptions):
    backend: Literal["echo"] = "echo"
    greeting: str = "hello"

    def create(self) -> Sandbox:
        return _Echo(self.greeting)


def test_a_new_backend_is_one_table_entry(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(BACKENDS, "echo", _EchoOptions)
    box = get_sandbox("echo", greeting="hi")
    assert isinstance(box, Sandbox) and box.run(Job(source="")).stdout == b"hi"
    assert get_sandbox({"backend": "echo", "greeting": "hi"}) is box  # one per options
    assert get_sandbox(_EchoOptions(greeting="hi")) is box
    assert get_sandbox("echo") is not box
    with pytest.raises(
        ValueError, match="workers is an option of the local and docker backends, not echo"
    ):
        get_sandbox("echo", workers=2)


def test_the_pool_sessions_pipeline() -> None:
    session = get_sandbox().session(Job(source="def f(x):\n    return x\n"), 5)
    try:
        assert isinstance(session, Pipelining)
        assert session.pipeline("f", [([1], {}), ([2], {})]) == 2
        assert [session.call("f", [1]), session.call("f", [2])] == [1, 2]
    finally:
        session.close()
