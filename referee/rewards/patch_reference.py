"""Deprecated: moved to `referee.rewards.patch` (the module `referee.rewards.patch.reference`)."""

from referee._moved import warn_moved
from referee.rewards.patch.reference import PatchReference

__all__ = ["PatchReference"]

warn_moved("referee.rewards.patch_reference", "referee.rewards.patch")
