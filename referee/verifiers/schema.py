"""JSON Schema validation with validators compiled once per schema.

Validity is decided by jsonschema-rs (compiled Rust, about 100 times faster) where it is
installed and accepts the schema; an instance it rejects goes to the Python `jsonschema`
validator, which gives the error message and has the last word (so a dialect difference, for
example in `pattern` regexes, can only ever make referee agree with `jsonschema`). Formats are
not asserted, as in `jsonschema` by default.

Two things differ from a plain `jsonschema` validator, both for hostile instances:

- Numbers that `referee.verifiers.jsontext` keeps as `decimal.Decimal` (integers of more than
  4300 digits, numbers beyond float range) are numbers, integers when integral, and compared
  exactly, including by ``multipleOf``; jsonschema-rs is not asked about them (it misreads
  integers it cannot convert).
- ``pattern`` and ``patternProperties`` run through `referee.verifiers.patterns` (RE2, or a
  time limit), so a schema's regex cannot hang on what the model wrote.

Nothing is fetched and no file is opened because a schema says so: a schema may come from data
(a rollout's tool definitions), and a ``$ref`` that reached a URL or a local file would make
referee fetch it or read the file into its reasons. A ``$ref`` (``$dynamicRef``,
``$recursiveRef``) must resolve inside the same document, by JSON pointer or anchor (``#...``)
or to a subschema the document names by ``$id`` (``{"$id": "https://x/root", "$ref": "list",
"$defs": {"list": {"$id": "list"}}}``, a relative ``$id`` read against the enclosing one), or
at a JSON Schema meta-schema, which both validators have built in. Any other URI, one that
would be fetched or read, is refused by `compile_schema` before anything is resolved
(`referee.errors.NotApplicable`), and both validators are given a retriever that refuses, so
nothing reaches the network or the disk even if one slipped through.
The one exception is the user's own schema file (`compile_schema(..., files=folder)`): its
relative ``$ref``s to other JSON files under its folder are read once, at compile time.
"""

from __future__ import annotations

import decimal
import functools
import json
import threading
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any, cast
from urllib.parse import urldefrag, urljoin, urlsplit

import jsonschema
import jsonschema_specifications  # type: ignore[import-untyped]
from jsonschema.exceptions import ValidationError, best_match
from jsonschema.protocols import Validator
from referencing import Registry, Resource, Specification
from referencing.jsonschema import DRAFT202012, specification_with

from referee.errors import NotApplicable
from referee.verifiers.patterns import compile_pattern

__all__ = ["CompiledSchema", "compile_schema", "first_error"]

try:
    import jsonschema_rs
except ImportError:  # pragma: no cover - the Python validator does everything then
    jsonschema_rs = None  # type: ignore[assignment]

_lock = threading.Lock()
_compiled: dict[str, CompiledSchema] = {}


@dataclass(frozen=True, slots=True)
class CompiledSchema:
    """A schema's Python validator and, where available, its jsonschema-rs twin."""

    python: Validator
    fast: Any | None


def _refuse_retrieval(uri: str) -> Any:
    """jsonschema-rs's retriever: nothing named by a schema is fetched or read."""
    raise LookupError(f"referee does not retrieve {uri!r}")


def _fast_validator(schema: Mapping[str, Any] | bool) -> Any | None:
    if jsonschema_rs is None:
        return None
    try:
        plain = dict(schema) if isinstance(schema, Mapping) else schema
        # Its default retriever fetches URLs and reads files (even for an unknown $schema).
        return jsonschema_rs.validator_for(
            plain, validate_formats=False, retriever=_refuse_retrieval
        )
    except Exception:  # a schema it cannot take (an unknown $schema, ...): Python alone, then
        return None


