"""A Parquet file is read row group by row group against a byte limit, checked before a group
is read (from the footer) and as it is decoded: a huge row group, or one that expands when
decoded, is a clear error, not the process's memory."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("pyarrow", reason="the parquet extra: pip install 'referee[parquet]'")

import pyarrow as pa
import pyarrow.parquet as pq

from referee.errors import RolloutError
from referee.rollouts.readers import read_rollouts

LIMIT = 20_000


def _write(path: Path, completions: list[str], row_group_size: int) -> Path:
    ids = [str(i) for i in range(len(completions))]
    table = pa.table({"id": ids, "completion": completions})
    pq.write_table(table, path, row_group_size=row_group_size)
    return path


def test_a_row_group_over_the_limit_is_refused_before_it_is_read(tmp_path: Path) -> None:
    # A small row group of 20 rows, then one of 100 rows of 1 kB each (about 100 kB).
    path = tmp_path / "r.parquet"
    small = pa.table({"id": [str(i) for i in range(20)], "completion": ["ok"] * 20})
    big = pa.table({"id": [str(i) for i in range(20, 120)], "completion": ["x" * 1000] * 100})
    with pq.ParquetWriter(path, small.schema, compression="none", use_dictionary=False) as w:
        w.write_table(small)
        w.write_table(big)
    read: list[str] = []

    def read_all() -> None:
        for item in read_rollouts(path, max_row_group_bytes=LIMIT):
            read.append(item.rollout.id)  # type: ignore[union-attr]

    with pytest.raises(RolloutError) as caught:
        read_all()
    assert read == [str(i) for i in range(20)]  # the small group's rows came through
    message = str(caught.value)
    # Refused from the footer (what the group declares), naming the group, its first row's
    # number, the limit and the fix.
    assert f"{path}:21: row group 1 (100 rows)" in message
    assert f"limit of {LIMIT}" in message and "row_group_size" in message


def test_a_row_group_that_expands_when_decoded_is_refused(tmp_path: Path) -> None:
    # One repeated 5 kB string, dictionary-encoded and compressed: the footer declares a
    # few kB, the decoded batch holds it 500 times over.
    path = _write(tmp_path / "d.parquet", ["y" * 5000] * 500, row_group_size=500)
    group = pq.ParquetFile(path).metadata.row_group(0)
    assert group.total_byte_size < LIMIT  # the footer lets it by
    with pytest.raises(RolloutError, match="row group 0 as decoded"):
        list(read_rollouts(path, max_row_group_bytes=LIMIT))


def test_row_groups_under_the_limit_are_all_read(tmp_path: Path) -> None:
    path = _write(tmp_path / "ok.parquet", [f"c{i}" for i in range(50)], row_group_size=7)
    items = list(read_rollouts(path, max_row_group_bytes=LIMIT))
    assert [i.rollout.completion for i in items] == [f"c{i}" for i in range(50)]  # type: ignore[union-attr]
