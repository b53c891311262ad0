from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path

import pytest

import referee
from referee import SpecError
from referee.compose import Combined, Transform
from referee.rewards import FieldMatch, FieldRule, JsonSchema, MathAnswer
from tests.support.rollouts import make

SCHEMA = {"type": "object", "required": ["a"]}


def write(tmp_path: Path, text: str, name: str = "spec.yaml") -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return path


def test_spec_file_builds_the_same_reward_as_python(tmp_path: Path) -> None:
    (tmp_path / "s.json").write_text(json.dumps(SCHEMA))
    path = write(
        tmp_path,
        """
        name: extraction
        combine: weighted
        components:
          valid: {type: json_schema, schema_file: s.json, weight: 0.2, gate: true}
          fields: {type: field_match, fields: {a: {number: {rel_tol: 0.1}}}, weight: 0.8}
    """,
    )
    from_spec = referee.load(path)
    fields = FieldMatch(fields={"a": FieldRule(match="number", rel_tol=0.1)})
    in_python = referee.Combined(
        components=[
            referee.Component(
                name="valid", reward=JsonSchema(schema=SCHEMA), weight=0.2, gate=True
            ),
            referee.Component(name="fields", reward=fields, weight=0.8),
        ],
        name="extraction",
    )
    rollouts = [make('{"a": 1.05}', {"a": 1}), make('{"b": 1}', {"a": 1}), make("{", {"a": 1})]
    assert referee.score(from_spec, rollouts) == referee.score(in_python, rollouts)
    assert isinstance(from_spec, Combined) and from_spec.name == "extraction"


def test_single_reward_spec_and_shorthand_component() -> None:
    assert isinstance(referee.load({"type": "math_answer", "timeout": 2}), MathAnswer)
    reward = referee.load({"components": {"valid": "json_valid"}})
    assert referee.score(reward, [make("{}")])[0].value == 1.0


def test_transform_keys() -> None:
    reward = referee.load({"type": "json_valid", "scale": 2, "offset": -1, "clip": [0, None]})
    assert isinstance(reward, Transform)
    assert [s.value for s in referee.score(reward, [make("{}"), make("x")])] == [1.0, 0.0]


def test_nested_combination() -> None:
    reward = referee.load({
        "combine": "min",
        "components": {
            "inner": {
                "combine": "max",
                "components": {"a": "json_valid", "b": {"type": "contains", "value": "ok"}},
            },
            "c": {"type": "regex", "regex": "o"},
        },
    })  # fmt: skip
    s = referee.score(reward, [make("ok")])[0]
    assert s.value == 1.0 and s.components["inner.b"] == 1.0 and s.components["inner.a"] == 0.0


