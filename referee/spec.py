"""Spec files: the portable form of a reward (YAML or JSON), turned into `Reward` objects.

A spec is either one reward::

    type: math_answer
    timeout: 5

or a combination of named components, each a reward (or a combination) with its own weight::

    name: extraction
    combine: weighted            # weighted | mean | min | max | product | cascade
    on_none: skip                # skip | fail | value (see referee.compose)
    components:
      valid:  {type: json_schema, schema_file: release.schema.json, weight: 0.2, gate: true}
      fields: {type: field_match, fields: {company: text, amount: {number: {rel_tol: 0.01}}},
               weight: 0.8}

Any reward or combination may also take ``scale``, ``offset`` and ``clip: [low, high]``, and
``timeout``: the seconds one rollout may take through it before it is stopped and scores
``Failure("timeout")`` (default `referee.deadline.DEFAULT_TIMEOUT` per reward). A type with a
``timeout`` option of its own (``math_answer``, the code rewards, a judge's client) keeps that
option's meaning (see `RewardBase.deadline_seconds`). A combination's ``timeout`` bounds the
whole of a rollout's inline scoring; its components must then all be sync. A component
written as a bare string is a type with default options (``valid: json_valid``).
Options ending in ``_file`` that hold relative paths resolve against the spec file's folder.

Errors name the file, the key path, what was found and what would be valid.
"""

from __future__ import annotations

import dataclasses
import difflib
import math
import os
import typing
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, get_args

import yaml
from pydantic import BaseModel, TypeAdapter, ValidationError

import referee.rewards  # noqa: F401  (the built-in types register as they are imported)
from referee.compose import Combined, CombineMode, Component, NonePolicy, Transform
from referee.deadline import check_timeout
from referee.errors import SpecError
from referee.judges import JudgeOptions
from referee.judges.options import CLIENT_OPTIONS
from referee.registry import lookup, registered_types
from referee.reward import GroupReward, Reward, RewardBase, SyncReward, is_sync
from referee.reward import _owns_timeout as owns_timeout

__all__ = ["load"]

_COMBINE_KEYS = {"name", "description", "version", "combine", "components", "on_none",
                 "none_value", "floor", "timeout"}  # fmt: skip
_COMPONENT_KEYS = {"weight", "gate", "threshold"}
_TRANSFORM_KEYS = {"scale", "offset", "clip"}
_MODES: tuple[str, ...] = get_args(CombineMode)
_POLICIES: tuple[str, ...] = get_args(NonePolicy)

Path_ = tuple[str | int, ...]


def load(spec: str | os.PathLike[str] | Mapping[str, Any]) -> Reward:
    """Build the reward a spec describes.

    Args:
        spec: A path to a YAML or JSON spec file, or the spec as a mapping.

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
        return _Loader("<mapping>", Path.cwd()).reward(spec, (), "reward")
    path = Path(spec)
    source = str(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise SpecError("spec file not found", source=source) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise SpecError(f"cannot read spec file: {exc}", source=source) from None
    try:
        data = _safe_load(text, source)
    except yaml.YAMLError as exc:
        raise SpecError(f"not valid YAML: {exc}", source=source) from None
    if not isinstance(data, Mapping):
        raise SpecError(
            "a spec must be a mapping",
            source=source,
            found=data,
            expected="keys such as 'type' or 'combine' and 'components'",
        )
    return _Loader(source, path.resolve().parent).reward(data, (), path.stem)


_MAX_NODES = 1_000_000
"""The most YAML nodes a spec may hold once its aliases are expanded. An alias is cheap to
write and costs nothing to parse, but everything that walks the loaded spec walks the
expansion: nine lines of nested aliases (a "billion laughs") expand to 10**9 nodes."""


def _safe_load(text: str, source: str) -> Any:
    """`yaml.safe_load`, refusing a document whose aliases expand past `_MAX_NODES` nodes
    (or refer to themselves) before anything is built from it."""
    loader = yaml.SafeLoader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        size = _expanded_size(node)
        if size > _MAX_NODES or size < 0:
            how = "refer to themselves" if size < 0 else f"expand to over {_MAX_NODES} nodes"
            raise SpecError(
                f"the YAML's aliases (*name) {how} (a 'billion laughs'), more than a spec may "
                "hold; write the repeated parts out, or refer to a file",
                source=source,
            )
        return loader.construct_document(node)
    finally:
        loader.dispose()


def _expanded_size(root: yaml.Node) -> int:
    """How many nodes `root` has with every alias expanded, counted in time linear in the
    nodes as written (each shared node once); -1 for a node that contains itself."""
    sizes: dict[int, int] = {}
    on_path: set[int] = set()
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, children_done = stack.pop()
        key = id(node)
        kids: list[yaml.Node] = []
        if isinstance(node, yaml.SequenceNode):
            kids = list(node.value)
        elif isinstance(node, yaml.MappingNode):
            kids = [part for pair in node.value for part in pair]
        if children_done:
            on_path.discard(key)
            total = 1
            for kid in kids:
                total += sizes[id(kid)]
                if total > _MAX_NODES:
                    return total  # no need to count further
            sizes[key] = total
            continue
        if key in sizes:
            continue
        if key in on_path:
            return -1  # a recursive alias: endless once expanded
        on_path.add(key)
        stack.append((node, True))
        stack.extend((kid, False) for kid in kids if id(kid) not in sizes)
    return sizes[id(root)]


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


def _owns_timeout(cls: type[Any]) -> bool:
    """Whether a type's ``timeout`` is an option of its own (math_answer's, the code rewards',
    a judge client's), rather than the deadline every reward takes."""
    return owns_timeout(cls) or issubclass(cls, JudgeOptions)


