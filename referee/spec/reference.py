"""The reference of a reward type: what `referee types NAME` prints and the docs site's page.

Both come from the type itself, so they cannot drift from it: an option's type, default and
whether it is required come from the JSON Schema the loader's validation gives
(`referee.spec.model.json_schema`); its meaning, the type's description and its example spec
come from the class docstring (Google style: a summary line, paragraphs, an ``Attributes:``
section and an ``Example:`` section holding a fenced YAML spec, then a ``Scores:`` section
holding the rollouts that spec scores and their values: `referee.spec.examples`). An option a
class does not document is looked up in its bases' docstrings (a judge's ``client`` in
`JudgeOptions`) and, for a judge's flat client options, in `JudgeClient`'s.

A plugin's type gets the same page from the same conventions.
"""

from __future__ import annotations

import dataclasses
import inspect
import json
import re
from collections.abc import Iterable, Mapping
from typing import Any, Final

from referee.judges.client import JudgeClient
from referee.judges.options import CLIENT_OPTIONS, JudgeOptions
from referee.registry import lookup, registered_types
from referee.rewards import runs_where
from referee.rewards.structured.fields import FieldRule
from referee.spec.examples import ScoringExample

__all__ = [
    "COMMON_KEYS",
    "Nested",
    "Option",
    "TypeReference",
    "all_references",
    "index_markdown",
    "type_examples",
    "type_reference",
]

# Keys every reward takes beside its own options (documented once, on the specs guide).
COMMON_KEYS: Final = ("name", "description", "deadline", "run_in", "scale", "offset", "clip")
_ADDED: Final = frozenset({"deadline", "timeout", "run_in"})  # added by the spec model
_SECTION = re.compile(r"^(Attributes|Args|Arguments|Example|Examples|Note|Notes|Raises|Returns"
                      r"|Scores|See Also|Warning|Warnings):\s*$")  # fmt: skip
_ENTRY = re.compile(r"^(?P<names>\w+(?:\s*,\s*\w+)*)(?:\s*\([^)]*\))?:\s*(?P<text>.*)$")
# Option values that are mappings of their own, by their schema definition's name: documented
# under the type's options. (A nested reward or a judge's client is documented elsewhere.)
_NESTED: Final[dict[str, tuple[str, type[Any]]]] = {"FieldRule": ("Field rule", FieldRule)}
_NOT_NESTED: Final = frozenset({"reward", "JudgeClient"})
_LAX_TEXT = ("[0-9", "[iI][nN][fF]", "[nN][aA][nN]", "[oO][fF][fF]")  # lax coercion patterns


@dataclasses.dataclass(frozen=True)
class Option:
    """One option of a reward type, as its reference shows it."""

    name: str
    type: str
    default: str | None
    """The default as it would be written in a spec; None when the option is required."""
    meaning: str
    deprecated: bool = False


@dataclasses.dataclass(frozen=True)
class Nested:
    """A mapping an option takes (a `field_match` field rule), with its own keys."""

    title: str
    summary: str
    options: tuple[Option, ...]


@dataclasses.dataclass(frozen=True)
class TypeReference:
    """Everything the reference says about one reward type."""

    name: str
    summary: str
    description: str
    runs: str
    options: tuple[Option, ...]
    example: str | None
    """A complete spec using the type (YAML), from the docstring's ``Example:`` section."""
    defined_in: str
    """``module.Class``."""
    plugin: bool
    nested: tuple[Nested, ...] = ()
    scores: ScoringExample | None = None
    """The rollouts the example spec scores and their values, from the ``Scores:`` section."""

    def markdown(self, *, heading: int = 1, specs_guide: str | None = None) -> str:
        """The reference as Markdown (the docs page; `referee types NAME` renders it).

        Args:
            heading: The level of the page's heading.
            specs_guide: Where the specs guide is, to link the keys every reward takes.
        """
        h = "#" * heading
        out = [f"{h} `{self.name}`", "", self.summary, ""]
        if self.description:
            out += [self.description, ""]
        where = "a plugin" if self.plugin else "referee"
        out += [f"Runs: **{self.runs}**. Defined in `{self.defined_in}` ({where}).", ""]
        out += [f"{h}# Options", ""]
        out += _table(self.options) if self.options else ["None of its own.", ""]
        for nested in self.nested:
            out += [f"{h}## {nested.title}", "", nested.summary, "", *_table(nested.options)]
        common = ", ".join(f"`{k}`" for k in COMMON_KEYS)
        guide = f"[Specs and composition]({specs_guide})" if specs_guide else "the specs guide"
        out += [f"Every reward also takes {common} (see {guide}).", ""]
        if self.example:
            out += [f"{h}# Example", "", "```yaml", self.example.rstrip(), "```", ""]
        if self.scores:
            out += self.scores.markdown(f"{h}#")
        return "\n".join(out)


