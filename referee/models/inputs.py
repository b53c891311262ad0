"""What a reward model reads: a rollout rendered as TRL's GRPOTrainer renders it for one.

The rule (TRL 1.16, ``GRPOTrainer._calculate_rewards`` for a reward model given as a model):

- a conversational rollout (its prompt or its completion is a list of messages): the reward
  tokenizer's chat template applied to the prompt's messages followed by the completion's
  (``apply_chat_template(messages, tokenize=False)``, no generation prompt). A text completion
  is one assistant turn, a text prompt one user turn (none when empty);
- a text rollout: the prompt and the completion concatenated as they are.

The text is then tokenized without added special tokens (the template writes its own; TRL
adds none to plain text either). ``template: chat`` renders a text rollout through the chat
template as well, for a model trained on chat-formatted input whose rollouts are logged as
text. Messages go to the template as OpenAI-shaped dicts: ``role``, ``content`` (its text),
and ``tool_calls``, ``tool_call_id``, ``name`` where present. A lone surrogate in the text
becomes U+FFFD (`unicode_text`).

A process reward model reads steps (`step_text`): the completion's steps, each followed by a
separator token, at whose positions its head is read (Qwen2.5-Math-PRM's format: steps joined by
``<extra_0>`` in the assistant turn, one after the last). A text completion's steps are its parts
between `step_split` (default a blank line), stripped, empty ones dropped, and so are those of a
completion that is one assistant message with no tool call (TRL's conversational completions, a
verifiers trace of one turn): the same answer gets the same steps however it is logged. A
trajectory's steps are its assistant turns, the separator after each turn's text and calls (written
as ``name(arguments)`` lines into the turn's text, so a step's value sees what it called), so step
values line up with the turns (verl places them at each turn's last token). The separator is removed
from the policy's and the prompt's own text first: a completion cannot add steps by writing it.
"""

from __future__ import annotations

import json
from typing import Any, Literal, NamedTuple

from referee.errors import NotApplicable
from referee.rollout import Message, Rollout, ToolCall

__all__ = [
    "Steps",
    "Template",
    "conversational",
    "messages_of",
    "prompt_text",
    "reward_text",
    "split_steps",
    "step_text",
    "unicode_text",
]

Template = Literal["auto", "chat"]
"""``auto``: the chat template for conversational rollouts, plain text for text ones (TRL's
rule); ``chat``: the chat template for every rollout."""


def unicode_text(text: str) -> str:
    """`text` as valid Unicode: a lone surrogate (an undecodable byte a log reader kept, which
    no tokenizer nor JSON encoder takes) becomes U+FFFD, as a server decoding the bytes would
    make it. Pairs of surrogates become the character they encode."""
    if text.isascii():
        return text
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    return text


def conversational(rollout: Rollout) -> bool:
    """Whether the prompt or the completion is given as messages."""
    return not isinstance(rollout.prompt, str) or not isinstance(rollout.completion, str)


