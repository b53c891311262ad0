"""Deprecated: moved to `referee.rewards.code` (the module `referee.rewards.code.reference`)."""

from referee._moved import warn_moved
from referee.rewards.code.reference import (
    CodeReference,
    IoCase,
    IoTestsReference,
    PytestReference,
    PythonTestsReference,
    code_reference,
)

__all__ = [
    "CodeReference",
    "IoCase",
    "IoTestsReference",
    "PytestReference",
    "PythonTestsReference",
    "code_reference",
]

warn_moved("referee.rewards.code_reference", "referee.rewards.code")
