"""NeMo Gym's ``/verify`` body read as a rollout, and the group it belongs to."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, ValidationError

from referee.backends.service import BadRequest
from referee.rollout import Message, Rollout, ToolCall

__all__ = [
    "DEFAULT_REFERENCE_FIELD",
    "GROUP_ATTEMPT",
    "GROUP_ID",
    "ROLLOUT_INDEX",
    "TASK_INDEX",
    "group_key",
    "rollout_of",
]

DEFAULT_REFERENCE_FIELD = "expected_answer"
"""The task field that holds the reference, as NeMo Gym's math servers name it."""

TASK_INDEX = "_ng_task_index"
ROLLOUT_INDEX = "_ng_rollout_index"
GROUP_ID = "_ng_group_id"
GROUP_ATTEMPT = "_ng_group_attempt"
_TOOL_ITEMS = ("function_call", "function_call_output")


class _Part(BaseModel):
    model_config = ConfigDict(extra="allow")
    type: str | None = None
    text: str | None = None


class _Message(BaseModel):
    model_config = ConfigDict(extra="allow")
    role: Literal["user", "assistant", "system", "developer"] = "assistant"
    content: str | list[_Part] | None = None


class _FunctionCall(BaseModel):
    model_config = ConfigDict(extra="allow")
    name: str
    arguments: str | dict[str, Any] = ""
    call_id: str | None = None


class _FunctionCallOutput(BaseModel):
    model_config = ConfigDict(extra="allow")
    call_id: str | None = None
    output: str | list[_Part] | None = None


class _CreateParams(BaseModel):
    model_config = ConfigDict(extra="allow")
    input: str | list[dict[str, Any]] = ""
    instructions: str | None = None
    tools: list[dict[str, Any]] | None = None


class _Usage(BaseModel):
    model_config = ConfigDict(extra="allow")
    output_tokens: int | None = None


class _Response(BaseModel):
    model_config = ConfigDict(extra="allow")
    output: list[dict[str, Any]]
    usage: _Usage | None = None


def _check(model: type[BaseModel], value: Any, where: str) -> Any:
    """`value` validated as `model`; a 422 naming the field (``where`` and pydantic's path)."""
    try:
        return model.model_validate(value)
    except ValidationError as exc:
        first = exc.errors()[0]
        path = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in first["loc"])
        raise BadRequest(422, "invalid_request", f"{where}{path}: {first['msg']}") from exc


def _text(content: str | list[_Part] | None) -> str:
    if content is None or isinstance(content, str):
        return content or ""
    return "".join(p.text or "" for p in content if p.type in ("output_text", "input_text", "text"))


def _messages(items: Sequence[Any], where: str) -> list[Message]:
    """OpenAI Responses items as chat messages: messages, then an assistant turn's calls on it,
    a call's output as a ``tool`` message. Items of other kinds (reasoning, ...) are left out."""
    out: list[Message] = []
    turn: dict[str, Any] | None = None  # the assistant turn being built

    def flush() -> None:
        nonlocal turn
        if turn is not None:
            out.append(Message(role="assistant", content=turn["content"],
                               tool_calls=turn["calls"] or None))  # fmt: skip
            turn = None

    for i, item in enumerate(items):
        at = f"{where}[{i}]"
        if not isinstance(item, Mapping):
            raise BadRequest(422, "invalid_request", f"{at}: must be an object")
        kind = item.get("type", "message")
        if kind == "message":
            message = _check(_Message, item, at)
            text = _text(message.content)
            if message.role != "assistant":
                flush()
                out.append(Message(role=message.role, content=text))
            elif turn is not None and not turn["calls"]:
                turn["content"] += text
            else:
                flush()
                turn = {"content": text, "calls": []}
        elif kind == "function_call":
            call = _check(_FunctionCall, item, at)
            if turn is None:
                turn = {"content": "", "calls": []}
            turn["calls"].append(
                ToolCall(id=call.call_id, name=call.name, arguments=call.arguments)
            )
        elif kind == "function_call_output":
            result = _check(_FunctionCallOutput, item, at)
            flush()
            output = result.output if isinstance(result.output, str) else _text(result.output)
            out.append(Message(role="tool", tool_call_id=result.call_id, content=output))
    flush()
    return out


