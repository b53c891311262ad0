"""The worker's side: load rewards, score chunks inline, answer each rollout in JSON."""

from __future__ import annotations

import contextlib
import json
import os
import pickle
import sys
from typing import Any

from referee.scores import Score
from referee.workers._common import HEADER, mark_worker, retiring, send


def prepare(reward: Any) -> None:
    """The reward's one-time set-up (`CheckReward.prepare`: imports, parsers), outside any
    deadline; a set-up that raises is left to the check, which meets the same error."""
    hook = getattr(reward, "prepare", None)
    if callable(hook):
        with contextlib.suppress(Exception):
            hook()


def serve(channel_in: Any, channel_out: Any) -> None:
    """A worker's loop: load rewards, score chunks inline, answer each rollout in JSON; run
    a call (`WorkerPool.call`) and answer its JSON value."""
    mark_worker()
    rewards: dict[int, Any] = {}
    answer(channel_out, {"ready": True})
    while True:
        header = channel_in.read(HEADER.size)
        if len(header) < HEADER.size:
            return  # the parent is gone
        (size,) = HEADER.unpack(header)
        message = pickle.loads(channel_in.read(size))  # from the parent: trusted
        if "call" in message:
            fn, args = message["call"]
            answer(channel_out, _call(fn, args, message["deadline"]))
            _retire_if_asked()
            continue
        key = message["key"]
        if "reward" in message:
            sys.path[:] = message["path"]
            try:
                rewards[key] = pickle.loads(message["reward"])
            except Exception as exc:
                rewards[key] = exc
            else:
                prepare(rewards[key])
            answer(channel_out, {"loaded": key})
            continue
        reward = rewards[key]
        for rollout in message["rollouts"]:
            if isinstance(reward, Exception):
                name = "reward"
                score = Score.failed(
                    "error",
                    f"the worker process cannot load the reward ({type(reward).__name__}: "
                    f"{reward}); is its module importable from sys.path?",
                )
            else:
                name = reward.name
                score = reward.check_within(rollout, message["deadline"])
            try:
                body = json.dumps(_retired(score.to_dict()), allow_nan=False)
            except (TypeError, ValueError) as exc:
                body = json.dumps(
                    _retired(
                        Score.failed("error", f"its score cannot be sent: {exc}", name).to_dict()
                    )
                )
            answer(channel_out, body)
            _retire_if_asked()


def _retired(body: dict[str, Any]) -> dict[str, Any]:
    """An answer, marked as this worker's last where it retires (`referee.workers.retire`)."""
    return {**body, "retired": True} if retiring() else body


def _retire_if_asked() -> None:
    """Exit after the answer just sent, where a check asked (`referee.workers.retire`): a
    thread it left (SQLite spinning in C) dies with the process."""
    if retiring():
        os._exit(0)


def _call(fn: Any, args: tuple[Any, ...], deadline: float) -> str:
    """``fn(*args)`` under `deadline` (in-process; the parent kills past it), as JSON: its
    value, or the exception's type and message."""
    from referee.deadline import run

    try:
        value = run(lambda _: fn(*args), None, deadline, getattr(fn, "__name__", "call"))
        return json.dumps(_retired({"value": value}), allow_nan=False)
    except BaseException as exc:  # the parent re-raises it; the worker goes on
        return json.dumps(_retired({"raised": type(exc).__name__, "message": str(exc)[:2000]}))


def answer(channel_out: Any, body: Any) -> None:
    """Send one answer (JSON text, or a value to write as JSON)."""
    payload = (body if isinstance(body, str) else json.dumps(body)).encode()
    send(channel_out, payload)