# Each case: the spec, the key path the error must name, and words the message must contain.
ERRORS = [
    (
        {"type": "json_shema"},
        "type",
        ["unknown reward type", "did you mean 'json_schema'", "json_valid"],
    ),
    (
        {"type": "json_valid", "extrct": "first"},
        "extrct",
        ["unknown option", "did you mean 'extract'"],
    ),
    # A judge takes its client's options flat: they are among those offered.
    (
        {"type": "rubric_judge", "rubric": "helpfulness", "model": "openai/j", "max_in_fligth": 4},
        "max_in_fligth",
        ["unknown option", "did you mean 'max_in_flight'", "api_base", "retries"],
    ),
    (
        {"type": "json_valid", "extract": "fence"},
        "extract",
        ["invalid value", "'fence'", "'strict', 'fenced' or 'first'"],
    ),
    ({"type": "regex"}, "regex", ["needs option 'regex'"]),
    ({"type": "regex", "regex": "("}, "", ["invalid regular expression"]),
    (
        {"components": {"a": {"type": "json_valid", "weight": "heavy"}}},
        "components.a.weight",
        ["must be a number", "heavy"],
    ),
    (
        {"components": {"a": {"type": "json_valid", "gate": "yes"}}},
        "components.a.gate",
        ["true or false"],
    ),
    (
        {"combine": "median", "components": {"a": "json_valid"}},
        "combine",
        ["unknown combine mode", "weighted | mean"],
    ),
    ({"on_none": "zero", "components": {"a": "json_valid"}}, "on_none", ["skip | fail | value"]),
    ({"components": {}}, "components", ["non-empty mapping"]),
    ({"components": {"a": 3}}, "components.a", ["mapping or a reward type name"]),
    (
        {"components": {"a": "json_valid"}, "weights": 1},
        "weights",
        ["unknown key in a combination"],
    ),
    ({"name": "x"}, "", ["needs 'type'"]),
    ({"type": "json_valid", "clip": [1]}, "clip", ["[low, high]"]),
    ({"type": "json_schema", "schema_file": "/nonexistent.json"}, "", ["does not exist"]),
    ({"type": "json_schema", "schema": {"type": "nope"}}, "", ["not a valid JSON Schema"]),
    ({"type": "field_match", "fields": {"a": "numbr"}}, "fields.a", ["invalid value"]),
    ({"type": "length", "max_length": 10, "cache_length": 20}, "", ["cache_length"]),
    # An unknown option still is one, and the message offers timeout with the rest.
    ({"type": "json_valid", "timeut": 2}, "timeut", ["unknown option", "timeout"]),
    ({"type": "json_valid", "timeout": 0}, "timeout", ["positive number of seconds", "0"]),
    ({"type": "json_valid", "timeout": "2s"}, "timeout", ["positive number of seconds", "2s"]),
    (
        {"components": {"a": "json_valid"}, "timeout": -1},
        "timeout",
        ["positive number of seconds"],
    ),
    # A combination's timeout bounds inline scoring: a judge in it cannot be bounded so.
    (
        {
            "timeout": 2,
            "components": {
                "a": "json_valid",
                "j": {"type": "rubric_judge", "rubric": "helpfulness", "model": "openai/x"},
            },
        },
        "timeout",
        ["cannot score inline", "j", "set deadline on the components"],
    ),
]


@pytest.mark.parametrize(("spec", "path", "words"), ERRORS)
def test_spec_errors_name_path_found_and_expected(spec: dict, path: str, words: list[str]) -> None:  # type: ignore[type-arg]
    with pytest.raises(SpecError) as info:
        referee.load(spec)
    message = str(info.value)
    assert message.startswith("<mapping>")
    assert path in ".".join(map(str, info.value.path))
    for word in words:
        assert word in message, message


def test_errors_name_the_file(tmp_path: Path) -> None:
    path = write(tmp_path, "components:\n  a: {type: nope}\n")
    with pytest.raises(SpecError, match=rf"{path}: components\.a\.type: unknown reward type"):
        referee.load(path)


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("a: [", "not valid YAML"),
        ("- a\n- b\n", "a spec must be a mapping"),
        ("", "a spec must be a mapping"),  # an empty file
    ],
)
def test_unreadable_spec_files(tmp_path: Path, text: str, words: str) -> None:
    with pytest.raises(SpecError, match=words):
        referee.load(write(tmp_path, text))


def test_missing_spec_file(tmp_path: Path) -> None:
    with pytest.raises(SpecError, match="spec file not found"):
        referee.load(tmp_path / "nope.yaml")


