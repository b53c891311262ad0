"""How inputs of mixed lengths become forward batches: sorted by length, under a token budget.

A batch is padded to its longest input, so inputs of similar length batch together: sorted
longest first (the batch that needs the most memory runs first, so one that cannot fit fails
at once), and each batch takes inputs while its padded size, ``len(batch) * longest``, stays
within `batch_tokens` and its size within `max_batch`. An input longer than the budget is a
batch of its own. Which batch an input lands in never changes its value: padding is on the
right and masked, and the model reads each input at its own last token.
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["plan"]


def plan(lengths: Sequence[int], batch_tokens: int, max_batch: int) -> list[list[int]]:
    """The positions of `lengths`, grouped into batches (see the module docstring).

    Example:
        ``plan([16, 512, 16, 500], batch_tokens=1024, max_batch=8)`` is
        ``[[1, 3], [0, 2]]``: the two long inputs together, the two short ones together.
    """
    order = sorted(range(len(lengths)), key=lambda i: -lengths[i])
    batches: list[list[int]] = []
    current: list[int] = []
    longest = 0
    for i in order:
        if current and (len(current) >= max_batch or (len(current) + 1) * longest > batch_tokens):
            batches.append(current)
            current = []
        if not current:
            longest = lengths[i]
        current.append(i)
    if current:
        batches.append(current)
    return batches