def compile_schema(
    schema: Mapping[str, Any] | bool, *, files: str | Path | None = None
) -> CompiledSchema:
    """Validators for `schema`, built once per distinct schema and shared.

    The draft comes from ``$schema``; Draft 2020-12 when the schema does not say. A ``$ref``
    must point into `schema` itself (``#...``, or a subschema it names by ``$id``) or at a
    JSON Schema meta-schema; nothing is fetched or read (see the module docstring).

    Args:
        schema: The schema. One that comes from data is compiled without `files`.
        files: The folder of the user's own schema file: relative ``$ref``s to JSON files
            inside it (``common.json#/$defs/id``) are read now and resolve; one that leaves
            the folder, or names a URL or an absolute path, is still refused.

    Raises:
        jsonschema.exceptions.SchemaError: The schema itself is invalid for its draft.
        referee.errors.NotApplicable: A ``$ref`` points outside the schema (a URL, a file).
    """
    folder = None if files is None else Path(files).resolve()
    key = json.dumps([schema, str(folder)], sort_keys=True, default=str)
    compiled = _compiled.get(key)
    if compiled is not None:
        return compiled
    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    cls.check_schema(schema)  # type: ignore[arg-type]  # booleans are valid schemas too
    # Without a registry of its own, jsonschema fetches any URL a $ref names.
    registry, read_files = _registry(schema, cls, folder)
    python = _hardened(cls)(schema, registry=registry)
    # jsonschema-rs would resolve the relative file names its own way: Python alone then.
    compiled = CompiledSchema(python, None if read_files else _fast_validator(schema))
    with _lock:
        _compiled.setdefault(key, compiled)
    return compiled


# -- $ref: the same document only (or the user's own files) ---------------------------------

_REF_KEYS = ("$ref", "$dynamicRef", "$recursiveRef")
# Values that are data, not subschemas: a "$ref" key inside them is no reference.
_DATA_KEYS = frozenset({"const", "enum", "default", "examples"})
_MAX_REF_FILES = 200


def _specification(cls: Any) -> Specification[Any]:
    """The `referencing` specification of `cls`, a jsonschema validator class (as it uses)."""
    return specification_with(
        cls.ID_OF(cls.META_SCHEMA) or "urn:unknown-dialect", default=Specification.OPAQUE
    )


def _references(schema: Any, base: str, spec: Specification[Any]) -> Iterator[tuple[str, str]]:
    """Every reference in `schema` with the URI it resolves to, against the nearest ``$id``.

    Looks everywhere but inside const/enum/default/examples (a pointer can reach a subschema
    under an unknown keyword too). A subschema's ``$schema`` switches the dialect for its
    ``$id`` (``id`` in draft 4), as `referencing` reads it.
    """
    stack = [(schema, base, spec)]
    while stack:
        item, base, spec = stack.pop()
        if isinstance(item, Mapping):
            dialect = item.get("$schema")
            if isinstance(dialect, str):
                spec = specification_with(dialect, default=spec)
            own = spec.id_of(item)
            if isinstance(own, str):  # (a property named "$id" is a subschema, not an id)
                base = urljoin(base, own)
            for key, value in item.items():
                if key in _REF_KEYS and isinstance(value, str):
                    yield value, urljoin(base, value)
                elif key not in _DATA_KEYS:
                    stack.append((value, base, spec))
        elif isinstance(item, list):
            stack.extend((value, base, spec) for value in item)


def _has_id(schema: Any) -> bool:
    return isinstance(schema, Mapping) and ("$id" in schema or "id" in schema)


