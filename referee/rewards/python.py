"""Your own Python reward, from a spec: ``type: python`` names a function or a class of yours.

``function: rewards.py:my_check`` (a file, relative to the spec's folder) or
``function: my_package.rewards:my_check`` (an importable module) names what scores:

- a function of a rollout, sync or async (plain, or decorated with `referee.reward`): it
  becomes a `PythonReward` (sync: a check, run in a worker process by default, like every
  ``@referee.reward`` function) or an `AsyncPythonReward` (on the event loop);
- a class: a `Reward` of yours (a `CheckReward`, `AsyncReward`, `GroupRewardBase` subclass,
  or any class satisfying `Reward`), built with the spec's ``options``, exactly as a plugin
  type would be; or a class whose instances are functions of a rollout;
- a `Reward` object (``my_reward = referee.load("base.yaml")`` in the file): a copy of it.

A file loads once per process, as a module of its own (`referee.rewards._imports`), so that
anything defined in it pickles by reference to it, and a function's reward pickles as its spec
(`function`, `options`) and finds the function again where it lands.

The spec is the user's and may name code; a rollout, or a request to `referee serve`, never
can (docs/threat-model.md).
"""

from __future__ import annotations

import copy
import dataclasses
import difflib
import inspect
import os
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, NamedTuple

from pydantic import ConfigDict, GetCoreSchemaHandler, TypeAdapter, ValidationError
from pydantic_core import PydanticCustomError, core_schema

from referee.errors import RewardError
from referee.function import AsyncFunctionReward, FunctionReward
from referee.registry import register
from referee.reward import AsyncReward, CheckReward, Reward, RewardResult
from referee.rewards._imports import ProblemError, Target, load_file, raised, resolve
from referee.rollout import Rollout
from referee.scores import Score
from referee.workers import RunIn

__all__ = ["AsyncPythonReward", "ProblemError", "PythonReward", "build", "load_file"]


def _short(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:60] + "..."


_ROLLOUT = object()  # stands for the rollout when a signature is checked


def _is_async(fn: Callable[..., Any]) -> bool:
    return inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(
        getattr(fn, "__call__", None)  # noqa: B004  (an instance with `async def __call__`)
    )


def _check_call(fn: Callable[..., Any], kwargs: Mapping[str, Any], label: str) -> None:
    """Refuse a function that cannot be called as ``fn(rollout, **options)``."""
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError):  # a builtin without a signature: its call will say
        return
    try:
        signature.bind(_ROLLOUT, **kwargs)
    except TypeError as exc:
        at = ("options",) if kwargs else ("function",)
        raise ProblemError(
            f"{label}{signature} cannot be called as {label}(rollout"
            + "".join(f", {k}=..." for k in kwargs)
            + f"): {exc}",
            "a function taking the rollout as its one positional argument; options are "
            "keyword arguments after it",
            at,
        ) from None


