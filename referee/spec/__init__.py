"""Spec files: the portable form of a reward (YAML or JSON), turned into `Reward` objects.

A spec is either one reward::

    type: math_answer
    timeout: 5

or a combination of named components, each a reward (or a combination) with its own weight::

    name: extraction
    combine: weighted            # weighted | mean | min | max | product | cascade
    on_failure: fail             # a component with no value: fail | omit | value
    components:
      valid:  {type: json_schema, schema_file: release.schema.json, weight: 0.2, gate: true}
      fields: {type: field_match, fields: {company: text, amount: {number: {rel_tol: 0.01}}},
               weight: 0.8}
      judge:  {type: rubric_judge, rubric: helpfulness, weight: 0.1, on_failure: omit}

``on_failure`` (with ``failure_value``) on a combination is the default of its components; on
a component it is that component's own (see `referee.compose`). On a nested combination it is
both: the default of its own components, and what its parent does where it gives no value.
``on_none: skip | fail | value`` (with ``none_value``) is the deprecated spelling of a
combination's ``on_failure: omit | fail | value`` (with ``failure_value``): it still loads,
with a `FutureWarning` naming the file, the key and the new spelling.

Any reward or combination may also take ``scale``, ``offset`` and ``clip: [low, high]``, and
``deadline``: the seconds one rollout may take through it before it is stopped (default
`referee.deadline.DEFAULT_TIMEOUT` per reward, or one derived from the type's own options: see
`RewardBase.default_deadline`); a sync check then scores 0 with the reason
(``fault: timeout``, the policy's verdict), an async reward (a judge) ``Failure("timeout")``.
A combination's ``deadline`` bounds the whole of a rollout's inline scoring; its components
must then all be sync. A reward's ``run_in: inline | thread | process`` says where its check runs
(`referee.workers.RunIn`; only a check type can run in a thread or a process). ``timeout`` is
a type's own option where the type declares one (``math_answer``, the code rewards, a judge's
client); elsewhere it is the deprecated spelling of ``deadline`` and loads with a
`FutureWarning`. A component
written as a bare string is a type with default options (``valid: json_valid``).
Options ending in ``_file`` that hold relative paths resolve against the spec file's folder,
as does the file a ``python`` reward names (``function: rewards.py:my_check``); a type that
resolves paths of its own reads the folder from its validation context (``spec_folder``). For
a spec given as a mapping, the folder is the current directory.

Errors name the file, the key path, what was found and what would be valid.
"""

from __future__ import annotations

import dataclasses
import difflib
import math
import os
import re
import typing
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, cast

import yaml
from pydantic import TypeAdapter, ValidationError

from referee._yaml import safe_load
from referee.compose import (
    FROM_ON_NONE,
    Combined,
    Component,
    FailurePolicy,
    Transform,
)
from referee.deadline import check_timeout
from referee.errors import SpecError
from referee.registry import lookup, registered_types
from referee.reward import CheckReward, Reward, RewardBase, is_sync
from referee.spec._locations import is_union_tag
from referee.spec._locations import more as more_errors
from referee.spec.model import COMBINE_KEYS as _COMBINE_KEYS
from referee.spec.model import COMPONENT_KEYS as _COMPONENT_KEYS
from referee.spec.model import MODES as _MODES
from referee.spec.model import NONE_POLICIES as _NONE_POLICIES
from referee.spec.model import POLICIES as _POLICIES
from referee.spec.model import POLICY_KEYS as _POLICY_KEYS
from referee.spec.model import REWARD_TYPES as _REWARD_TYPES
from referee.spec.model import TRANSFORM_KEYS as _TRANSFORM_KEYS
from referee.workers import RUN_IN, RunIn

__all__ = ["load", "read_spec"]


Path_ = tuple[str | int, ...]


def load(
    spec: str | os.PathLike[str] | Mapping[str, Any],
    *,
    edit: typing.Callable[[Mapping[str, Any]], Mapping[str, Any]] | None = None,
) -> Reward:
    """Build the reward a spec describes.

    Args:
        spec: A path to a YAML or JSON spec file, or the spec as a mapping.
        edit: Applied to the spec's mapping before it is built (a file's paths still resolve
            against its folder, and its errors still name it): how `referee audit-judge`
            asks a judge again with other seeds.

    Raises:
        SpecError: The spec is invalid; the message names the file, key path, what was
            found and what would be valid.

    Example:
        ```python
        reward = referee.load("specs/extraction.yaml")
        reward = referee.load({"type": "math_answer"})
        ```
    """
    if isinstance(spec, Mapping):
        data = edit(spec) if edit is not None else spec
        return _Loader("<mapping>", Path.cwd()).reward(data, (), "reward")
    path = Path(spec)
    data, text = read_spec(path)
    if edit is not None:
        data = edit(data)
    return _Loader(str(path), path.resolve().parent, text).reward(data, (), path.stem)