def _dict(message: Message, content: str | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {
        "role": message.role,
        "content": message.text if content is None else content,
    }
    if message.tool_calls:
        out["tool_calls"] = [
            {
                **({"id": call.id} if call.id is not None else {}),
                "type": "function",
                "function": {"name": call.name, "arguments": call.arguments},
            }
            for call in message.tool_calls
        ]
    if message.tool_call_id is not None:
        out["tool_call_id"] = message.tool_call_id
    if message.name is not None:
        out["name"] = message.name
    return out


def _prompt_messages(rollout: Rollout, clean: str | None = None) -> list[dict[str, Any]]:
    prompt = rollout.prompt
    if isinstance(prompt, str):
        text = prompt if clean is None else prompt.replace(clean, "")
        return [{"role": "user", "content": text}] if text else []
    if clean is None:
        return [_dict(m) for m in prompt]
    return [_dict(m, m.text.replace(clean, "")) for m in prompt]


def messages_of(rollout: Rollout) -> list[dict[str, Any]]:
    """The rollout as one conversation: the prompt's messages, then the completion's."""
    messages = _prompt_messages(rollout)
    completion = rollout.completion
    if isinstance(completion, str):
        messages.append({"role": "assistant", "content": completion})
    else:
        messages.extend(_dict(m) for m in completion)
    return messages


def _chat(tokenizer: Any, messages: list[dict[str, Any]]) -> str:
    if getattr(tokenizer, "chat_template", None) is None:
        raise NotApplicable(
            "the rollout is a conversation, and the reward model's tokenizer has no chat "
            "template to render it with: give a tokenizer that has one (tokenizer: ...)"
        )
    return str(tokenizer.apply_chat_template(messages, tokenize=False))


def _call_text(call: ToolCall) -> str:
    arguments = call.arguments
    shown = arguments if isinstance(arguments, str) else json.dumps(arguments)
    return f"{call.name}({shown})"


def reward_text(rollout: Rollout, tokenizer: Any, template: Template = "auto") -> str:
    """The text a sequence reward model reads for `rollout` (the module's rule)."""
    if template == "chat" or conversational(rollout):
        return unicode_text(_chat(tokenizer, messages_of(rollout)))
    return unicode_text(str(rollout.prompt) + str(rollout.completion))


def prompt_text(rollout: Rollout, tokenizer: Any, template: Template = "auto") -> str:
    """The prompt part of `reward_text`: the prompt's messages through the chat template
    with the generation prompt (what a policy was shown), or the text prompt as it is."""
    if template == "chat" or conversational(rollout):
        if getattr(tokenizer, "chat_template", None) is None:
            return unicode_text(rollout.prompt_text)
        return unicode_text(
            str(
                tokenizer.apply_chat_template(
                    _prompt_messages(rollout), tokenize=False, add_generation_prompt=True
                )
            )
        )
    return unicode_text(str(rollout.prompt))


def split_steps(text: str, step_split: str) -> list[str]:
    """A text's steps: its parts between `step_split`, stripped, empty ones dropped."""
    return [part.strip() for part in text.split(step_split) if part.strip()]


class Steps(NamedTuple):
    """What `step_text` renders: the text, its number of steps, and the character where the
    completion's part of the text starts (what a cut from the left must not reach)."""

    text: str
    number: int
    start: int


def step_text(
    rollout: Rollout,
    tokenizer: Any,
    separator: str,
    step_split: str,
    template: Template = "auto",
) -> Steps:
    """The text a process reward model reads for `rollout`, its number of steps, and where
    its completion starts (the module's rule); ``Steps("", 0, 0)`` for no steps."""
    completion = rollout.completion
    prompt = _prompt_messages(rollout, separator)
    if not isinstance(completion, str) and _one_plain_turn(completion):
        completion = completion[0].text  # still conversational: the chat template renders it
    if isinstance(completion, str):
        steps = split_steps(completion.replace(separator, ""), step_split)
        if not steps:
            return Steps("", 0, 0)
        body = "".join(step + separator for step in steps)
        if template == "chat" or conversational(rollout):
            messages = [*prompt, {"role": "assistant", "content": body}]
            return _steps(tokenizer, messages, prompt, len(steps))
        head = unicode_text(str(rollout.prompt).replace(separator, ""))
        return Steps(head + unicode_text(body), len(steps), len(head))
    messages = list(prompt)
    turns = 0
    for m in completion:
        if m.role != "assistant":
            messages.append(_dict(m, m.text.replace(separator, "")))
            continue
        # The separator closes the turn, calls included: they are written into the text
        # (a template would put them after it), so a turn's value sees what it called.
        parts = [m.text, *(_call_text(c) for c in m.tool_calls or ())]
        text = "\n".join(p for p in parts if p).replace(separator, "")
        messages.append({"role": "assistant", "content": text + separator})
        turns += 1
    if not turns:
        return Steps("", 0, 0)
    return _steps(tokenizer, messages, prompt, turns)


def _one_plain_turn(completion: list[Message]) -> bool:
    """One assistant message, no tool call: an answer in chat form, not a trajectory."""
    return (
        len(completion) == 1 and completion[0].role == "assistant" and not completion[0].tool_calls
    )


def _steps(
    tokenizer: Any, messages: list[dict[str, Any]], prompt: list[dict[str, Any]], count: int
) -> Steps:
    text = unicode_text(_chat(tokenizer, messages))
    # The prompt's own rendering is where the completion starts, where it is a prefix of the
    # whole (as with templates that render each message alone); else nothing may be cut.
    head = unicode_text(_chat(tokenizer, prompt)) if prompt else ""
    return Steps(text, count, len(head) if text.startswith(head) else 0)