def _registry(schema: Any, cls: Any, folder: Path | None) -> tuple[Registry[Any], bool]:
    """The meta-schemas, `schema`'s own resources and the files its relative refs name.

    Every resource `schema` embeds (a subschema with an ``$id``, relative ones resolved
    against the enclosing base URI, and the anchors in each) is registered and crawled, so a
    ``$ref`` to one resolves from memory. Whether any file was read comes second.

    Raises:
        NotApplicable: A reference referee will not resolve, with the way to fix it.
    """
    spec = _specification(cls)
    root = spec.create_resource(schema)
    root_uri = root.id() or ""  # where jsonschema puts it (Registry.resolver_with_root)
    # The plain Registry's retriever refuses every URI: one not in it is never fetched.
    registry = jsonschema_specifications.REGISTRY.with_resource(root_uri, root).crawl()
    files = 0
    pending = [(root_uri, schema, spec)]
    while pending:
        base, document, dialect = pending.pop()
        for ref, uri in _references(document, base, dialect):
            target = urldefrag(uri).url
            # "#..." stays in the resource it is written in, however that resource is named.
            if ref.startswith("#") or target in registry:
                continue
            if folder is None or _has_id(document):
                raise NotApplicable(
                    f"$ref {ref!r}: referee does not resolve references outside the schema "
                    "(remote URLs and files are never fetched or read); put the referenced "
                    "schema under $defs and refer to it as '#/$defs/...'"
                )
            files += 1
            if files > _MAX_REF_FILES:
                raise NotApplicable(
                    f"the schema's $refs name more than {_MAX_REF_FILES} files; bundle them"
                )
            contents = _read_ref_file(ref, target, folder)
            resource = Resource.from_contents(contents, default_specification=DRAFT202012)
            registry = registry.with_resource(target, resource).crawl()
            pending.append((target, contents, DRAFT202012))
    return registry, files > 0


def _read_ref_file(ref: str, uri: str, folder: Path) -> Any:
    parts = urlsplit(uri)
    path = (folder / parts.path).resolve()
    if parts.scheme or parts.netloc or uri.startswith("/") or not path.is_relative_to(folder):
        raise NotApplicable(
            f"$ref {ref!r}: a schema file's references resolve only to JSON files under its "
            f"folder {str(folder)!r} (no URLs, no absolute paths, no '..' out of it); copy "
            "the referenced schema there or under $defs"
        )
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise NotApplicable(f"$ref {ref!r}: cannot read {str(path)!r} as JSON: {exc}") from None


def first_error(
    schema: CompiledSchema, instance: Any, *, exact_numbers: bool | None = None
) -> str | None:
    """None when `instance` is valid, else the most relevant error with its path.

    Args:
        schema: From `compile_schema`.
        instance: The JSON value.
        exact_numbers: Whether `instance` holds a `decimal.Decimal`, as
            `ParsedJson.exact_numbers` says. None looks through it, and also reads integers
            too long for jsonschema-rs (or for printing in a message) as Decimals.

    Raises:
        VerifierTimeout: A ``pattern`` that needs the backtracking engine ran out of time.
    """
    fast = schema.fast
    if exact_numbers is None:
        exact_numbers = _holds_exact_numbers(instance)
        if exact_numbers:
            instance = _long_ints_as_decimals(instance)
    if fast is not None and not exact_numbers:
        try:
            if fast.is_valid(instance):
                return None
        except Exception:  # a value it cannot convert (a huge integer, ...): Python decides
            pass
    # The first error only: a valid instance costs exactly what is_valid costs, and an invalid
    # one stops there too (ranking every error costs more than validating). best_match still
    # descends into the first error's anyOf/oneOf context for the most specific message.
    first = next(schema.python.iter_errors(instance), None)
    if first is None:
        return None
    error = best_match((first,))
    where = "/".join(str(p) for p in error.absolute_path) or "(root)"
    message = _shorten_instance(error.message, error.instance)
    if len(message) > 300:
        message = message[:300] + "..."
    return f"at {where}: {message}"


def _shorten_instance(message: str, instance: Any) -> str:
    """`message` with the long value it starts with (jsonschema's habit) cut short."""
    if isinstance(instance, Decimal):
        written = repr(instance)
        short = f"{instance:.12g}" if instance.adjusted() > 24 else str(instance)
    elif isinstance(instance, (int, float, str)) and not isinstance(instance, bool):
        try:
            written = repr(instance)
        except ValueError:  # an int Python refuses to print
            return message
        short = written if len(written) <= 80 else written[:60] + "..."
    else:
        return message
    return short + message.removeprefix(written) if message.startswith(written) else message


# Decimal arithmetic that neither rounds nor overflows (the default context does both).
_WIDE = decimal.Context(
    prec=decimal.MAX_PREC, Emax=decimal.MAX_EMAX, Emin=decimal.MIN_EMIN, traps=[]
)
_RS_MAX_INT_BITS = 14_000  # about 4200 digits: past 4300, jsonschema-rs cannot read an int


