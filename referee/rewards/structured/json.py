"""Rewards for JSON output: is it valid JSON, does it satisfy a JSON Schema."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Literal

from jsonschema.exceptions import SchemaError

from referee.errors import NotApplicable
from referee.registry import register
from referee.reward import CheckReward
from referee.rewards._extract import JsonExtract, parse_json
from referee.rollout import Rollout
from referee.scores import Score
from referee.verifiers.schema import compile_schema, first_error
from referee.workers import RunIn

__all__ = ["JsonSchema", "JsonValid"]


@register("json_valid")
@dataclass(kw_only=True)
class JsonValid(CheckReward):
    """1.0 when the completion is strict JSON (no NaN/Infinity, no duplicate keys), else 0.0.

    It needs nothing of the rollout but its completion; the reason of a 0.0 says where the
    JSON is invalid, or that it is not of the required type.

    Attributes:
        extract: Where the JSON is: ``strict`` (the whole completion), ``fenced`` (the first
            fenced code block) or ``first`` (the first JSON object or array anywhere in the
            text).
        require: Which top-level type counts: ``object`` or ``array``; None: any JSON value.

    Example:
        ```yaml
        type: json_valid
        extract: fenced
        require: object
        ```

    Scores:
        ````yaml
        - prompt: 'Give Ada Lovelace''s record as a JSON object in a json code block.'
          completion: |-
            Here is the record:
            ```json
            {"name": "Ada", "born": 1815}
            ```
          value: 1.0
        - prompt: 'Give Ada Lovelace''s record as a JSON object in a json code block.'
          completion: |-
            ```json
            ["Ada", 1815]
            ```
          value: 0.0
        - prompt: 'Give Ada Lovelace''s record as a JSON object in a json code block.'
          completion: |-
            ```json
            {"name": 'Ada'}
            ```
          value: 0.0
        ````
    """

    default_run_in: ClassVar[RunIn] = "inline"  # its cost is bounded

    extract: JsonExtract = "strict"
    require: Literal["object", "array"] | None = None
    name: str = "json_valid"

    def check(self, rollout: Rollout) -> Score:
        parsed = parse_json(rollout.completion_text, self.extract)
        if not parsed.ok:
            return Score(value=0.0, reason=f"invalid JSON: {parsed.error}")
        wanted = {"object": dict, "array": list}.get(self.require or "")
        if wanted is not None and not isinstance(parsed.value, wanted):
            return Score(value=0.0, reason=f"JSON is not an {self.require}")
        return Score(value=1.0, reason="valid JSON")


@register("json_schema")
@dataclass(kw_only=True)
class JsonSchema(CheckReward):
    """1.0 when the completion's JSON satisfies a JSON Schema, else 0.0 with the first error.

    The draft comes from the schema's ``$schema`` (Draft 2020-12 by default). The validator is
    compiled once per schema, not per rollout. The JSON is parsed strictly (no NaN or
    Infinity, no duplicate keys); invalid JSON scores 0.0 too. Give exactly one of `schema`
    and `schema_file`; a schema that is not a valid JSON Schema does not load.

    Attributes:
        schema: The schema itself (a mapping, or ``true``/``false``).
        schema_file: Or a path to it (relative paths in a spec file resolve against the spec's
            folder). The file is read once, at construction. Its relative ``$ref``s to other
            JSON files in its own folder (``common.json#/$defs/id``) are read then too; a
            ``$ref`` to a URL, an absolute path or out of that folder is refused, as is any
            ``$ref`` out of an inline `schema` (nothing is fetched).
        extract: Where the JSON is in the completion: ``strict`` (all of it), ``fenced`` (the
            first fenced code block) or ``first`` (the first JSON object or array in it).

    Example:
        ```yaml
        type: json_schema
        extract: fenced
        schema:
          type: object
          required: [name, email, age]
          properties:
            name: {type: string, minLength: 1}
            email: {type: string, pattern: '^[^@ ]+@[^@ ]+$'}
            age: {type: integer, minimum: 0}
          additionalProperties: false
        ```

    Scores:
        ````yaml
        - prompt: 'Give the user''s name, email and age as a JSON object in a json code block.'
          completion: |-
            ```json
            {"name": "Ada", "email": "ada@example.com", "age": 36}
            ```
          value: 1.0
        - prompt: 'Give the user''s name, email and age as a JSON object in a json code block.'
          completion: |-
            ```json
            {"name": "Ada", "email": "ada@example.com", "age": -3}
            ```
          value: 0.0
        - prompt: 'Give the user''s name, email and age as a JSON object in a json code block.'
          completion: |-
            ```json
            {"name": "Ada", "email": "ada at example.com", "age": 36}
            ```
          value: 0.0
        ````
    """

    default_run_in: ClassVar[RunIn] = "inline"  # its cost is bounded

    schema: dict[str, Any] | bool | None = None
    schema_file: str | None = None
    extract: JsonExtract = "strict"
    name: str = "json_schema"
    _validator: Any = field(init=False, repr=False, compare=False, default=None)

    def __post_init__(self) -> None:
        if (self.schema is None) == (self.schema_file is None):
            raise ValueError("give exactly one of schema or schema_file")
        folder = None
        if self.schema is None:
            path = Path(str(self.schema_file))
            try:
                self.schema = json.loads(path.read_text(encoding="utf-8"))
            except FileNotFoundError:
                raise ValueError(f"schema_file {str(path)!r} does not exist") from None
            except json.JSONDecodeError as exc:
                raise ValueError(f"schema_file {str(path)!r} is not valid JSON: {exc}") from None
            folder = path.parent
        self._compile(folder)

    def _compile(self, folder: Path | None) -> None:
        assert self.schema is not None  # (given, or read from schema_file)
        try:
            self._validator = compile_schema(self.schema, files=folder)
        except SchemaError as exc:
            raise ValueError(f"the schema is not a valid JSON Schema: {exc.message}") from None
        except NotApplicable as exc:
            where = f"schema_file {self.schema_file!r}" if folder is not None else "schema"
            raise ValueError(f"{where}: {exc}") from None

    def __setstate__(self, state: dict[str, Any]) -> None:
        # A schema read from `schema_file` travels as read (a worker, a Ray actor on another
        # machine, compiles the same schema, not the file as it is there now).
        if state.get("schema_file") is not None and state.get("schema") is not None:
            self.__dict__.update(state)
            self._compile(Path(str(self.schema_file)).parent)
            return
        super().__setstate__(state)

    def check(self, rollout: Rollout) -> Score:
        parsed = parse_json(rollout.completion_text, self.extract)
        if not parsed.ok:
            return Score(value=0.0, reason=f"invalid JSON: {parsed.error}")
        error = first_error(self._validator, parsed.value, exact_numbers=parsed.exact_numbers)
        if error is not None:
            return Score(value=0.0, reason=f"schema violation {error}")
        return Score(value=1.0, reason="matches schema")
