"""Patch rewards: does a proposed diff make a repository's tests pass (SWE-bench's question)?

`patch_tests` (`patch_tests`), the reference it grades against (`reference`), and its private
helpers: reading the diff out of a completion (`_diff`), packing the repository snapshot
(`_snapshot`) and the program that applies the patch and runs the tests inside the sandbox
(`_driver`, sent there as source).
"""

from referee.rewards.patch.patch_tests import APPLY_COMMANDS, PROTECTED, PatchRun, PatchTests
from referee.rewards.patch.reference import PatchReference

__all__ = ["APPLY_COMMANDS", "PROTECTED", "PatchReference", "PatchRun", "PatchTests"]
