"""A schema's ``$ref`` never makes referee fetch a URL or read a file.

Each attack names its target as a real HTTP server on 127.0.0.1 that counts its hits (it must
get none) or as a local file holding a secret (which must not reach any message).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import referee
from referee.errors import NotApplicable
from referee.verifiers.schema import compile_schema, first_error
from tests.support.schema_host import SECRET, CountingServer, secret_file, server, url_of

__all__ = ["secret_file", "server"]  # the fixtures, used by name


def test_a_remote_ref_is_refused_not_fetched(server: CountingServer) -> None:
    schema = {"type": "object", "properties": {"a": {"$ref": url_of(server)}}}
    with pytest.raises(NotApplicable, match="does not resolve references outside"):
        compile_schema(schema)
    assert server.hits == []


def test_a_file_ref_is_refused_not_read(secret_file: Path) -> None:
    schema = {"properties": {"a": {"$ref": secret_file.as_uri()}}}
    with pytest.raises(NotApplicable) as caught:
        compile_schema(schema)
    assert SECRET not in str(caught.value)


@pytest.mark.parametrize(
    "key",
    [
        "$dynamicRef",  # 2020-12's dynamic reference
        "$recursiveRef",  # 2019-09's
    ],
)
def test_every_reference_keyword_is_refused(server: CountingServer, key: str) -> None:
    with pytest.raises(NotApplicable):
        compile_schema({"properties": {"a": {key: url_of(server)}}})
    assert server.hits == []


def test_a_remote_meta_schema_is_not_fetched(server: CountingServer) -> None:
    # An unknown $schema made jsonschema-rs fetch it while compiling.
    compiled = compile_schema({"$schema": url_of(server, "/meta"), "type": "string"})
    assert first_error(compiled, 1) is not None
    assert server.hits == []


@pytest.mark.parametrize(
    "schema",
    [
        # the same document, by pointer and by anchor
        {"$defs": {"p": {"type": "integer"}}, "properties": {"a": {"$ref": "#/$defs/p"}}},
        {"$defs": {"p": {"$anchor": "p", "type": "integer"}}, "properties": {"a": {"$ref": "#p"}}},
        # a meta-schema both validators ship: no I/O
        {"properties": {"a": {"$ref": "https://json-schema.org/draft/2020-12/schema"}}},
        # "$ref" as data, not a reference
        {"properties": {"a": {"const": {"$ref": "http://127.0.0.1:9/x"}}}},
    ],
)
def test_references_inside_the_document_still_resolve(schema: dict[str, Any]) -> None:
    compiled = compile_schema(schema)
    assert first_error(compiled, {"a": {"type": 3}}) is not None
    assert first_error(compiled, {"b": 1}) is None


def test_a_schema_files_relative_refs_resolve_under_its_folder(tmp_path: Path) -> None:
    (tmp_path / "common.json").write_text(json.dumps({"$defs": {"id": {"type": "integer"}}}))
    compiled = compile_schema(
        {"properties": {"a": {"$ref": "common.json#/$defs/id"}}}, files=tmp_path
    )
    assert first_error(compiled, {"a": "x"}) == "at a: 'x' is not of type 'integer'"
    assert first_error(compiled, {"a": 1}) is None


@pytest.mark.parametrize(
    "ref",
    [
        "../secret.json",  # out of the schema's folder
        "{secret}",  # an absolute path
        "{secret_uri}",  # a file URL
    ],
)
def test_a_schema_files_refs_stay_in_its_folder(
    tmp_path: Path, secret_file: Path, ref: str
) -> None:
    folder = tmp_path / "schemas"
    folder.mkdir()
    ref = ref.format(secret=secret_file, secret_uri=secret_file.as_uri())
    with pytest.raises(NotApplicable) as caught:
        compile_schema({"properties": {"a": {"$ref": ref}}}, files=folder)
    assert SECRET not in str(caught.value)


def test_a_spec_schema_file_with_a_remote_ref_is_a_spec_error(
    tmp_path: Path, server: CountingServer
) -> None:
    (tmp_path / "s.json").write_text(json.dumps({"properties": {"a": {"$ref": url_of(server)}}}))
    spec = tmp_path / "spec.yaml"
    spec.write_text("type: json_schema\nschema_file: s.json\n")
    with pytest.raises(ValueError, match=r"schema_file.*resolve only to JSON files under"):
        referee.load(spec)
    assert server.hits == []
