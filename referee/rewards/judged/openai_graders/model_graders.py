"""`score_model` and `label_model` graders: the grader's own messages, templated, asked of its
model through referee's `JudgeClient` (so they share the verdict cache, retries, rate limits and
spend cap of every judge).

The messages are the grader's ``input``, each content string (or ``input_text``/``output_text``
part) templated (`templating`), in the grader's order and roles (``developer`` is sent as
``system``, which every OpenAI-compatible server takes). The reply is read as OpenAI's graders
reply: JSON ``{"result": ...}`` (a number for ``score_model``, one of the ``labels`` for
``label_model``), asked for with a JSON schema where the model takes one, as OpenAI does, else
by a last system message giving the shape (`reply_format`), with optional ``steps`` of
reasoning. A ``score_model`` score outside the grader's ``range`` is clipped into it, as OpenAI's
graders guide says ("The output of the grader will be truncated to the given ``range``"). Where
OpenAI gives 0 ("default to 0 for all non-numeric outputs"), referee does not: a reply with no
number, or a ``label_model`` reply that is not one of the labels, is a `JudgeError`
(``Failure("judge")``), never a score.

The grader's prompt is the user's; the completion substituted into it is not fenced (OpenAI's
semantics, kept so a config behaves as it did): a completion can speak to the grader model. See
docs/threat-model.md.

A grader's ``model`` names an OpenAI model (``gpt-4o-2024-08-06``): referee calls it as
``openai/<model>`` (litellm's name), unless the reward's ``models`` maps it elsewhere (a local
server's model); a name with a ``/`` is litellm's already.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, create_model

from referee.rewards.judged.openai_graders.templating import Sample, render

__all__ = [
    "ScoreVerdict",
    "label_verdict",
    "litellm_model",
    "messages",
    "reply_format",
    "texts",
]


class Step(BaseModel):
    """One step of the grader model's reasoning (OpenAI's reply shape)."""

    model_config = ConfigDict(extra="ignore")
    description: str = ""
    conclusion: str = ""


class ScoreVerdict(BaseModel):
    """A ``score_model`` grader's reply: the score, after its reasoning."""

    model_config = ConfigDict(extra="ignore")
    steps: list[Step] = Field(default_factory=list)
    result: float


def label_verdict(labels: Sequence[str]) -> type[BaseModel]:
    """A ``label_model`` grader's reply: one of `labels`, after its reasoning."""
    return create_model(
        "LabelVerdict",
        __config__=ConfigDict(extra="ignore"),
        steps=(list[Step], Field(default_factory=list)),
        result=(Literal[tuple(labels)], ...),  # type: ignore[arg-type]
    )


def litellm_model(model: str, models: Mapping[str, str]) -> str:
    """The litellm model string a grader's `model` is called as."""
    if model in models:
        return models[model]
    return model if "/" in model else f"openai/{model}"


_TEXT_PARTS = ("input_text", "output_text")


def texts(content: Any) -> list[str]:
    """The template strings in a message's content (what `messages` renders)."""
    if isinstance(content, str):
        return [content]
    if isinstance(content, Mapping):
        return [str(content["text"])]
    return [t for part in content for t in texts(part)]


def _render_content(content: Any, sample: Sample, item: Any) -> str:
    return "".join(render(text, sample, item) for text in texts(content))


def messages(
    inputs: Sequence[Mapping[str, Any]], sample: Sample, item: Any
) -> list[dict[str, Any]]:
    """The chat messages for one rollout: the grader's ``input``, templated.

    Raises:
        NotApplicable: A template names what the rollout lacks.
    """
    out: list[dict[str, Any]] = []
    for message in inputs:
        role = "system" if message["role"] == "developer" else message["role"]
        out.append({"role": role, "content": _render_content(message["content"], sample, item)})
    return out


def reply_format(result: str) -> dict[str, str]:
    """The message that asks for the reply's shape, for a model given no JSON schema."""
    return {
        "role": "system",
        "content": 'Reply with JSON only, in this shape: {"steps": [{"description": "...", '
        f'"conclusion": "..."}}], "result": {result}}}',
    }