def test_plugin_reward_type_from_entry_point(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A real installed-distribution layout: a module plus a .dist-info with entry_points.txt.
    (tmp_path / "referee_test_plugin.py").write_text(
        textwrap.dedent("""
        from dataclasses import dataclass
        from referee import CheckReward

        @dataclass(kw_only=True)
        class Shout(CheckReward):
            \"\"\"1.0 for upper-case completions.\"\"\"
            name: str = "shout"
            def check(self, rollout):
                return rollout.completion_text.isupper()
    """)
    )
    info = tmp_path / "referee_test_plugin-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: referee-test-plugin\nVersion: 1.0\n"
    )
    (info / "entry_points.txt").write_text("[referee.rewards]\nshout = referee_test_plugin:Shout\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    import referee.registry as registry

    monkeypatch.setattr(registry, "_plugins_loaded", False)
    monkeypatch.setattr(registry, "_plugin_names", None)  # read again, and forgotten after
    reward = referee.load({"components": {"loud": {"type": "shout"}}})
    assert [s.value for s in referee.score(reward, [make("HEY"), make("hey")])] == [1.0, 0.0]
    assert "shout" in referee.registered_types()
    monkeypatch.delitem(sys.modules, "referee_test_plugin")
    registry._types.pop("shout", None)


def test_deadline_is_an_option_of_every_reward() -> None:
    leaf = referee.load({"type": "regex", "regex": "a", "deadline": 2})
    assert leaf.deadline == 2.0 and leaf.deadline_seconds == 2.0  # type: ignore[attr-defined]
    assert referee.load({"type": "regex", "regex": "a"}).deadline is None  # type: ignore[attr-defined]
    combined = referee.load({
        "deadline": 1.5,
        "components": {"a": {"type": "json_valid", "deadline": 0.5}, "b": "json_valid"},
    })  # fmt: skip
    assert isinstance(combined, Combined) and combined.deadline == 1.5
    assert [c.reward.deadline for c in combined.components] == [0.5, None]  # type: ignore[attr-defined]
    scaled = referee.load({"type": "json_valid", "deadline": 3, "scale": 2})
    assert isinstance(scaled, Transform) and scaled.reward.deadline == 3.0  # type: ignore[attr-defined]
    with pytest.warns(FutureWarning, match=r"components\.a\.timeout: timeout as the deadline"):
        old = referee.load(
            {"timeout": 1.5, "components": {"a": {"type": "json_valid", "timeout": 0.5}}}
        )
    assert isinstance(old, Combined) and old.deadline == 1.5
    assert old.components[0].reward.deadline == 0.5  # type: ignore[attr-defined]


def test_a_timeout_of_its_own_keeps_its_meaning() -> None:
    # math_answer's timeout bounds its comparison; the deadline is a backstop behind it.
    math = referee.load({"type": "math_answer", "timeout": 2})
    assert isinstance(math, MathAnswer) and math.timeout == 2.0
    assert math.deadline_seconds == 3.0  # its timeout, then its worker killed (a C spin)
    # A judge's flat timeout is its client's, per attempt; its deadline derives from it.
    spec = {"type": "rubric_judge", "rubric": "helpfulness", "model": "openai/x", "timeout": 7}
    judge = referee.load(spec)
    assert judge.client.timeout == 7.0 and judge.timeout is None  # type: ignore[attr-defined]
    assert judge.deadline_seconds == 2 * (5 * (7 + 5) + 4 * 60.0)  # type: ignore[attr-defined]


def test_a_combination_error_names_the_timeout_only_when_the_timeout_caused_it() -> None:
    weights = {"a": {"type": "json_valid", "weight": 1}, "b": {"type": "json_valid", "weight": -1}}
    with pytest.raises(SpecError) as info:
        referee.load({"timeout": 2, "components": weights})
    assert "sum to 0" in str(info.value) and "timeout" not in info.value.path
    assert "found" not in str(info.value)


def test_a_misspelt_combine_mode_gets_a_did_you_mean(tmp_path: Path) -> None:
    path = tmp_path / "s.yaml"
    path.write_text("combine: weigthed\ncomponents:\n  a: {type: exact_match}\n")
    with pytest.raises(SpecError, match=r"unknown combine mode \(did you mean 'weighted'\?\)"):
        referee.load(path)


def test_a_yaml_error_names_the_file_and_line_not_unicode_string(tmp_path: Path) -> None:
    """Issue 46: PyYAML's marks said ``"<unicode string>"``; the error names the spec file and
    the line of the problem."""
    path = tmp_path / "s.yaml"
    path.write_text("combine: weighted\ncomponents:\n  a: {type: exact_match\n  b: x\n")
    with pytest.raises(SpecError) as caught:
        referee.load(path)
    message = str(caught.value)
    assert message.startswith(f"{path}:4: not valid YAML") and "<unicode string>" not in message


def test_several_option_errors_are_all_named(tmp_path: Path) -> None:
    """Issue 46: a second error was "(and 1 more)", never shown."""
    path = tmp_path / "s.yaml"
    path.write_text("components:\n  short: {type: length, max: 100}\n")
    with pytest.raises(SpecError, match=r"\(also components\.short\.max: unknown option\)"):
        referee.load(path)