def _holds_exact_numbers(instance: Any) -> bool:
    stack = [instance]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
        elif isinstance(item, Decimal) or (
            isinstance(item, int) and item.bit_length() > _RS_MAX_INT_BITS
        ):
            return True
    return False


def _long_ints_as_decimals(instance: Any) -> Any:
    if isinstance(instance, dict):
        return {key: _long_ints_as_decimals(value) for key, value in instance.items()}
    if isinstance(instance, list):
        return [_long_ints_as_decimals(value) for value in instance]
    if isinstance(instance, int) and instance.bit_length() > _RS_MAX_INT_BITS:
        return Decimal(instance)
    return instance


# -- the Python validator, hardened ---------------------------------------------------------


@functools.cache
def _hardened(cls: Any) -> Any:
    """`cls` (a jsonschema validator class) taking Decimals and running patterns safely."""
    plain = cls.TYPE_CHECKER

    def is_integer(checker: Any, instance: Any) -> bool:
        if isinstance(instance, Decimal):
            return instance == instance.to_integral_value(decimal.ROUND_DOWN, _WIDE)
        return bool(plain.is_type(instance, "integer"))

    # A float step is read as written (0.01, not its binary neighbour), as a person means it.
    def multiple_of(validator: Any, step: Any, instance: Any, schema: Any) -> Iterator[Any]:
        if not isinstance(instance, Decimal):
            yield from plain_multiple_of(validator, step, instance, schema)
        elif not _is_multiple(instance, Decimal(str(step))):
            yield ValidationError(f"{instance!r} is not a multiple of {step}")

    name = "divisibleBy" if "divisibleBy" in cls.VALIDATORS else "multipleOf"  # draft 3's name
    plain_multiple_of = cls.VALIDATORS.get(name)
    overrides = {"pattern": _pattern, "patternProperties": _pattern_properties, name: multiple_of}
    return jsonschema.validators.extend(  # type: ignore[no-untyped-call]
        cls,
        validators={k: v for k, v in overrides.items() if k in cls.VALIDATORS},
        type_checker=plain.redefine("integer", is_integer),
    )


def _is_multiple(value: Decimal, step: Decimal) -> bool:
    """Whether `value` / `step` is an integer, exactly, in time linear in their digits."""
    value, step = value.copy_abs(), step.copy_abs()  # exact, where abs() would round
    if value.is_zero():
        return True
    if value < step:
        return False
    v, s = value.as_tuple(), step.as_tuple()
    v_exp, s_exp = cast(int, v.exponent), cast(int, s.exponent)  # both are finite
    context = decimal.Context(
        prec=len(v.digits) + 1, Emax=decimal.MAX_EMAX, Emin=decimal.MIN_EMIN, traps=[]
    )
    # step = 2**a * 5**b * r * 10**e with a, b < 4 * its digits and r prime to ten: once value
    # carries that many more factors of ten, more of them cannot change the answer, so a huge
    # exponent (1e999999999) comes down to there before dividing.
    shift = (v_exp - s_exp) - 4 * len(s.digits)
    if shift > 0:
        value = context.scaleb(value, Decimal(-shift))
    lowest = min(v_exp - max(shift, 0), s_exp)
    context.prec = max(value.adjusted(), step.adjusted()) - lowest + 2
    return context.remainder(value, step).is_zero()


def _pattern(validator: Any, pattern: str, instance: Any, schema: Any) -> Iterator[Any]:
    if validator.is_type(instance, "string") and not compile_pattern(pattern).search(instance):
        yield ValidationError(f"{instance!r} does not match {pattern!r}")


def _pattern_properties(
    validator: Any, patterns: dict[str, Any], instance: Any, schema: Any
) -> Iterator[Any]:
    if not validator.is_type(instance, "object"):
        return
    for pattern, subschema in patterns.items():
        compiled = compile_pattern(pattern)
        for key, value in instance.items():
            if compiled.search(key):
                yield from validator.descend(value, subschema, path=key, schema_path=pattern)
