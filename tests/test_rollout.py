from __future__ import annotations

import pytest
from pydantic import ValidationError

from referee import Message, Rollout, ToolCall


def test_text_completion_is_its_own_text() -> None:
    assert Rollout(completion="hi").completion_text == "hi"


def test_message_completion_text_is_last_assistant_turn() -> None:
    r = Rollout(
        prompt=[{"role": "user", "content": "q"}],  # type: ignore[list-item]
        completion=[
            {"role": "assistant", "content": "thinking", "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
            ]},
            {"role": "tool", "content": "42", "tool_call_id": "c1"},
            {"role": "assistant", "content": [{"type": "text", "text": "the answer"},
                                              {"type": "text", "text": " is 42"}]},
        ],  # type: ignore[list-item]
    )  # fmt: skip
    assert r.completion_text == "the answer is 42"
    assert r.prompt_text == "q"
    assert isinstance(r.completion, list)
    call = r.completion[0].tool_calls[0]  # type: ignore[index]
    assert call == ToolCall(id="c1", name="f", arguments="{}")


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        (7, "7"),  # integer ids from logs become text
        ("a", "a"),
    ],
)
def test_ids_are_text(raw: object, expected: str) -> None:
    assert Rollout(id=raw, completion="", group=raw).id == expected  # type: ignore[arg-type]


def test_bool_id_is_rejected() -> None:
    with pytest.raises(ValidationError):
        Rollout(id=True, completion="")  # type: ignore[arg-type]


def test_unknown_field_is_rejected() -> None:
    with pytest.raises(ValidationError, match="completions"):
        Rollout(completion="", completions="typo")  # type: ignore[call-arg]


def test_rollout_is_frozen() -> None:
    r = Rollout(completion="x")
    with pytest.raises(ValidationError):
        r.completion = "y"  # type: ignore[misc]


def test_message_without_content_has_empty_text() -> None:
    assert Message(role="assistant").text == ""