def _table(options: Iterable[Option]) -> list[str]:
    out = ["| option | type | default | meaning |", "|---|---|---|---|"]
    for o in options:
        default = "*required*" if o.default is None else f"`{o.default}`"
        meaning = ("**Deprecated.** " if o.deprecated else "") + o.meaning
        cells = (f"`{o.name}`", o.type, default, meaning)
        out.append("| " + " | ".join(_cell(c) for c in cells) + " |")
    return [*out, ""]


def _options(
    properties: Mapping[str, Any],
    required: Iterable[str],
    meanings: Mapping[str, str],
    defs: Mapping[str, Any],
) -> list[Option]:
    needed = set(required)
    return [
        Option(
            key,
            _type_text(prop, defs),
            None if key in needed else _default(prop),
            meanings.get(key) or _plain(prop.get("description", "")),
            bool(prop.get("deprecated")),
        )
        for key, prop in properties.items()
    ]


def _refs(node: Any) -> list[str]:
    """The definitions a schema fragment refers to, in order."""
    if isinstance(node, Mapping):
        ref = node.get("$ref")
        own = [ref.rsplit("/", 1)[-1]] if isinstance(ref, str) else []
        return own + [r for v in node.values() for r in _refs(v)]
    if isinstance(node, list):
        return [r for v in node for r in _refs(v)]
    return []


def _nested(properties: Iterable[Mapping[str, Any]], defs: Mapping[str, Any]) -> list[Nested]:
    out: list[Nested] = []
    seen: set[str] = set()
    for prop in properties:
        for key in _refs(prop):
            if key in seen or key in _NOT_NESTED or key not in defs:
                continue
            seen.add(key)
            schema = defs[key]
            forms = [schema, *schema.get("anyOf", ())]
            body = next((f for f in forms if "properties" in f), None)
            if body is None:
                continue
            title, cls = _NESTED.get(key, (key, type(None)))
            summary, more, _ = _docstring(cls) if cls is not type(None) else ("", "", {})
            summary = f"{summary}\n\n{more}" if more else summary
            meanings = _attributes(cls) if cls is not type(None) else {}
            options = _options(body["properties"], body.get("required", ()), meanings, defs)
            out.append(
                Nested(title, summary or _plain(schema.get("description", "")), tuple(options))
            )
    return out


def type_examples(name: str) -> tuple[str | None, ScoringExample | None]:
    """The registered type `name`'s example spec (its docstring's ``Example:`` YAML) and its
    scoring example (``Scores:``), without the rest of its reference (its options' schema,
    most of `type_reference`'s time).

    Raises:
        KeyError: no type of that name is registered.
        ValueError: its ``Scores:`` section is not a scoring example.
    """
    cls = lookup(name)
    if cls is None:
        raise KeyError(name)
    return _examples(_docstring(cls)[2], name)


def _examples(sections: Mapping[str, str], name: str) -> tuple[str | None, ScoringExample | None]:
    example = _example(sections.get("Example") or sections.get("Examples"))
    return example, _scores(sections.get("Scores"), name)


def type_reference(name: str) -> TypeReference:
    """The reference of the registered reward type `name` (built-in or plugin).

    Raises:
        KeyError: no type of that name is registered.
    """
    from referee.spec.model import json_schema

    cls = lookup(name)
    if cls is None:
        raise KeyError(name)
    schema = json_schema([name])
    defs = schema["$defs"]
    own = defs[f"type-{name}"]
    summary, description, sections = _docstring(cls)
    example, scores = _examples(sections, name)
    properties = {
        key: prop
        for key, prop in sorted(
            own.get("properties", {}).items(), key=lambda kv: _order(cls, kv[0])
        )
        if key not in _ADDED or _own_field(cls, key) or _client_option(cls, key)
    }
    options = _options(properties, own.get("required", ()), _meanings(cls), defs)
    return TypeReference(
        name=name,
        summary=summary,
        description=description,
        runs=runs_where(cls),
        options=tuple(options),
        example=example,
        scores=scores,
        defined_in=f"{cls.__module__}.{cls.__qualname__}",
        plugin=not cls.__module__.startswith("referee."),
        nested=tuple(_nested(properties.values(), defs)),
    )


