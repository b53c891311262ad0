"""Where a pydantic error is, as a spec's key path: the parts of a location that name a
union member rather than a key are dropped, and the errors after the first are named."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel

__all__ = ["is_union_tag", "more"]

Path_ = tuple[str | int, ...]

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


def is_union_tag(part: str | int) -> bool:
    """Whether a pydantic error location part names a union member rather than a key."""
    if not isinstance(part, str):
        return False
    return part.startswith(_UNION_TAG_PREFIXES) or (part[:1].isupper() and part in _model_names())


def more(errors: Sequence[Any], path: Path_, shown: int = 3) -> str:
    """The errors after the first, named (where and what), so a second typo is not hidden
    behind "(and 1 more)"; past `shown`, counted."""
    if not errors:
        return ""
    named = []
    for error in errors[:shown]:
        loc = [str(p) for p in (*path, *error["loc"]) if not is_union_tag(p)]
        what = str(error["msg"])
        if error["type"] in ("unexpected_keyword_argument", "extra_forbidden"):
            what = "unknown option"
        elif error["type"] == "missing":
            what = "missing"
        named.append(f"{'.'.join(loc) or '(top)'}: {what}")
    rest = len(errors) - len(named)
    tail = f"; and {rest} more" if rest else ""
    return f" (also {'; '.join(named)}{tail})"