def rollout_of(body: Mapping[str, Any], reference_field: str = DEFAULT_REFERENCE_FIELD) -> Rollout:
    """The rollout a ``/verify`` body describes (the module docstring says how it is read).

    Raises:
        BadRequest: 422 for a field of the wrong shape, naming it.
    """
    if "responses_create_params" not in body or "response" not in body:
        missing = "responses_create_params" if "responses_create_params" not in body else "response"
        raise BadRequest(422, "invalid_request", f"{missing}: field required (a BaseVerifyRequest)")
    params = _check(_CreateParams, body["responses_create_params"], "responses_create_params")
    response = _check(_Response, body["response"], "response")
    system = [Message(role="system", content=params.instructions)] if params.instructions else []
    prompt: str | list[Message]
    if isinstance(params.input, str):
        prompt = [*system, Message(role="user", content=params.input)] if system else params.input
    else:
        prompt = [*system, *_messages(params.input, "responses_create_params.input")]
    output = response.output
    completion: str | list[Message]
    if any(isinstance(item, Mapping) and item.get("type") in _TOOL_ITEMS for item in output):
        completion = _messages(output, "response.output")
    else:
        turns = _messages(output, "response.output")
        completion = "".join(m.text for m in turns if m.role == "assistant")
    metadata: dict[str, Any] = {}
    if params.tools is not None:
        metadata["tools"] = params.tools
    if response.usage is not None and response.usage.output_tokens is not None:
        metadata["completion_tokens"] = response.usage.output_tokens
    task, index = body.get(TASK_INDEX), body.get(ROLLOUT_INDEX)
    ids = all(isinstance(v, int) and not isinstance(v, bool) for v in (task, index))
    try:
        return Rollout(
            id=f"{task}:{index}" if ids else "", prompt=prompt, completion=completion,
            reference=body.get(reference_field), metadata=metadata,
        )  # fmt: skip
    except ValidationError as exc:
        first = exc.errors()[0]
        raise BadRequest(422, "invalid_request", f"{first['loc'][0]}: {first['msg']}") from exc


def group_key(body: Mapping[str, Any]) -> str:
    """The group a ``/verify`` body belongs to, keyed as NeMo Gym's GenRM comparison server
    keys its cohorts: the caller's ``_ng_group_id`` and ``_ng_group_attempt``; else a digest of
    the prompt (``responses_create_params.input`` and ``principle``) within ``_ng_task_index``
    (or ``prompt_id``) and ``_ng_group_attempt``.

    Raises:
        BadRequest: 422 for a group field of the wrong type.
    """
    group_id, attempt = body.get(GROUP_ID), body.get(GROUP_ATTEMPT, 0)
    if not (isinstance(attempt, int) and not isinstance(attempt, bool) and attempt >= 0):
        raise BadRequest(422, "invalid_request", f"{GROUP_ATTEMPT}: must be an integer >= 0")
    if group_id is not None:
        if not isinstance(group_id, str):
            raise BadRequest(422, "invalid_request", f"{GROUP_ID}: must be a string")
        return f"group_id::{group_id}::group_attempt::{attempt}"
    params = body.get("responses_create_params")
    prompt = params.get("input") if isinstance(params, Mapping) else None
    data = {"input": prompt, "principle": body.get("principle")}
    digest = hashlib.sha256(json.dumps(data, sort_keys=True, default=str).encode()).hexdigest()
    task, prompt_id = body.get(TASK_INDEX), body.get("prompt_id")
    if task is not None:
        digest = f"task_idx::{task!r}::{digest}"
    elif prompt_id is not None:
        digest = f"prompt_id::{prompt_id!r}::{digest}"
    return f"{digest}::group_attempt::{attempt}"