def read_spec(path: Path) -> tuple[Mapping[str, Any], str]:
    """A spec file's mapping and its text, as `load` reads them.

    Raises:
        SpecError: The file cannot be read, is not YAML, or is not a mapping.
    """
    source = str(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise SpecError("spec file not found", source=source) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise SpecError(f"cannot read spec file: {exc}", source=source) from None
    try:
        data = safe_load(text, source)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{source}:{mark.line + 1}" if mark is not None else source
        raise SpecError(f"not valid YAML: {exc}", source=where) from None
    if not isinstance(data, Mapping):
        raise SpecError(
            "a spec must be a mapping",
            source=source,
            found=data,
            expected="keys such as 'type' or 'combine' and 'components'",
        )
    return data, text


def _is_finite(value: float) -> bool:
    try:
        return math.isfinite(value)
    except OverflowError:  # an integer past float range (10**400)
        return False


_adapters: dict[type[Any], TypeAdapter[Any]] = {}


def _adapter(cls: type[Any]) -> TypeAdapter[Any]:
    adapter = _adapters.get(cls)
    if adapter is None:
        adapter = _adapters[cls] = TypeAdapter(cls)
    return adapter


def _option_names(cls: type[Any]) -> list[str]:
    if dataclasses.is_dataclass(cls):
        return [f.name for f in dataclasses.fields(cls) if f.init and f.name != "name"]
    return []


def _reward_options(cls: type[Any]) -> tuple[str, ...]:
    """The options of a reward type that are rewards themselves (fields typed `Reward`)."""
    if not dataclasses.is_dataclass(cls):
        return ()
    hints = typing.get_type_hints(cls)
    return tuple(f.name for f in dataclasses.fields(cls) if hints.get(f.name) in _REWARD_TYPES)


def _client_options(allowed: Sequence[str]) -> frozenset[str]:
    """The judge client's options a type takes flat beside its own: those of `JudgeClient`
    where it has a ``client`` option (a judge), else none. Only a judge imports the judges."""
    if "client" not in allowed:
        return frozenset()
    from referee.judges.options import CLIENT_OPTIONS

    return CLIENT_OPTIONS


class _Loader:
    def __init__(self, source: str, base: Path, text: str = "") -> None:
        self.source = source
        self.base = base
        self.text = text
        self._warned: dict[str, int] = {}  # deprecated key -> times warned about

    def _line_of(self, key: str) -> int:
        """The line of the next `key:` in the spec's text not yet warned about (0: unknown):
        the loader meets combinations in the order they are written."""
        nth = self._warned.get(key, 0)
        self._warned[key] = nth + 1
        pattern = re.compile(rf"""^\s*["']?{key}["']?\s*:""")
        lines = [i for i, line in enumerate(self.text.splitlines(), 1) if pattern.match(line)]
        return lines[nth] if nth < len(lines) else 0

    def error(
        self, message: str, path: Path_, found: Any = None, expected: str | None = None
    ) -> SpecError:
        return SpecError(message, source=self.source, path=path, found=found, expected=expected)

    def reward(self, data: Mapping[str, Any], path: Path_, name: str) -> Reward:
        name = str(data.get("name", name))
        transform = {k: data[k] for k in _TRANSFORM_KEYS if k in data}
        body = {k: v for k, v in data.items() if k not in _TRANSFORM_KEYS}
        if "components" in body or "combine" in body:
            reward: Reward = self.combination(body, path, name)
        elif "type" in body:
            reward = self.leaf(body, path, name)
        else:
            raise self.error(
                "a reward needs 'type' (one reward) or 'components' (a combination)",
                path,
                found=sorted(data),
                expected="type: <reward type> or combine: ... with components: {...}",
            )
        return self.transform(reward, transform, path) if transform else reward

    def leaf(self, data: Mapping[str, Any], path: Path_, name: str) -> Reward:
        kind = data["type"]
        cls = lookup(kind) if isinstance(kind, str) else None
        if cls is None:
            known = registered_types()
            close = difflib.get_close_matches(str(kind), known, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise self.error(
                f"unknown reward type{hint}",
                (*path, "type"),
                found=kind,
                expected=f"one of {', '.join(known)}",
            )
        options = {k: v for k, v in data.items() if k not in {"type", "name", "description"}}
        self.finite_options(options, path)
        for key in _reward_options(cls):
            # Options typed as rewards (final_answer's `reward`) load as rewards.
            if isinstance(options.get(key), Mapping):
                options[key] = self.reward(options[key], (*path, key), key)
        allowed = _option_names(cls)
        own = {*allowed, *_client_options(allowed)}
        deadline = run_in = None
        if "deadline" in options and "deadline" not in own:
            deadline = self.seconds(options.pop("deadline"), path, "deadline")
        if "timeout" in options and "timeout" not in own:  # the old spelling of deadline
            deadline = self.old_timeout(options.pop("timeout"), deadline, path)
        if "run_in" in options and "run_in" not in own:
            run_in = self.run_in(options.pop("run_in"), path)
        for key, value in options.items():
            if key.endswith("_file") and isinstance(value, str) and not os.path.isabs(value):
                options[key] = str(self.base / value)
        if allowed and "name" in {f.name for f in dataclasses.fields(cls)}:
            options["name"] = name
        try:
            # The spec's folder, for a type that resolves paths of its own (python's function)
            context = {"spec_folder": self.base}
            reward = _adapter(cls).validate_python(options, context=context)
        except ValidationError as exc:
            raise self._from_pydantic(exc, path, kind, allowed) from None
        except (TypeError, ValueError) as exc:
            raise self.error(f"invalid options for {kind}: {exc}", path) from None
        if not isinstance(reward, Reward):
            raise self.error(
                f"type {kind!r} does not build a Reward", (*path, "type"), found=reward
            )
        if run_in is not None and run_in != "inline" and not isinstance(reward, CheckReward):
            # Asked of what was built: `python` builds a check or not, by what it names.
            what = kind if isinstance(reward, cls) else f"{kind} ({type(reward).__name__})"
            raise self.error(
                f"{what} runs on the event loop (it waits, it does not compute): only a check "
                "type runs in a thread or a process",
                (*path, "run_in"),
                found=run_in,
                expected="run_in: inline (or leave it out)",
            )
        if deadline is not None or run_in is not None:
            if not isinstance(reward, RewardBase):
                key = "deadline" if deadline is not None else "run_in"
                raise self.error(
                    f"type {kind!r} takes no {key} (its class bounds its own scoring)",
                    (*path, key),
                )
            if deadline is not None:
                reward.deadline = deadline
            if run_in is not None:
                reward.run_in = run_in
        return cast(Reward, reward)

    def seconds(self, value: Any, path: Path_, key: str) -> float | None:
        """A spec's ``deadline`` (or its old spelling): seconds, positive."""
        try:
            return check_timeout(value, key)
        except ValueError:
            raise self.error(
                f"{key} must be a positive number of seconds",
                (*path, key),
                found=value,
                expected="deadline: 2",
            ) from None

    def old_timeout(self, value: Any, deadline: float | None, path: Path_) -> float | None:
        """``timeout`` where it can only mean the deadline: its value, with a warning."""
        if deadline is not None:
            raise self.error(
                "give deadline alone: timeout is its deprecated spelling here",
                (*path, "timeout"),
                found=value,
                expected="deadline: ...",
            )
        seconds = self.seconds(value, path, "timeout")
        where = ".".join(str(p) for p in (*path, "timeout"))
        warnings.warn_explicit(
            f"{self.source}: {where}: timeout as the deadline is deprecated; write deadline: "
            f"{value} (the same behaviour; timeout is a reward's own option where its type "
            "declares one)",
            FutureWarning,
            filename=self.source,
            lineno=self._line_of("timeout"),
        )
        return seconds

    def run_in(self, value: Any, path: Path_) -> RunIn:
        """A spec's ``run_in`` (whether the reward built can run there is asked of it)."""
        if value not in RUN_IN:
            raise self.error(
                "unknown run_in", (*path, "run_in"), found=value, expected=" | ".join(RUN_IN)
            )
        return cast(RunIn, value)

    def _from_pydantic(
        self, exc: ValidationError, path: Path_, kind: str, allowed: list[str]
    ) -> SpecError:  # the first error in full; the others, named, in `_more`
        errors = exc.errors()
        first = errors[0]
        loc = tuple(p for p in first["loc"] if not is_union_tag(p))
        more = more_errors(errors[1:], path)
        if first["type"] == "spec_option":
            # A type's own message and fix, at the key it names (python's function, options)
            ctx = first.get("ctx") or {}
            at = tuple(ctx.get("at") or ())
            found = first.get("input")
            if at and isinstance(found, Mapping):
                found = found.get(at[0], found)
                for key in at[1:]:
                    found = found.get(key) if isinstance(found, Mapping) else None
            return self.error(
                f"{kind}: {first['msg']}", (*path, *loc, *at), found=found,
                expected=ctx.get("expected") or None,
            )  # fmt: skip
        if first["type"] == "unexpected_keyword_argument" or first["type"] == "extra_forbidden":
            # (a judge takes its client's options flat too)
            known = {*allowed, *_client_options(allowed), *_COMPONENT_KEYS, "deadline", "run_in",
                     "timeout"}  # fmt: skip
            found = loc[-1] if loc else None
            close = difflib.get_close_matches(str(found), known, n=1) if found else []
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            return self.error(
                f"unknown option for {kind}{hint}{more}",
                (*path, *loc),
                found=found,
                expected=f"one of {', '.join(sorted(known))}",
            )
        message = first["msg"]
        if message.startswith("Value error, "):
            message = message[len("Value error, ") :]
        if first["type"] == "missing":
            return self.error(
                f"{kind} needs option {loc[-1]!r}{more}" if loc else f"missing option{more}",
                (*path, *loc),
            )
        return self.error(
            f"invalid value for {kind}{more}",
            (*path, *loc),
            found=first.get("input"),
            expected=message,
        )

    def combination(self, data: Mapping[str, Any], path: Path_, name: str) -> Reward:
        unknown = set(data) - _COMBINE_KEYS
        if unknown:
            raise self.error(
                "unknown key in a combination",
                (*path, sorted(unknown)[0]),
                found=sorted(unknown)[0],
                expected=f"one of {', '.join(sorted(_COMBINE_KEYS | _TRANSFORM_KEYS))}",
            )
        mode = data.get("combine", "weighted")
        if mode not in _MODES:
            close = difflib.get_close_matches(str(mode), _MODES, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise self.error(
                f"unknown combine mode{hint}", (*path, "combine"), found=mode,
                expected=" | ".join(_MODES),
            )  # fmt: skip
        on_failure, failure_value = self.failure_policy(data, path)
        raw = data.get("components")
        if not isinstance(raw, Mapping) or not raw:
            raise self.error(
                "components must be a non-empty mapping of name -> reward",
                (*path, "components"),
                found=raw,
                expected="components: {valid: {type: json_valid}, ...}",
            )
        components = [
            self.component(key, value, (*path, "components", key)) for key, value in raw.items()
        ]
        deadline = self.seconds(data.get("deadline"), path, "deadline")
        if "timeout" in data:
            deadline = self.old_timeout(data["timeout"], deadline, path)
        # Read before the try: a SpecError is a ValueError, and would lose its key path there.
        floor = self.number(data, "floor", 0.0, path)
        try:
            return Combined(
                components=components,
                mode=mode,
                on_failure=on_failure or "fail",
                failure_value=0.0 if failure_value is None else failure_value,
                floor=floor,
                name=name,
                deadline=deadline,
            )
        except ValueError as exc:
            slow = deadline is not None and not all(is_sync(c.reward) for c in components)
            key = "timeout" if "timeout" in data else "deadline"
            where, found = ((*path, key), deadline) if slow else (path, None)
            raise self.error(str(exc), where, found=found) from None

    def failure_policy(
        self, data: Mapping[str, Any], path: Path_
    ) -> tuple[FailurePolicy | None, float | None]:
        """A mapping's ``on_failure`` and ``failure_value`` (None where not given), or, on a
        combination, the deprecated ``on_none`` and ``none_value`` they replace (with a
        warning naming the file, the key and the new spelling)."""
        on_failure = data.get("on_failure")
        if on_failure is not None and on_failure not in _POLICIES:
            raise self.error(
                "unknown on_failure policy",
                (*path, "on_failure"),
                found=on_failure,
                expected=" | ".join(_POLICIES),
            )
        value = None
        if "failure_value" in data:
            value = self.number(data, "failure_value", 0.0, path)
        old = [k for k in ("on_none", "none_value") if k in data]
        if not old:
            return on_failure, value
        on_none = data.get("on_none")
        if "on_none" in data and on_none not in _NONE_POLICIES:
            raise self.error(
                "unknown on_none policy (on_none is deprecated: write on_failure)",
                (*path, "on_none"),
                found=on_none,
                expected=f"{' | '.join(_NONE_POLICIES)}; better, on_failure: "
                f"{' | '.join(_POLICIES)}",
            )
        for new, was in (("on_failure", "on_none"), ("failure_value", "none_value")):
            if new in data and was in data:
                raise self.error(
                    f"give {new} alone: {was} is its deprecated spelling",
                    (*path, was),
                    found=data[was],
                    expected=f"{new}: ...",
                )
        if "on_none" in data:
            on_failure = FROM_ON_NONE[str(on_none)]
        if "none_value" in data:
            value = self.number(data, "none_value", 0.0, path)
        spelled = [f"on_failure: {on_failure}"] if "on_none" in data else []
        if "none_value" in data:
            spelled.append(f"failure_value: {value!r}")
        where = ".".join(str(p) for p in (*path, old[0]))
        line = self._line_of(old[0])
        # Shown by default (a DeprecationWarning is not, outside __main__), at the spec's line.
        warnings.warn_explicit(
            f"{self.source}: {where}: {' and '.join(old)} is deprecated; write "
            f"{', '.join(spelled)} (the same behaviour). Where neither is given, a component "
            "that gives no value now fails the total (on_failure: fail); it was left out",
            FutureWarning,
            filename=self.source,
            lineno=line,
        )
        return on_failure, value

    def component(self, key: Any, value: Any, path: Path_) -> Component:
        if not isinstance(key, str) or not key:
            raise self.error("a component name must be a non-empty string", path, found=key)
        if isinstance(value, str):
            value = {"type": value}
        if not isinstance(value, Mapping):
            raise self.error(
                "a component must be a mapping or a reward type name",
                path,
                found=value,
                expected="{type: <reward type>, weight: <number>, ...}",
            )
        gate = value.get("gate", False)
        if not isinstance(gate, bool):
            raise self.error("gate must be true or false", (*path, "gate"), found=gate)
        weight = self.number(value, "weight", 1.0, path)
        threshold = self.number(value, "threshold", 1.0, path)
        on_failure, failure_value = self.failure_policy(
            {k: v for k, v in value.items() if k in _POLICY_KEYS}, path
        )
        body = {k: v for k, v in value.items() if k not in _COMPONENT_KEYS}
        if "components" in body or "combine" in body:
            # On a nested combination, on_failure is also the default of its own components.
            body.update({k: v for k, v in value.items() if k in _POLICY_KEYS})
        reward = self.reward(body, path, key)
        try:
            return Component(
                name=key,
                reward=reward,
                weight=weight,
                gate=gate,
                threshold=threshold,
                on_failure=on_failure,
                failure_value=failure_value,
            )
        except ValueError as exc:
            where = "on_failure" if on_failure is not None else "failure_value"
            raise self.error(str(exc), (*path, where), found=value.get(where)) from None

    def number(self, data: Mapping[str, Any], key: str, default: float, path: Path_) -> float:
        value = data.get(key, default)
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise self.error(f"{key} must be a number", (*path, key), found=value)
        if not _is_finite(value):
            # NaN poisons every total it enters (no comparison catches it) and an infinity
            # turns one into inf or NaN: a trainer would get no reward, or a silent NaN.
            raise self.error(
                f"{key} must be a finite number", (*path, key), found=value, expected=f"{key}: 1.0"
            )
        return float(value)

    def finite_options(self, options: Mapping[str, Any], path: Path_) -> None:
        """Refuse a NaN or an infinity anywhere in a reward's options, naming its key path."""
        stack: list[tuple[Path_, Any]] = [(path, options)]
        while stack:
            where, item = stack.pop()
            if isinstance(item, Mapping):
                stack.extend(((*where, str(k)), v) for k, v in item.items())
            elif isinstance(item, list):
                stack.extend(((*where, i), v) for i, v in enumerate(item))
            elif isinstance(item, float) and not math.isfinite(item):
                raise self.error(
                    "every number in a spec must be finite", where, found=item,
                    expected="a finite number",
                )  # fmt: skip

    def transform(self, reward: Reward, data: Mapping[str, Any], path: Path_) -> Reward:
        low = high = None
        if "clip" in data:
            clip = data["clip"]
            ok = isinstance(clip, Sequence) and not isinstance(clip, str) and len(clip) == 2
            if not ok or not all(
                c is None
                or (isinstance(c, (int, float)) and not isinstance(c, bool) and _is_finite(c))
                for c in clip
            ):
                raise self.error(
                    "clip must be [low, high] of finite numbers (either may be null)",
                    (*path, "clip"),
                    found=clip,
                    expected="clip: [0, 1]",
                )
            low, high = clip
        scale = self.number(data, "scale", 1.0, path)
        offset = self.number(data, "offset", 0.0, path)
        try:
            return Transform(
                reward=reward,
                scale=scale,
                offset=offset,
                low=low,
                high=high,
                name=reward.name,
            )
        except ValueError as exc:
            raise self.error(str(exc), (*path, "clip"), found=data.get("clip")) from None
