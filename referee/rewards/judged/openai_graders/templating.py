"""OpenAI grader templates: ``{{ sample.output_text }}``, ``{{ item.answer.value }}``.

A string of a grader (``input``, ``reference``, a model grader's message text) may hold
``{{ namespace.variable }}`` references, substituted before the grader runs. As OpenAI's graders
guide (developers.openai.com/api/docs/guides/graders, "Templating") has it, "The only supported
namespace values are ``item`` and ``sample``" and "All nested variables can be accessed with
JSON path like syntax". ``item`` is the dataset row (here the rollout's ``reference``, a
mapping); ``sample`` is what the policy produced:

- ``sample.output_text``: "the model output content as a string";
- ``sample.output_json``: "the model output content as a JSON object, only if
  ``response_format`` is included in the sample" (the guide); the run-grader API reference says
  it "will be populated if the model sample is a valid JSON string", and that is what referee
  does: it is filled when the completion's text parses as JSON. A path below it
  (``sample.output_json.answer``) reads into it;
- ``sample.output_tools``: "the model output ``tool_calls``" of the chat completions API: here
  the tool calls of the completion's last assistant message, in that shape
  (``[{"id", "type": "function", "function": {"name", "arguments"}}]``); a path below it
  (``sample.output_tools[0].function.name``, as in the guide's tool-call grader) reads into it.

The guide's two other sample variables, ``choices`` and ``output_audio``, are not filled by
referee (a rollout has one completion and no audio): a template naming them is refused when the
spec loads, saying so.

A path is dotted keys, with ``[i]`` or a numeric key for a list's item. A string substitutes as
it is; any other value as its JSON text. The substituted text is data, unchanged and unfenced
(OpenAI's semantics: the config must behave as it did).

Never a silent pass: a reference to an ``item`` field the row lacks is a `NotApplicable` naming
the reference (``Failure("not_applicable")``: the dataset's fault), never an empty string that a
check could match. A path into ``output_json`` or ``output_tools`` that this completion lacks
(not JSON, no such key, no tool call) is `SampleLacks`: the policy did not produce what the
grader reads, and the reward scores it 0 with the reason (masking it instead would let a policy
escape a low score by breaking its output's shape). A namespace OpenAI does not define is
refused when the spec loads.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from referee.errors import NotApplicable, RefereeError
from referee.rollout import Rollout

__all__ = ["Sample", "TemplateError", "check_template", "references", "render"]

_REF = re.compile(r"\{\{\s*(.*?)\s*\}\}", re.DOTALL)
_PART = re.compile(r"([^.\[\]]+)|\[(\d+)\]")
SAMPLE_VARIABLES = ("output_text", "output_json", "output_tools")
UNFILLED_SAMPLE_VARIABLES = ("choices", "output_audio")
"""OpenAI's sample variables referee does not fill (one completion, no audio)."""


class TemplateError(RefereeError, ValueError):
    """A template reference that can never resolve (a spec error)."""


class SampleLacks(RefereeError, ValueError):
    """The completion lacks what a template or a metric reads (the policy's fault: a 0)."""


@dataclass(frozen=True)
class Sample:
    """What the ``sample`` namespace holds for one rollout."""

    output_text: str
    output_json: Any
    is_json: bool
    output_tools: list[dict[str, Any]]

    @classmethod
    def of(cls, rollout: Rollout) -> Sample:
        text = rollout.completion_text
        try:
            parsed, is_json = json.loads(text), True
        except (ValueError, RecursionError):
            parsed, is_json = None, False
        tools: list[dict[str, Any]] = []
        if not isinstance(rollout.completion, str):
            for message in reversed(rollout.completion):
                if message.role == "assistant":
                    for call in message.tool_calls or ():
                        arguments = call.arguments
                        tools.append({
                            "id": call.id,
                            "type": "function",
                            "function": {
                                "name": call.name,
                                "arguments": arguments
                                if isinstance(arguments, str)
                                else json.dumps(arguments),
                            },
                        })  # fmt: skip
                    break
        return cls(text, parsed, is_json, tools)

    def as_dict(self) -> dict[str, Any]:
        """The ``sample`` argument of a python grader's ``grade(sample, item)``."""
        return {
            "output_text": self.output_text,
            "output_json": self.output_json,
            "output_tools": self.output_tools,
        }


