"""json_schema's checker agrees with the JSON-Schema-Test-Suite, and resolves what a document holds.

The suite is the one the installed jsonschema's sdist ships, which `make install` unpacks into
the venv (``share/json-schema-test-suite``). Its draft 2020-12 required tests run through
`compile_schema` and `first_error`; a case is left out only where it needs the suite's
``remotes/`` (the documents it serves at http://localhost:1234/), which referee never fetches:
its ``$schema`` names one, or plain jsonschema, given them, retrieves one while validating the
case's instances. That is decided by jsonschema, not by referee's own reading of ``$ref``.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema
import jsonschema_specifications  # type: ignore[import-untyped]
import pytest
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT202012

import referee
from referee.errors import NotApplicable
from referee.rewards.structured.json import JsonSchema
from referee.verifiers.schema import compile_schema, first_error
from tests.support.rollouts import make
from tests.support.schema_host import SECRET, CountingServer, server, url_of

__all__ = ["server"]  # the fixture, used by name

SUITE = Path(sys.prefix, "share", "json-schema-test-suite")
REMOTE = "http://localhost:1234/"


@pytest.fixture(scope="module")
def suite() -> Path:
    if not (SUITE / "tests" / "draft2020-12").is_dir():
        pytest.skip(
            f"the JSON-Schema-Test-Suite is not at {str(SUITE)!r}: `make install` unpacks it "
            "there from the jsonschema sdist"
        )
    return SUITE


def _cases(suite: Path) -> Iterator[tuple[str, dict[str, Any]]]:
    for path in sorted((suite / "tests" / "draft2020-12").glob("*.json")):
        for case in json.loads(path.read_text(encoding="utf-8")):
            yield path.name, case


def _needs_remotes(case: dict[str, Any], remotes: Path) -> bool:
    """Whether plain jsonschema needs a document of the suite's remotes/ for `case`."""
    schema = case["schema"]
    if isinstance(schema, dict) and str(schema.get("$schema", "")).startswith(REMOTE):
        return True  # a meta-schema of its own (vocabularies), served from remotes/
    retrieved: list[str] = []

    def retrieve(uri: str) -> Resource[Any]:
        retrieved.append(uri)
        if not uri.startswith(REMOTE):
            raise LookupError(f"the suite serves nothing but {REMOTE}, not {uri!r}")
        contents = json.loads((remotes / uri.removeprefix(REMOTE)).read_text(encoding="utf-8"))
        return Resource.from_contents(contents, default_specification=DRAFT202012)

    registry = Registry(retrieve=retrieve).combine(jsonschema_specifications.REGISTRY)  # type: ignore[call-arg]
    validator = jsonschema.Draft202012Validator(schema, registry=registry)
    for test in case["tests"]:
        validator.is_valid(test["data"])
    return bool(retrieved)


def test_the_checker_agrees_with_the_test_suite(suite: Path) -> None:
    disagreements: list[str] = []
    total = 0
    for file, case in _cases(suite):
        if _needs_remotes(case, suite / "remotes"):
            continue
        try:
            compiled = compile_schema(case["schema"])
        except NotApplicable as exc:  # no verdict at all: every test of the case disagrees
            refused = f"refused: {exc}"
            compiled = None
        for test in case["tests"]:
            total += 1
            if compiled is None:
                got = refused
            else:
                valid = first_error(compiled, test["data"]) is None
                if valid == test["valid"]:
                    continue
                got = f"valid={valid}"
            disagreements.append(
                f"{file}: {case['description']}: {test['description']}: suite valid="
                f"{test['valid']}, referee {got}"
            )
    agreed = total - len(disagreements)
    print(f"JSON-Schema-Test-Suite draft 2020-12: {agreed} of {total} agree")
    assert total > 1000, "the remote-ref filter left out most of the suite"
    assert not disagreements, f"{agreed} of {total} agree; disagreements:\n" + "\n".join(
        disagreements
    )