def index_markdown(references: Iterable[TypeReference], *, link: bool = True) -> str:
    """The table of every type: name (linked to its page), where it runs, its summary."""
    out = ["| type | runs | what it scores |", "|---|---|---|"]
    for ref in references:
        name = f"[`{ref.name}`]({ref.name}.md)" if link else f"`{ref.name}`"
        out.append(f"| {name} | {ref.runs} | {_cell(ref.summary)} |")
    return "\n".join(out) + "\n"


def all_references(*, plugins: bool = False) -> list[TypeReference]:
    """The reference of every registered type (built-in only unless `plugins`)."""
    from referee.spec.model import builtin_types

    return [type_reference(n) for n in (registered_types() if plugins else builtin_types())]


# --- docstrings ---------------------------------------------------------------------------------


def _docstring(cls: type[Any]) -> tuple[str, str, dict[str, str]]:
    """The summary, the description (paragraphs before the sections) and each section's body,
    dedented, of `cls`'s own docstring."""
    text = inspect.cleandoc(cls.__dict__.get("__doc__") or "")
    lines = text.splitlines()
    head: list[str] = []
    sections: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in lines:
        match = _SECTION.match(line)
        if match:
            current = sections.setdefault(match.group(1), [])
        elif current is None:
            head.append(line)
        else:
            current.append(line)
    paragraphs = "\n".join(head).strip().split("\n\n")
    summary = " ".join(paragraphs[0].split()) if paragraphs[0] else ""
    description = "\n\n".join(_plain(p) for p in paragraphs[1:] if p.strip())
    bodies = {k: inspect.cleandoc("\n".join(v)) for k, v in sections.items()}
    return _plain(summary), description, bodies


def _attributes(cls: type[Any]) -> dict[str, str]:
    """The ``Attributes:`` entries of `cls`'s own docstring: name -> text (joined lines)."""
    body = _docstring(cls)[2].get("Attributes", "")
    out: dict[str, str] = {}
    names: list[str] = []
    for line in body.splitlines():
        entry = _ENTRY.match(line) if line and not line[0].isspace() else None
        if entry:
            names = [n.strip() for n in entry.group("names").split(",")]
            for n in names:
                out[n] = entry.group("text").strip()
        elif names and line.strip():
            for n in names:
                out[n] = f"{out[n]} {line.strip()}".strip()
    return {k: _plain(v) for k, v in out.items()}


def _meanings(cls: type[Any]) -> dict[str, str]:
    """Each documented option's meaning, the class's own first, then its bases', then (for a
    judge's flat client options) the client's."""
    out: dict[str, str] = {}
    bases = list(cls.__mro__)
    if _takes_client_flat(cls):
        bases.append(JudgeClient)
    for base in bases:
        for key, text in _attributes(base).items():
            if base is JudgeClient and key not in CLIENT_OPTIONS:
                continue
            out.setdefault(key, text)
    return out


def _example(body: str | None) -> str | None:
    if not body:
        return None
    match = re.search(r"```ya?ml\n(.*?)```", body, re.S)
    return inspect.cleandoc(match.group(1)) + "\n" if match else None


def _scores(body: str | None, name: str) -> ScoringExample | None:
    """The ``Scores:`` section's fenced YAML, parsed (ValueError naming the type if it is not a
    scoring example)."""
    if not body:
        return None
    # A longer fence may hold completions with fenced code of their own (````yaml).
    match = re.search(r"^\s*(`{3,})ya?ml\n(.*?)\n\s*\1\s*$", body, re.S | re.M)
    if match is None:
        raise ValueError(f"{name}: its docstring's Scores: section holds no ```yaml block")
    return ScoringExample.parse(inspect.cleandoc(match.group(2)) + "\n", name)