def _reward_options(cls: type[Any]) -> tuple[str, ...]:
    """The options of a reward type that are rewards themselves (fields typed `Reward`)."""
    if not dataclasses.is_dataclass(cls):
        return ()
    hints = typing.get_type_hints(cls)
    return tuple(f.name for f in dataclasses.fields(cls) if hints.get(f.name) in _REWARD_TYPES)


_REWARD_TYPES = (Reward, GroupReward, SyncReward)

_UNION_TAG_PREFIXES = (
    "literal[",
    "function-",
    "union[",
    "tagged-union[",
    "is-instance[",
    "nullable[",
)


def _model_names(cls: type[BaseModel] = BaseModel) -> set[str]:
    names = set()
    for sub in cls.__subclasses__():
        names.add(sub.__name__)
        names |= _model_names(sub)
    return names


def _is_union_tag(part: str | int) -> bool:
    """Whether a pydantic error location part names a union member rather than a key."""
    if not isinstance(part, str):
        return False
    return part.startswith(_UNION_TAG_PREFIXES) or (part[:1].isupper() and part in _model_names())


class _Loader:
    def __init__(self, source: str, base: Path) -> None:
        self.source = source
        self.base = base

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
        deadline = None
        if "timeout" in options and not _owns_timeout(cls):
            deadline = self.timeout(options.pop("timeout"), path)
        for key, value in options.items():
            if key.endswith("_file") and isinstance(value, str) and not os.path.isabs(value):
                options[key] = str(self.base / value)
        if allowed and "name" in {f.name for f in dataclasses.fields(cls)}:
            options["name"] = name
        try:
            reward = _adapter(cls).validate_python(options)
        except ValidationError as exc:
            raise self._from_pydantic(exc, path, kind, allowed) from None
        except (TypeError, ValueError) as exc:
            raise self.error(f"invalid options for {kind}: {exc}", path) from None
        if not isinstance(reward, Reward):
            raise self.error(
                f"type {kind!r} does not build a Reward", (*path, "type"), found=reward
            )
        if deadline is not None:
            self.set_timeout(reward, deadline, path, kind)
        return reward

    def set_timeout(self, reward: Reward, seconds: float, path: Path_, kind: str) -> None:
        """Give a built reward the deadline its spec set."""
        if not isinstance(reward, RewardBase):
            raise self.error(
                f"type {kind!r} takes no timeout (its class bounds its own scoring)",
                (*path, "timeout"),
                found=seconds,
            )
        reward.timeout = seconds

    def timeout(self, value: Any, path: Path_) -> float | None:
        """A spec's ``timeout``: seconds, positive."""
        try:
            return check_timeout(value, "timeout")
        except ValueError:
            raise self.error(
                "timeout must be a positive number of seconds",
                (*path, "timeout"),
                found=value,
                expected="timeout: 2",
            ) from None

    def _from_pydantic(
        self, exc: ValidationError, path: Path_, kind: str, allowed: list[str]
    ) -> SpecError:
        errors = exc.errors()
        first = errors[0]
        loc = tuple(p for p in first["loc"] if not _is_union_tag(p))
        more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
        if first["type"] == "unexpected_keyword_argument" or first["type"] == "extra_forbidden":
            known = {*allowed, *_COMPONENT_KEYS, "timeout"}
            if "client" in allowed:  # a judge takes its client's options flat too
                known |= CLIENT_OPTIONS
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
            raise self.error(
                "unknown combine mode", (*path, "combine"), found=mode, expected=" | ".join(_MODES)
            )
        on_none = data.get("on_none", "skip")
        if on_none not in _POLICIES:
            raise self.error(
                "unknown on_none policy",
                (*path, "on_none"),
                found=on_none,
                expected=" | ".join(_POLICIES),
            )
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
        timeout = self.timeout(data.get("timeout"), path)
        # Read before the try: a SpecError is a ValueError, and would lose its key path there.
        none_value = self.number(data, "none_value", 0.0, path)
        floor = self.number(data, "floor", 0.0, path)
        try:
            return Combined(
                components=components,
                mode=mode,
                on_none=on_none,
                none_value=none_value,
                floor=floor,
                name=name,
                timeout=timeout,
            )
        except ValueError as exc:
            slow = timeout is not None and not all(is_sync(c.reward) for c in components)
            where, found = ((*path, "timeout"), timeout) if slow else (path, None)
            raise self.error(str(exc), where, found=found) from None

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
        body = {k: v for k, v in value.items() if k not in _COMPONENT_KEYS}
        return Component(
            name=key,
            reward=self.reward(body, path, key),
            weight=weight,
            gate=gate,
            threshold=threshold,
        )

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
