"""Rewards on structured output: `json_valid` and `json_schema` (`json`), `field_match` (an
extraction's fields, `fields`) and `tool_call_match` (a function call against the expected
ones, as BFCL checks it: `tool_calls`).

Each module is imported when one of its names is first asked for (`referee._lazy`).
"""

from referee._lazy import exports as _exports

TYPE_CHECKING = False  # `typing.TYPE_CHECKING` without importing typing (type checkers know it)
if TYPE_CHECKING:
    from referee.rewards.structured.fields import FieldMatch, FieldRule, MatcherKind
    from referee.rewards.structured.json import JsonSchema, JsonValid
    from referee.rewards.structured.tool_calls import ToolCallMatch, check_call

__all__ = [
    "FieldMatch",
    "FieldRule",
    "JsonSchema",
    "JsonValid",
    "MatcherKind",
    "ToolCallMatch",
    "check_call",
]

_EXPORTS = {
    "referee.rewards.structured.fields": ("FieldMatch", "FieldRule", "MatcherKind"),
    "referee.rewards.structured.json": ("JsonSchema", "JsonValid"),
    "referee.rewards.structured.tool_calls": ("ToolCallMatch", "check_call"),
}

if not TYPE_CHECKING:  # undefined for mypy, so a misspelt name stays an error
    __getattr__, __dir__ = _exports(__name__, _EXPORTS, globals())