def _plain(text: str) -> str:
    """reST's double backticks as Markdown's single ones; the rest as written."""
    return re.sub(r"``(.+?)``", r"`\1`", text)


def _cell(text: str) -> str:
    """Text safe inside a Markdown table cell."""
    return " ".join(text.split()).replace("|", "\\|")


# --- the schema, as people read it -------------------------------------------------------------


def _own_field(cls: type[Any], key: str) -> bool:
    if not dataclasses.is_dataclass(cls):
        return False
    return any(f.name == key and f.init for f in dataclasses.fields(cls))


def _takes_client_flat(cls: type[Any]) -> bool:
    """Whether a spec may write `cls`'s client options flat: a judge's, and a type's that says
    so (``client_flat``: `openai_grader`, whose graders name their own models)."""
    return issubclass(cls, JudgeOptions) or bool(getattr(cls, "client_flat", False))


def _client_option(cls: type[Any], key: str) -> bool:
    """A judge's client option written flat (a judge's ``timeout`` is its client's)."""
    return _takes_client_flat(cls) and key in CLIENT_OPTIONS


def _order(cls: type[Any], key: str) -> tuple[int, int]:
    """Options in the order the class declares them; a judge's flat client options after."""
    fields = [f.name for f in dataclasses.fields(cls)] if dataclasses.is_dataclass(cls) else []
    if key in fields:
        return (0, fields.index(key))
    client = [f.name for f in dataclasses.fields(JudgeClient)]
    return (1, client.index(key)) if key in client else (2, 0)


def _default(prop: Mapping[str, Any]) -> str:
    if "default" not in prop:
        return "-"  # optional with no fixed default (e.g. derived from other options)
    return json.dumps(prop["default"], ensure_ascii=False)


def _lax(alternative: Mapping[str, Any]) -> bool:
    """An alternative the schema adds for the loader's lax coercion ("5", true, "yes")."""
    if alternative == {"type": "boolean"}:
        return True
    pattern = alternative.get("pattern", "")
    return alternative.get("type") == "string" and any(p in pattern for p in _LAX_TEXT)


def _type_text(prop: Mapping[str, Any], defs: Mapping[str, Any], depth: int = 0) -> str:
    """A JSON Schema fragment as a short type: ``number``, ``list of string``, ``"a" | "b"``."""
    if depth > 4:
        return "any"
    ref = prop.get("$ref")
    if isinstance(ref, str):
        key = ref.rsplit("/", 1)[-1]
        if key == "reward":
            return "reward (a nested spec)"
        if key == "FieldRule":
            return "field rule"
        if key == "JudgeClient":
            return "judge client"
        target = defs.get(key)
        return _type_text(target, defs, depth + 1) if target else key
    if "const" in prop:
        return json.dumps(prop["const"])
    if "enum" in prop:
        return " | ".join(json.dumps(v) for v in prop["enum"])
    for key in ("anyOf", "oneOf"):
        if key in prop and {"type": "boolean"} in prop[key] and {"enum": [0, 1]} in prop[key]:
            return "boolean"  # the loader's lax booleans: true, 1, "yes", ...
        if key in prop:
            parts = [p for p in prop[key] if not _lax(p)] or prop[key]
            if len(parts) < len(prop[key]) and any(p.get("type") == "boolean" for p in parts):
                parts = [p for p in parts if p.get("type") != "boolean"] or parts
            texts: list[str] = []
            for part in parts:
                text = _type_text(part, defs, depth + 1)
                if text not in texts:
                    texts.append(text)
            nullable = "null" in texts and len(texts) > 1
            texts = [t for t in texts if t != "null" or not nullable]
            return " or ".join(texts) + (" (or null)" if nullable else "")
    kind = prop.get("type")
    if kind == "array":
        items = prop.get("items") or prop.get("prefixItems")
        if isinstance(items, list):
            return "[" + ", ".join(_type_text(i, defs, depth + 1) for i in items) + "]"
        return f"list of {_type_text(items, defs, depth + 1)}" if items else "list"
    if kind == "object":
        values = prop.get("additionalProperties")
        if isinstance(values, Mapping) and values:
            return f"mapping of {_type_text(values, defs, depth + 1)}"
        return "mapping"
    if isinstance(kind, list):
        return " or ".join(str(k) for k in kind)
    if isinstance(kind, str):
        return kind
    return "any"