def _construct(cls: type[Any], options: Mapping[str, Any], name: str | None, label: str) -> Any:
    """An instance of a class of yours, from a spec's ``options``: validated by pydantic where
    the class is a dataclass (as a registered type's options are), called with them otherwise.
    A dataclass with a ``name`` field gets the spec's name unless the options give one."""
    kwargs = dict(options)
    fields: set[str] = set()
    if dataclasses.is_dataclass(cls):
        fields = {f.name for f in dataclasses.fields(cls) if f.init}
    if name is not None and "name" in fields and "name" not in kwargs:
        kwargs["name"] = name
    try:
        if fields:
            return TypeAdapter(cls).validate_python(kwargs)
        return cls(**kwargs)
    except ValidationError as exc:
        first = exc.errors()[0]
        loc = tuple(str(p) for p in first["loc"])
        if first["type"] in ("unexpected_keyword_argument", "extra_forbid", "extra_forbidden"):
            close = difflib.get_close_matches(loc[-1] if loc else "", sorted(fields), n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise ProblemError(
                f"{label} takes no option {loc[-1] if loc else '?'!r}{hint}",
                f"one of {', '.join(sorted(fields - {'name'})) or '(none)'}",
                ("options", *loc),
            ) from None
        message = first["msg"].removeprefix("Value error, ")
        raise ProblemError(
            f"invalid options for {label}: {message}", None, ("options", *loc)
        ) from None
    except (TypeError, ValueError) as exc:
        raise ProblemError(f"{label}(**options) raised {raised(exc)}", None, ("options",)) from None


class _Call(NamedTuple):
    """How a function reward calls its function, and the defaults its decorator gave."""

    fn: Callable[..., Any]
    kwargs: dict[str, Any]
    label: str
    file: str | None
    deadline: float | None
    run_in: RunIn | None


def _callable(target: Target, options: Mapping[str, Any], name: str | None) -> _Call:
    """What a function reward (`PythonReward`, `AsyncPythonReward`) calls for `target`."""
    obj, label = target.obj, target.label
    deadline = run_in = None
    kwargs = dict(options)
    if isinstance(obj, (FunctionReward, AsyncFunctionReward)):  # @referee.reward: its function
        decorated: FunctionReward | AsyncFunctionReward = obj
        obj, deadline, run_in = decorated.fn, decorated.deadline, decorated.run_in
    elif isinstance(obj, type):
        obj, kwargs = _construct(obj, options, name, label), {}
        if isinstance(obj, Reward):
            raise ProblemError(f"{label} is a Reward class: load it with referee.load (its spec)")
    elif isinstance(obj, Reward):
        raise ProblemError(f"{label} is a Reward: load it with referee.load (its spec)")
    if not callable(obj):
        raise ProblemError(
            f"{label} is not a function (it is {type(obj).__name__} {_short(obj)})",
            "a function of a rollout, a Reward class, or a Reward",
            ("function",),
        )
    _check_call(obj, kwargs, label)
    return _Call(obj, kwargs, label, target.file, deadline, run_in)


# --- the rewards ------------------------------------------------------------------------------


class _FunctionOfYours:
    """What `PythonReward` and `AsyncPythonReward` share: loading, messages, results."""

    name: str
    function: str
    options: dict[str, Any]
    deadline: float | None
    run_in: RunIn | None
    _call: _Call

    def _load(self, asynchronous: bool) -> None:
        target = resolve(self.function)
        # Where the function is a file's, the text says its absolute path from now on: the
        # reward pickles as it, and loads the same file wherever it lands.
        self.function = target.text
        call = _callable(target, self.options, self.name)
        if _is_async(call.fn) != asynchronous:
            which, other = (
                ("an async", "AsyncPythonReward")
                if asynchronous is False
                else ("a sync", "PythonReward")
            )
            raise ProblemError(f"{call.label} is {which} function: build {other}, or load "
                               "the spec (referee.load), which picks the class")  # fmt: skip
        self._call = call
        # A decorated function's own deadline and run_in, unless these are set.
        if self.deadline is None and call.deadline is not None:
            self.deadline = call.deadline
        if self.run_in is None and call.run_in is not None:
            self.run_in = call.run_in

    def _failed(self, exc: Exception) -> RewardError:
        return RewardError(f"{self._call.label} raised {raised(exc, self._call.file)}")

    def _result(self, result: Any) -> RewardResult:
        """What the function returned, as a reward result: a mapping is the shape
        `referee score` writes (``reward``, ``components``, ``reason``)."""
        if isinstance(result, Mapping):
            unknown = set(result) - {"reward", "components", "reason"}
            if unknown or "reward" not in result:
                raise RewardError(
                    f"{self._call.label} returned a mapping with keys {sorted(map(str, result))}"
                    ": return a number, a bool, None, a referee.Score, or {'reward': ..., "
                    "'components': {...}, 'reason': ...}"
                )
            components = result.get("components") or {}
            if not isinstance(components, Mapping):
                raise RewardError(f"{self._call.label} returned components that are no mapping")
            return Score(
                value=result["reward"],
                components=dict(components),
                reason=None if result.get("reason") is None else str(result["reason"]),
            )
        out: RewardResult = result
        return out


@register("python")
@dataclass(kw_only=True)
class PythonReward(_FunctionOfYours, CheckReward):
    """Your own Python function or class, named by a spec: no package or plugin needed.

    The function takes the rollout and returns a number, a bool, None (no score: a failure,
    never 0), a `referee.Score` (with components), or ``{"reward": ..., "components": {...}}``.
    It gets what a built-in gets: a deadline (``deadline``, or its ``@referee.reward``'s),
    ``run_in`` (a sync function runs in a worker process by default, killed at its deadline),
    pickling (it travels as its spec and reloads its file where it lands), and failures: an
    exception it raises is a Failure naming the function and the line, never a value. An async
    function becomes an `AsyncPythonReward` on the event loop; a Reward class is built with
    ``options`` and is the reward itself. The file loads once per process. A request to
    `referee serve` cannot name code: only the spec can.

    Attributes:
        function: What scores: ``<file>.py:<name>`` (a path relative to the spec's folder;
            for a spec given as a mapping, to the current directory) or
            ``<package.module>:<name>``. A function of a rollout (sync or async, plain or
            ``@referee.reward``), a Reward class, a class whose instances are functions of a
            rollout, or a Reward object.
        options: Keyword arguments: the function's, after the rollout
            (``my_check(rollout, **options)``), or the class's (``MyReward(**options)``,
            validated as a registered type's options are).

    Example:
        ```yaml
        type: python
        function: rewards.py:has_answer
        options: {tag: answer}
        deadline: 2
        ```

    Scores:
        ```yaml
        files:
          rewards.py: |
            import re


            def has_answer(rollout, tag):
                # 1.0 for a non-empty <tag>...</tag>, 0.5 for an empty one, else 0.0
                found = re.findall(rf"<{tag}>(.*?)</{tag}>", rollout.completion_text, re.S)
                if not found:
                    return 0.0
                return 1.0 if found[-1].strip() else 0.5
        rollouts:
          - prompt: What is 5 + 7? Put the answer in <answer></answer> tags.
            completion: The sum is 12. <answer>12</answer>
            value: 1.0
          - prompt: What is 5 + 7? Put the answer in <answer></answer> tags.
            completion: I am not sure. <answer> </answer>
            value: 0.5
          - prompt: What is 5 + 7? Put the answer in <answer></answer> tags.
            completion: The sum is 12.
            value: 0.0
        ```
    """

    default_run_in: ClassVar[RunIn] = "process"  # code referee did not write

    name: str = "python"
    function: str
    options: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self._load(asynchronous=False)

    def check(self, rollout: Rollout) -> RewardResult:
        call = self._call
        try:
            result = call.fn(rollout, **call.kwargs)
        except RewardError:
            raise  # NotApplicable and the like say what they mean
        except Exception as exc:
            raise self._failed(exc) from exc
        return self._result(result)

    @classmethod
    def __get_pydantic_core_schema__(
        cls, source: type[Any], handler: GetCoreSchemaHandler
    ) -> core_schema.CoreSchema:
        # A spec's options validate as `_Options` (the same keys), then build whatever the
        # function names: this class, `AsyncPythonReward`, or the user's own Reward.
        return core_schema.with_info_after_validator_function(_from_spec, handler(_Options))


@dataclass(kw_only=True)
class AsyncPythonReward(_FunctionOfYours, AsyncReward):
    """Your own async function of a rollout, named by a spec (`PythonReward` builds it).

    It runs on the event loop, under its deadline (``asyncio.timeout``); keep its computing
    short, or make it sync.

    Attributes:
        function: As `PythonReward`'s.
        options: As `PythonReward`'s.
    """

    kind: ClassVar[str] = "python"

    name: str = "python"
    function: str
    options: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self._load(asynchronous=True)

    async def evaluate(self, rollout: Rollout) -> RewardResult:
        call = self._call
        try:
            work: Awaitable[Any] = call.fn(rollout, **call.kwargs)
            result = await work
        except RewardError:
            raise
        except Exception as exc:
            raise self._failed(exc) from exc
        return self._result(result)


@dataclass(kw_only=True)
class _Options:
    """The options of ``type: python``, as a spec gives them (`PythonReward`'s fields)."""

    __pydantic_config__: ClassVar[ConfigDict] = ConfigDict(extra="forbid")

    name: str = "python"
    function: str
    options: dict[str, Any] = field(default_factory=dict)


_Options.__doc__ = PythonReward.__doc__  # the published schema describes the type with it


def _from_spec(spec: _Options, info: Any) -> Reward:
    """The reward a spec's ``type: python`` describes. A problem is a pydantic error that the
    loader reports at its key path (``function``, ``options.<key>``), with its fix."""
    folder = (info.context or {}).get("spec_folder") if info is not None else None
    try:
        return build(spec.function, spec.options, name=spec.name, folder=folder)
    except ProblemError as problem:
        raise PydanticCustomError(
            "spec_option",
            "{message}",
            {"message": problem.message, "expected": problem.expected or "",
             "at": list(problem.at)},
        ) from None  # fmt: skip


def build(
    function: str,
    options: Mapping[str, Any] | None = None,
    *,
    name: str = "python",
    folder: str | os.PathLike[str] | None = None,
) -> Reward:
    """The reward ``type: python`` builds: what `function` names, with `options`.

    Args:
        function: ``<file>.py:<name>`` or ``<package.module>:<name>``.
        options: Keyword arguments of the function (after the rollout) or of the class.
        name: The reward's name.
        folder: What a relative file path is relative to (default: the current directory).

    Raises:
        ProblemError: The function cannot be found, imported or called so (a `ValueError`;
            the spec loader reports it at its key path).
    """
    options = dict(options or {})
    base = None if folder is None else Path(folder)
    target = resolve(function, base)
    obj = target.obj
    if isinstance(obj, type) and _is_reward_class(obj):
        reward = _construct(obj, options, name, target.label)
        if not isinstance(reward, Reward):
            raise ProblemError(f"{target.label}(**options) is no Reward", None, ("function",))
        return reward
    if isinstance(obj, Reward) and not isinstance(obj, (FunctionReward, AsyncFunctionReward)):
        if options:
            raise ProblemError(f"{target.label} is a Reward object: it takes no options",
                               "options only where function names a function or a class",
                               ("options",))  # fmt: skip
        return _renamed(obj, name)
    call = _callable(target, options, name)
    cls: type[PythonReward] | type[AsyncPythonReward]
    cls = AsyncPythonReward if _is_async(call.fn) else PythonReward
    return cls(name=name, function=target.text, options=options)


def _is_reward_class(cls: type[Any]) -> bool:
    """A class whose instances are Rewards (it has the protocol's methods)."""
    return all(callable(getattr(cls, m, None)) for m in ("score", "score_batch"))


def _renamed(reward: Reward, name: str) -> Reward:
    """A copy of a Reward object the file holds (its deadline and run_in too), under the
    spec's name where it has a field for it: what the spec sets changes the copy only."""
    clone = copy.copy(reward)
    if dataclasses.is_dataclass(clone) and any(f.name == "name" for f in dataclasses.fields(clone)):
        try:
            clone.name = name
        except dataclasses.FrozenInstanceError:
            clone = dataclasses.replace(clone, name=name)
    return clone
