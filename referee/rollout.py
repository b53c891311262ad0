"""What referee scores: a `Rollout` (prompt, completion, ground truth) and its chat `Message`s."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, JsonValue, field_validator, model_validator

__all__ = ["Message", "Rollout", "ToolCall", "token_count"]

Role = Literal["system", "developer", "user", "assistant", "tool"]


class ToolCall(BaseModel):
    """One function call made by an assistant turn (OpenAI chat shape).

    Accepts both OpenAI's nested form ``{"id", "type": "function", "function": {"name",
    "arguments"}}`` and the flat ``{"name", "arguments"}``. `arguments` stays as the model wrote
    it: a JSON string (as OpenAI returns it) or an already decoded object.
    """

    model_config = ConfigDict(frozen=True, extra="ignore")

    id: str | None = None
    name: str
    arguments: dict[str, JsonValue] | str = Field(default_factory=dict)

    @model_validator(mode="before")
    @classmethod
    def _flatten_openai_shape(cls, data: Any) -> Any:
        if isinstance(data, dict) and isinstance(data.get("function"), dict):
            fn = data["function"]
            return {
                "id": data.get("id"),
                "name": fn.get("name"),
                "arguments": fn.get("arguments", {}),
            }
        return data


class Message(BaseModel):
    """One chat message: a role, its content, and for assistant turns the tool calls it made."""

    model_config = ConfigDict(frozen=True, extra="allow")

    role: Role
    content: str | list[dict[str, JsonValue]] | None = None
    tool_calls: list[ToolCall] | None = None
    tool_call_id: str | None = None
    name: str | None = None

    @property
    def text(self) -> str:
        """The message's text: the content string, or its text parts joined."""
        if self.content is None:
            return ""
        if isinstance(self.content, str):
            return self.content
        return "".join(
            str(part.get("text", "")) for part in self.content if part.get("type", "text") == "text"
        )


class Rollout(BaseModel):
    """One attempt at a task, as a reward sees it.

    Attributes:
        id: Stable identifier of this attempt (a row id in a log).
        prompt: The prompt, as text or chat messages.
        completion: What the policy produced: text, or a list of messages for a multi-turn
            trajectory with tool calls.
        reference: The task's ground truth; any JSON value (a string answer, an object of
            expected fields, unit tests, ...).
        group: Identifier shared by the attempts at one prompt (a GRPO group).
        metadata: Anything else the row carries (data source, token ids, labels, ...).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str = ""
    prompt: str | list[Message] = ""
    completion: str | list[Message]
    reference: JsonValue = None
    group: str | None = None
    metadata: dict[str, JsonValue] = Field(default_factory=dict)

    @field_validator("id", "group", mode="before")
    @classmethod
    def _ids_as_text(cls, value: Any) -> Any:
        # Logs often carry integer ids; bool is excluded because True as an id is a data bug.
        if isinstance(value, int) and not isinstance(value, bool):
            return str(value)
        return value

    @property
    def completion_text(self) -> str:
        """The completion as text: the string itself, or the last assistant message's text."""
        if isinstance(self.completion, str):
            return self.completion
        for message in reversed(self.completion):
            if message.role == "assistant":
                return message.text
        return ""

    @property
    def prompt_text(self) -> str:
        """The prompt as text: the string itself, or the last user message's text."""
        if isinstance(self.prompt, str):
            return self.prompt
        for message in reversed(self.prompt):
            if message.role == "user":
                return message.text
        return ""


def token_count(rollout: Rollout) -> int | None:
    """The response's token count as trainers give it: ``metadata.completion_ids`` (the ids),
    else ``metadata.completion_tokens`` (a count); None when the rollout has neither."""
    ids = rollout.metadata.get("completion_ids")
    if isinstance(ids, list):
        return len(ids)
    count = rollout.metadata.get("completion_tokens")
    if isinstance(count, int) and not isinstance(count, bool):
        return count
    return None
