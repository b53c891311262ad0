"""The registry of named reward types that spec files refer to (``type: json_schema``).

The built-in types are named in `BUILTIN` (type name -> ``module:Class``), and a type's module
is imported only when that type is asked for (`lookup`), so ``import referee`` and
`registered_types` import no reward; the class registers itself with `@register` as its module
runs (a test checks the table against what the modules register). Plugins add types through
the ``referee.rewards`` entry-point group, e.g. in their ``pyproject.toml``::

    [project.entry-points."referee.rewards"]
    my_reward = "my_package.rewards:MyReward"

and are loaded on the first name the registry does not know; a type defined in user code
registers with `@register` as the built-ins do.

A registered type is a class (usually a dataclass) whose keyword arguments are the options a
spec gives; referee validates them with pydantic before construction, so a wrong option is
reported with its key path.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Final, TypeVar

from referee._lazy import import_module

if TYPE_CHECKING:
    from importlib.metadata import EntryPoint

__all__ = ["BUILTIN", "ENTRY_POINT_GROUP", "lookup", "register", "registered_types"]

ENTRY_POINT_GROUP = "referee.rewards"

BUILTIN: Final[Mapping[str, str]] = MappingProxyType({
    "checklist_judge": "referee.rewards.judged.checklist:ChecklistJudge",
    "contains": "referee.rewards.text.matching:Contains",
    "exact_match": "referee.rewards.text.matching:ExactMatch",
    "field_match": "referee.rewards.structured.fields:FieldMatch",
    "final_answer": "referee.rewards.agent.final_answer:FinalAnswer",
    "format": "referee.rewards.text.matching:Format",
    "function_tests": "referee.rewards.code.functions:FunctionTests",
    "group_rank": "referee.rewards.judged.group_rank:GroupRank",
    "harbor_task": "referee.rewards.harbor.harbor_task:HarborTask",
    "instruction_following": "referee.rewards.text.instruction_following:InstructionFollowing",
    "io_tests": "referee.rewards.code.unit_tests:IoTests",
    "json_schema": "referee.rewards.structured.json:JsonSchema",
    "json_valid": "referee.rewards.structured.json:JsonValid",
    "length": "referee.rewards.text.length:Length",
    "math_answer": "referee.rewards.math.answer:MathAnswer",
    "openai_grader": "referee.rewards.judged.openai_graders:OpenAIGrader",
    "pairwise_judge": "referee.rewards.judged.pairwise:PairwiseJudge",
    "pairwise_tournament": "referee.rewards.judged.tournament:PairwiseTournament",
    "patch_tests": "referee.rewards.patch.patch_tests:PatchTests",
    "process_reward_model": "referee.rewards.learned.process_reward_model:ProcessRewardModel",
    "pytest_tests": "referee.rewards.code.unit_tests:PytestTests",
    "python": "referee.rewards.python:PythonReward",
    "python_tests": "referee.rewards.code.unit_tests:PythonTests",
    "reasoning_gym": "referee.rewards.math.reasoning_gym:ReasoningGym",
    "reference_judge": "referee.rewards.judged.reference:ReferenceJudge",
    "regex": "referee.rewards.text.matching:Regex",
    "repetition": "referee.rewards.text.length:Repetition",
    "retrieval": "referee.rewards.agent.retrieval:Retrieval",
    "reward_model": "referee.rewards.learned.reward_model:RewardModel",
    "rubric_judge": "referee.rewards.judged.rubric:RubricJudge",
    "sql_match": "referee.rewards.sql:SqlMatch",
    "text_similarity": "referee.rewards.text.similarity:TextSimilarity",
    "tool_call_match": "referee.rewards.structured.tool_calls:ToolCallMatch",
    "tool_use": "referee.rewards.agent.tool_use:ToolUse",
})  # fmt: skip
"""Every built-in type: its name -> ``module:Class``, the module that registers it."""

logger = logging.getLogger("referee")

_types: dict[str, type[Any]] = {}
_lock = threading.Lock()
_plugins_loaded = False
_plugin_names: frozenset[str] | None = None  # the entry points' names, read once, loaded or not

T = TypeVar("T", bound=type[Any])


def register(name: str) -> Callable[[T], T]:
    """Register a reward class under `name`, for use as ``type: <name>`` in specs."""

    def decorate(cls: T) -> T:
        if name in BUILTIN and BUILTIN[name] != f"{cls.__module__}:{cls.__qualname__}":
            raise ValueError(
                f"reward type {name!r} is built in ({BUILTIN[name]}): register "
                f"{cls.__module__}.{cls.__qualname__} under a name of its own"
            )
        existing = _types.get(name)
        if existing is not None and existing is not cls:
            raise ValueError(
                f"reward type {name!r} is already registered by "
                f"{existing.__module__}.{existing.__qualname__}"
            )
        _types[name] = cls
        cls.kind = name
        return cls

    return decorate


def _entry_points() -> tuple[EntryPoint, ...]:
    import importlib.metadata  # (scanning installed packages: only when a name is missing)

    global _plugin_names
    found = tuple(importlib.metadata.entry_points(group=ENTRY_POINT_GROUP))
    _plugin_names = frozenset(ep.name for ep in found)
    return found


def _load_plugins() -> None:
    global _plugins_loaded
    with _lock:
        if _plugins_loaded:
            return
        _plugins_loaded = True
        for ep in _entry_points():
            if ep.name in _types or ep.name in BUILTIN:
                continue
            try:
                _types[ep.name] = ep.load()
            except Exception as exc:  # a broken plugin must not hide the built-in types
                logger.warning("could not load reward plugin %s (%s): %s", ep.name, ep.value, exc)


def lookup(name: str) -> type[Any] | None:
    """The reward class registered as `name`, importing its module if it is a built-in one and
    loading plugins on first miss; None if unknown."""
    cls = _types.get(name)
    if cls is None and name in BUILTIN:
        import_module(BUILTIN[name].partition(":")[0])  # it registers as it runs
        cls = _types.get(name)
    if cls is None:
        _load_plugins()
        cls = _types.get(name)
    return cls


def registered_types() -> list[str]:
    """Every registered reward type name, built-in and plugin, sorted. It imports none of them
    (a plugin that fails to load is listed, and `lookup` says why it is None)."""
    plugins = _plugin_names
    if plugins is None:
        plugins = frozenset(ep.name for ep in _entry_points())
    return sorted({*BUILTIN, *_types, *plugins})