def _path(text: str) -> tuple[str, list[str]]:
    """``item.a.b[0]`` as ``("item", ["a", "b", "0"])``."""
    namespace, _, rest = text.partition(".")
    parts: list[str] = []
    pos = 0
    while pos < len(rest):
        if rest[pos] == ".":
            pos += 1
            continue
        match = _PART.match(rest, pos)
        if match is None:
            raise TemplateError(f"template {{{{ {text} }}}}: cannot read the path {rest!r}")
        parts.append(match.group(1) if match.group(1) is not None else match.group(2))
        pos = match.end()
    return namespace.strip(), [p.strip() for p in parts]


def references(template: str) -> Iterator[str]:
    """The ``{{ ... }}`` references in `template`, as written inside the braces."""
    for match in _REF.finditer(template):
        yield match.group(1)


def check_template(template: str) -> bool:
    """Check `template`'s references; whether any reads ``item``.

    Raises:
        TemplateError: A namespace other than ``item``/``sample``, a sample variable referee
            does not fill, or a path below ``output_text``.
    """
    uses_item = False
    for ref in references(template):
        namespace, parts = _path(ref)
        if namespace == "item":
            uses_item = True
        elif namespace == "sample":
            if parts and parts[0] in UNFILLED_SAMPLE_VARIABLES:
                raise TemplateError(
                    f"template {{{{ {ref} }}}}: OpenAI's sample.{parts[0]} is not filled by "
                    f"referee (it fills {', '.join(SAMPLE_VARIABLES)})"
                )
            if not parts or parts[0] not in SAMPLE_VARIABLES:
                raise TemplateError(
                    f"template {{{{ {ref} }}}}: the sample namespace has "
                    f"{', '.join(SAMPLE_VARIABLES)}"
                )
            if parts[0] == "output_text" and len(parts) > 1:
                raise TemplateError(f"template {{{{ {ref} }}}}: {parts[0]} has no fields")
        else:
            raise TemplateError(
                f"template {{{{ {ref} }}}}: the namespace {namespace!r} is not one of OpenAI's "
                "(item, sample)"
            )
    return uses_item


def _walk(
    value: Any, parts: list[str], ref: str, where: str, error: type[Exception] = NotApplicable
) -> Any:
    for i, key in enumerate(parts):
        at = ".".join(parts[: i + 1])
        if isinstance(value, Mapping):
            if key not in value:
                keys = sorted(map(str, value))[:10]
                raise error(f"{{{{ {ref} }}}}: {where} has no field {at!r} (keys: {keys})")
            value = value[key]
        elif isinstance(value, list) and key.isdigit():
            if int(key) >= len(value):
                raise error(f"{{{{ {ref} }}}}: {where} has no item {at!r} (a list of {len(value)})")
            value = value[int(key)]
        else:
            raise error(
                f"{{{{ {ref} }}}}: {where} has no field {at!r} (it is {type(value).__name__})"
            )
    return value


def lookup(ref: str, sample: Sample, item: Any) -> Any:
    """The value a reference (``item.answer``, ``sample.output_text``) names."""
    namespace, parts = _path(ref)
    if namespace == "item":
        if item is None:
            raise NotApplicable(f"{{{{ {ref} }}}}: the rollout has no reference (the item)")
        return _walk(item, parts, ref, "the reference (item)")
    if parts[0] == "output_text":
        return sample.output_text
    if parts[0] == "output_tools":
        tools = sample.output_tools
        return _walk(tools, parts[1:], ref, "the completion's tool calls", SampleLacks)
    if not sample.is_json:
        raise SampleLacks(f"{{{{ {ref} }}}}: the completion is not JSON")
    return _walk(sample.output_json, parts[1:], ref, "the completion's JSON", SampleLacks)


def as_text(value: Any) -> str:
    """A substituted value: a string as it is, anything else as its JSON text."""
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def render(template: str, sample: Sample, item: Any) -> str:
    """`template` with each reference replaced (one pass: substituted text is not read again).

    Raises:
        NotApplicable: A reference names an item field the rollout's reference lacks.
        SampleLacks: A reference names what the completion lacks.
    """
    return _REF.sub(lambda m: as_text(lookup(m.group(1), sample, item)), template)
