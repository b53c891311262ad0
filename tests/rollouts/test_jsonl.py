from __future__ import annotations

import json
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from referee.rollouts import RowError, RowOk
from referee.rollouts.jsonl import read_jsonl

good_rows = st.builds(
    lambda i, c, g: json.dumps(
        {"id": i, "completion": c, "group": g, "reference": {"x": [1, None]}}
    ),
    st.text(min_size=1, max_size=8),
    st.text(max_size=30),
    st.one_of(st.none(), st.text(max_size=5)),
)
bad_rows = st.sampled_from([
    "{not json",  # broken JSON
    "[1, 2]",  # not an object
    '{"id": "x"}',  # no completion
    '{"completion": 3}',  # wrong type
    '{"completion": "x", "extra": 1}',  # unknown field
])  # fmt: skip
blank = st.sampled_from(["", "   ", "\t"])


@settings(max_examples=60, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(lines=st.lists(st.one_of(good_rows, bad_rows, blank), max_size=25), trailing=st.booleans())
def test_every_non_blank_line_is_one_row_with_its_line_number(
    tmp_path: Path, lines: list[str], trailing: bool
) -> None:
    path = tmp_path / "r.jsonl"
    path.write_text("\n".join(lines) + ("\n" if trailing else ""), encoding="utf-8")
    rows = list(read_jsonl(path))
    expected = [i + 1 for i, line in enumerate(lines) if line.strip()]
    assert [r.line for r in rows] == expected
    for row in rows:
        line = lines[row.line - 1]
        if isinstance(row, RowOk):
            assert row.rollout.id == json.loads(line)["id"]
        else:
            assert isinstance(row, RowError) and row.message


def test_missing_id_defaults_to_line_number(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    path.write_text('\n{"completion": "a"}\n')
    [row] = list(read_jsonl(path))
    assert isinstance(row, RowOk) and row.rollout.id == "2"


def test_bad_utf8_is_an_error_row_not_a_crash(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    path.write_bytes(b'{"completion": "ok"}\n{"completion": "\xff\xfe"}\n{"completion": "ok2"}')
    rows = list(read_jsonl(path))
    assert [type(r).__name__ for r in rows] == ["RowOk", "RowError", "RowOk"]
    assert isinstance(rows[1], RowError) and "UTF-8" in rows[1].message


def test_error_row_keeps_the_id_when_it_can(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    path.write_text('{"id": "q1", "completion": 5}\n')
    [row] = list(read_jsonl(path))
    assert isinstance(row, RowError) and row.id == "q1" and "completion" in row.message
