"""The tasks an Open Reward Standard environment serves: a JSON Lines file, read and checked
whole before the server starts.

One task per line, in referee's canonical shape without the completion::

    {"id": "q1", "prompt": "What is 2+2?", "reference": "4", "split": "train"}

``id`` (a string, or an integer read as one) and ``prompt`` (text, or chat messages as a
`referee.Rollout` takes them) are required; ``reference`` (any JSON value) defaults to null
and ``split`` to ``"train"``. Any other key is an error, so a misspelt ``reference`` is not
served as a task with no ground truth. Ids are unique across the file: a session may name its
task by id. A file that cannot be served (not JSON, a row of the wrong shape, a duplicate id,
no tasks) is a `referee.errors.RolloutError` naming the file and line.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import JsonValue, ValidationError

from referee.errors import RolloutError
from referee.rollout import Message, Rollout
from referee.rollouts.jsonl import decode_lines, validation_message

__all__ = ["DEFAULT_SPLIT", "TASK_KEYS", "Task", "TaskSet"]

DEFAULT_SPLIT = "train"
"""The split of a task whose row names none (TRL's OpenReward integration asks for it)."""
TASK_KEYS = ("id", "prompt", "reference", "split")


@dataclass(frozen=True, slots=True)
class Task:
    """One task: what the policy is asked, and the ground truth its answer is scored against.

    Attributes:
        id: Unique in its file; the rollout's id, and how a session names the task.
        prompt: Text, or chat messages.
        reference: The ground truth, as the reward reads it.
        split: The split it is listed under.
    """

    id: str
    prompt: str | list[Message]
    reference: JsonValue
    split: str

    def rollout(self, answer: str) -> Rollout:
        """The rollout an answer to this task is scored as: its prompt, the answer as the
        completion, its reference."""
        return Rollout(id=self.id, prompt=self.prompt, completion=answer, reference=self.reference)

    def spec(self) -> dict[str, str]:
        """The task as ORS lists it (a task spec): its id, and nothing the policy or a
        trainer's dataset should not hold (the prompt comes from the session, the reference
        stays on the server)."""
        return {"id": self.id}


def _task(row: Any) -> Task:
    """One row as a task; else ValueError saying what is wrong."""
    if not isinstance(row, Mapping):
        raise ValueError(f"a task must be a JSON object, got {type(row).__name__}")
    unknown = [key for key in row if key not in TASK_KEYS]
    if unknown:
        raise ValueError(
            f"unknown key {unknown[0]!r}; a task has {', '.join(map(repr, TASK_KEYS))} "
            f"(rename the ground truth to 'reference')"
        )
    for key in ("id", "prompt"):
        if row.get(key) in (None, "", []):
            raise ValueError(f"the task has no {key!r}")
    ident = row["id"]
    if isinstance(ident, bool) or not isinstance(ident, (str, int)):
        raise ValueError(f"'id' must be a string or an integer, not {type(ident).__name__}")
    split = row.get("split", DEFAULT_SPLIT)
    if not isinstance(split, str) or not split:
        raise ValueError(f"'split' must be a non-empty string, not {split!r}")
    try:
        rollout = Rollout.model_validate(
            {"id": ident, "prompt": row["prompt"], "completion": "",
             "reference": row.get("reference")}
        )  # fmt: skip
    except ValidationError as exc:
        raise ValueError(validation_message(exc)) from None
    return Task(rollout.id, rollout.prompt, rollout.reference, split)


@dataclass(frozen=True)
class TaskSet:
    """The tasks of one environment, by split (in the order they first appear) and by id.

    Attributes:
        splits: Each split's tasks, in file order.
        by_id: Every task, by id.
        source: Where they were read from (a path, or ``<tasks>`` for rows given in code).
    """

    splits: dict[str, list[Task]]
    by_id: dict[str, Task]
    source: str

    @classmethod
    def from_rows(
        cls, rows: Iterable[tuple[int, Any, str | None]], source: str = "<tasks>"
    ) -> TaskSet:
        """Tasks from ``(line, row, error)`` triples (an error: the line could not be decoded).

        Raises:
            RolloutError: A row that is not a task, a duplicate id, or no tasks at all.
        """
        splits: dict[str, list[Task]] = {}
        by_id: dict[str, Task] = {}
        first: dict[str, int] = {}
        for line, row, error in rows:
            if error is not None:
                raise RolloutError(error, source=source, line=line)
            try:
                task = _task(row)
            except ValueError as exc:
                raise RolloutError(str(exc), source=source, line=line) from None
            if task.id in by_id:
                raise RolloutError(
                    f"duplicate id {task.id!r} (first at line {first[task.id]}); task ids "
                    f"must be unique: a session names its task by id",
                    source=source, line=line,
                )  # fmt: skip
            by_id[task.id] = task
            first[task.id] = line
            splits.setdefault(task.split, []).append(task)
        if not by_id:
            raise RolloutError("no tasks: the file has no rows", source=source)
        return cls(splits, by_id, source)

    @classmethod
    def of(cls, rows: Iterable[Mapping[str, Any]]) -> TaskSet:
        """Tasks from rows given in code, numbered from 1 as lines are."""
        return cls.from_rows(((i, row, None) for i, row in enumerate(rows, start=1)))

    @classmethod
    def read(cls, path: str | os.PathLike[str]) -> TaskSet:
        """Tasks from a JSON Lines file, blank lines skipped.

        Raises:
            RolloutError: The file cannot be read, or is not a task file (module docstring).
        """
        source = os.fspath(path)
        try:
            with open(path, "rb") as stream:
                rows = [(line, row, error) for line, _, row, error in decode_lines(stream)]
        except OSError as exc:
            raise RolloutError(f"cannot read the task file: {exc.strerror}", source=source) from exc
        return cls.from_rows(rows, source)