# Each schema names its resources under the counting server, so a fetch would be seen.
EMBEDDED: list[tuple[dict[str, Any], Any, Any]] = [
    # the suite's shape: a relative $ref to a relative $id, both under the root's
    ({"$id": "BASE/root", "$ref": "list",
      "$defs": {"list": {"$id": "list", "type": "array", "items": {"type": "string"}}}},
     ["a"], [1]),
    # a relative $id resolves against the nearest enclosing $id, not the root's
    ({"$id": "BASE/a/root.json", "$ref": "b/int.json",
      "$defs": {"b": {"$id": "b/", "$defs": {"i": {"$id": "int.json", "type": "integer"}}}}},
     1, "x"),
    # an $anchor inside an embedded resource, by its absolute URI
    ({"$id": "BASE/root", "$ref": "BASE/item#int",
      "$defs": {"item": {"$id": "item", "$defs": {"i": {"$anchor": "int", "type": "integer"}}}}},
     1, "x"),
    # a JSON pointer into an embedded resource
    ({"$id": "BASE/root", "$ref": "item#/$defs/i",
      "$defs": {"item": {"$id": "item", "$defs": {"i": {"type": "integer"}}}}},
     1, "x"),
    # $dynamicRef to a $dynamicAnchor in an embedded resource, under a property
    ({"$id": "BASE/root", "properties": {"a": {"$dynamicRef": "item#node"}},
      "$defs": {"item": {"$id": "item", "$dynamicAnchor": "node", "type": "integer"}}},
     {"a": 1}, {"a": "x"}),
    # a root without $id that embeds a resource with an absolute one
    ({"$defs": {"a": {"$id": "BASE/a.json", "type": "integer"}}, "$ref": "BASE/a.json"},
     1, "x"),
    # relative $ids with no absolute base anywhere
    ({"$id": "root.json", "$ref": "item.json",
      "$defs": {"item": {"$id": "item.json", "type": "integer"}}},
     1, "x"),
    # a URN as the base URI
    ({"$id": "urn:uuid:deadbeef-1234-ffff-ffff-4321feebdaed",
      "$ref": "urn:uuid:deadbeef-1234-ffff-ffff-4321feebdaed#/$defs/i",
      "$defs": {"i": {"type": "integer"}}},
     1, "x"),
    # draft 7 ($id in definitions; $ref's siblings ignored, so under allOf)
    ({"$schema": "http://json-schema.org/draft-07/schema#", "$id": "BASE/root",
      "definitions": {"i": {"$id": "int.json", "type": "integer"}},
      "allOf": [{"$ref": "int.json"}]},
     1, "x"),
    # draft 4 (id, not $id)
    ({"$schema": "http://json-schema.org/draft-04/schema#", "id": "BASE/root",
      "definitions": {"i": {"id": "int.json", "type": "integer"}},
      "allOf": [{"$ref": "int.json"}]},
     1, "x"),
]  # fmt: skip


@pytest.mark.parametrize(("schema", "valid", "invalid"), EMBEDDED)
def test_refs_to_resources_the_document_embeds_resolve(
    server: CountingServer, schema: dict[str, Any], valid: Any, invalid: Any
) -> None:
    base = url_of(server, "")
    compiled = compile_schema(json.loads(json.dumps(schema).replace("BASE", base)))
    assert first_error(compiled, valid) is None
    assert first_error(compiled, invalid) is not None
    assert server.hits == []


def test_the_reward_takes_a_schema_with_embedded_ids() -> None:
    schema = {
        "$id": "https://example.com/root",
        "$ref": "list",
        "$defs": {"list": {"$id": "list", "type": "array", "items": {"type": "string"}}},
    }
    reward = JsonSchema(schema=schema)
    values = [s.value for s in referee.score(reward, [make('["a"]'), make("[1]")])]
    assert values == [1.0, 0.0]


@pytest.mark.parametrize(
    "schema",
    [
        # a URL nothing in the document defines
        {"$ref": "https://example.com/other.json"},
        # the same beside embedded resources of other names
        {"$id": "https://example.com/root", "$ref": "https://example.com/other.json",
         "$defs": {"x": {"$id": "another.json", "type": "integer"}}},
        # an "$id" inside const is data, not a resource
        {"const": {"$id": "https://example.com/other.json"},
         "$ref": "https://example.com/other.json"},
    ],
)  # fmt: skip
def test_a_ref_to_an_unknown_url_is_refused(schema: dict[str, Any]) -> None:
    with pytest.raises(NotApplicable) as caught:
        compile_schema(schema)
    message = str(caught.value)
    assert "$ref 'https://example.com/other.json'" in message
    assert "does not resolve references outside the schema" in message
    assert "put the referenced schema under $defs" in message  # the fix


def test_the_reward_names_the_refused_ref() -> None:
    with pytest.raises(ValueError, match=r"schema: \$ref 'https://example.com/other.json'"):
        JsonSchema(schema={"$ref": "https://example.com/other.json"})


@pytest.mark.parametrize(
    "schema",
    [
        {"$ref": "other.json"},  # no base URI at all
        {"$id": "https://example.com/root", "$ref": "other.json"},  # under an absolute base
        # a relative base: embedded resources of other names only
        {"$id": "root.json", "$ref": "other.json",
         "$defs": {"x": {"$id": "another.json", "type": "integer"}}},
    ],
)  # fmt: skip
def test_a_relative_file_ref_with_no_embedded_resource_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, schema: dict[str, Any]
) -> None:
    (tmp_path / "other.json").write_text(json.dumps({"const": SECRET}))
    monkeypatch.chdir(tmp_path)  # where a resolver that read files would look
    with pytest.raises(NotApplicable, match=r"\$ref 'other.json': referee does not resolve") as e:
        compile_schema(schema)
    assert SECRET not in str(e.value)
