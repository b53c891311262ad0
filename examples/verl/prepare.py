"""Write verl's train/test parquet files for the structured-extraction task.

    python examples/verl/prepare.py --out ~/data/extraction [--data my.jsonl]

Each row has verl's columns: ``data_source``, ``prompt`` (chat messages), ``ability``,
``reward_model`` (``{"style": "rule", "ground_truth": <reference>}``) and ``extra_info``. The
reference goes in as a JSON string (parquet would otherwise turn a nested object into a struct
and fill in missing keys with nulls); referee decodes it back. The prompt text is copied into
``extra_info["prompt"]``, since verl's ``compute_score`` receives no prompt and judges need it.
"""

from __future__ import annotations

import argparse
import json
import random
from importlib import resources
from pathlib import Path
from typing import Any


def rows(path: str | None) -> list[dict[str, Any]]:
    demo = resources.files("referee") / "data" / "demo" / "extraction.jsonl"
    text = Path(path).read_text() if path else demo.read_text()
    seen: dict[str, dict[str, Any]] = {}
    for line in text.splitlines():
        if line.strip():
            row = json.loads(line)
            seen.setdefault(json.dumps(row["prompt"]), row)
    return list(seen.values())


def to_verl(index: int, row: dict[str, Any], split: str) -> dict[str, Any]:
    prompt = row["prompt"]
    messages = [{"role": "user", "content": prompt}] if isinstance(prompt, str) else prompt
    text = prompt if isinstance(prompt, str) else messages[-1]["content"]
    return {
        "data_source": "referee/extraction",
        "prompt": messages,
        "ability": "extraction",
        "reward_model": {"style": "rule", "ground_truth": json.dumps(row.get("reference"))},
        "extra_info": {"split": split, "index": index, "prompt": text},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True, help="Directory for train.parquet/test.parquet.")
    parser.add_argument("--data", default=None, help="JSONL rows with prompt and reference.")
    parser.add_argument("--test-share", type=float, default=0.2)
    args = parser.parse_args()

    import pyarrow as pa
    import pyarrow.parquet as pq

    data = rows(args.data)
    random.Random(0).shuffle(data)
    cut = max(1, int(len(data) * args.test_share))
    out = Path(args.out).expanduser()
    out.mkdir(parents=True, exist_ok=True)
    for split, part in (("test", data[:cut]), ("train", data[cut:])):
        table = pa.Table.from_pylist([to_verl(i, r, split) for i, r in enumerate(part)])
        pq.write_table(table, out / f"{split}.parquet")
        print(f"wrote {len(part)} rows to {out / f'{split}.parquet'}")


if __name__ == "__main__":
    main()
