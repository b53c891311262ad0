from __future__ import annotations

import gzip
from pathlib import Path
from typing import Any

import pytest

import referee
from referee.errors import RolloutError
from referee.rollouts import RowError, RowOk, detect_format, parse_mapping, read_rollouts
from tests.support.rollouts import write_jsonl


def write_parquet(path: Path, rows: list[dict[str, Any]]) -> Path:
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    pq.write_table(pa.Table.from_pylist(rows), path)
    return path


def ok(items: list[RowOk | RowError]) -> list[Any]:
    return [i.rollout for i in items if isinstance(i, RowOk)]


VERL_ROW = {
    "data_source": "openai/gsm8k",
    "prompt": [{"role": "user", "content": "2+2?"}],
    "ability": "math",
    "reward_model": {"style": "rule", "ground_truth": "4"},
    "extra_info": {"index": 7, "split": "train"},
}


def test_canonical_jsonl_and_parquet_give_the_same_rollouts(tmp_path: Path) -> None:
    rows = [
        {"id": "a", "prompt": "p", "completion": "x", "reference": {"k": 1}, "group": "g"},
        {"id": "b", "prompt": "p", "completion": "y", "reference": {"k": 2}, "group": "g"},
    ]
    from_jsonl = ok(list(read_rollouts(write_jsonl(tmp_path / "r.jsonl", rows))))
    from_parquet = ok(list(read_rollouts(write_parquet(tmp_path / "r.parquet", rows))))
    assert from_jsonl == from_parquet
    assert [r.reference for r in from_jsonl] == [{"k": 1}, {"k": 2}]
    gz = tmp_path / "r.jsonl.gz"
    gz.write_bytes(gzip.compress((tmp_path / "r.jsonl").read_bytes()))
    assert ok(list(read_rollouts(gz))) == from_jsonl


def test_verl_generation_rows_give_one_group_per_prompt(tmp_path: Path) -> None:
    row = {**VERL_ROW, "responses": ["\\boxed{4}", "\\boxed{5}", "four"]}
    path = write_parquet(tmp_path / "gen.parquet", [row])
    rollouts = ok(list(read_rollouts(path)))
    assert [r.completion for r in rollouts] == ["\\boxed{4}", "\\boxed{5}", "four"]
    assert {r.group for r in rollouts} == {"7"} and [r.id for r in rollouts] == [
        "7-0",
        "7-1",
        "7-2",
    ]
    assert rollouts[0].reference == "4" and rollouts[0].prompt_text == "2+2?"
    assert rollouts[0].metadata["data_source"] == "openai/gsm8k"


def test_a_verl_dataset_row_without_responses_is_an_error_row(tmp_path: Path) -> None:
    [item] = list(read_rollouts(write_jsonl(tmp_path / "d.jsonl", [VERL_ROW])))
    assert isinstance(item, RowError) and "responses" in item.message and item.line == 1


def test_verl_rollout_dump(tmp_path: Path) -> None:
    rows = [
        {"input": "Q1", "output": "a", "gts": "4", "score": 1.0, "step": 3, "acc": 1.0},
        {"input": "Q1", "output": "b", "gts": "4", "score": 0.0, "step": 3, "acc": 0.0},
        {"input": "Q2", "output": "c", "gts": "5", "score": 0.0, "step": 3, "acc": 0.0},
    ]
    assert detect_format(rows[0]) == "verl-dump"
    rollouts = ok(list(read_rollouts(write_jsonl(tmp_path / "3.jsonl", rows))))
    assert rollouts[0].group == rollouts[1].group != rollouts[2].group
    assert rollouts[0].metadata == {"acc": 1.0, "step": 3, "trainer_score": 1.0}
    assert [r.reference for r in rollouts] == ["4", "4", "5"]


def test_trl_completions_log_with_a_mapped_reference(tmp_path: Path) -> None:
    rows = [
        {"step": 5, "prompt": "Q", "completion": "x", "accuracy": 1.0, "advantage": 0.5,
         "answer": "x"},
        {"step": 5, "prompt": "Q", "completion": "y", "accuracy": 0.0, "advantage": -0.5,
         "answer": "x"},
    ]  # fmt: skip
    path = write_parquet(tmp_path / "completions_00005.parquet", rows)
    rollouts = ok(list(read_rollouts(path, mapping=parse_mapping(["reference=answer"]))))
    assert [r.reference for r in rollouts] == ["x", "x"]
    assert rollouts[0].group == rollouts[1].group
    assert rollouts[0].metadata["advantage"] == 0.5


def test_openai_chat_rows_split_prompt_and_trajectory(tmp_path: Path) -> None:
    messages = [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "weather?"},
        {"role": "assistant", "content": None,
         "tool_calls": [{"id": "1", "type": "function",
                         "function": {"name": "get_weather", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "1", "content": "sunny"},
        {"role": "assistant", "content": "Sunny."},
    ]  # fmt: skip
    path = write_jsonl(tmp_path / "chat.jsonl", [{"messages": messages, "reference": "Sunny."}])
    [rollout] = ok(list(read_rollouts(path)))
    assert rollout.prompt_text == "weather?" and rollout.completion_text == "Sunny."
    assert isinstance(rollout.completion, list) and len(rollout.completion) == 3
    assert rollout.reference == "Sunny."


def test_mapping_sets_fields_and_metadata_from_dotted_paths(tmp_path: Path) -> None:
    rows = [{"q": "2+2", "out": {"text": "4"}, "gold": {"v": "4"}, "human": 0.9}]
    path = write_jsonl(tmp_path / "x.jsonl", rows)
    mapping = parse_mapping(
        ["prompt=q", "completion=out.text", "reference=gold.v", "metadata.label=human"]
    )
    [rollout] = ok(list(read_rollouts(path, format="canonical", mapping=mapping)))
    assert (rollout.prompt, rollout.completion, rollout.reference) == ("2+2", "4", "4")
    assert rollout.metadata["label"] == 0.9
    assert rollout.metadata["gold"] == {"v": "4"}  # unmapped columns kept as metadata


def test_bad_mappings_and_undetectable_rows_are_clear_errors(tmp_path: Path) -> None:
    with pytest.raises(RolloutError, match="expected field=column"):
        parse_mapping(["reference"])
    with pytest.raises(RolloutError, match="not a rollout field"):
        parse_mapping(["answer=gold"])
    path = write_jsonl(tmp_path / "x.jsonl", [{"question": "q", "answer": "a"}])
    with pytest.raises(RolloutError, match="pass --format"):
        list(read_rollouts(path))
    items = list(read_rollouts(path, format="canonical", mapping={"completion": "missing"}))
    assert isinstance(items[0], RowError) and "no 'missing'" in items[0].message


def test_malformed_lines_keep_their_numbers(tmp_path: Path) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_bytes(b'{"completion": "a"}\n{not json\n\n[1]\n\xff\n{"completion": 3}\n')
    items = list(read_rollouts(path))
    assert [(type(i).__name__, i.line) for i in items] == [
        ("RowOk", 1), ("RowError", 2), ("RowError", 4), ("RowError", 5), ("RowError", 6),
    ]  # fmt: skip


def test_parquet_is_read_in_batches(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import referee.rollouts.readers as readers

    monkeypatch.setattr(readers, "PARQUET_BATCH", 10)
    rows = [{"id": str(i), "completion": f"c{i}"} for i in range(35)]
    items = list(read_rollouts(write_parquet(tmp_path / "many.parquet", rows)))
    assert [i.line for i in items] == list(range(1, 36))
    assert [r.id for r in ok(items)] == [str(i) for i in range(35)]


def test_preference_rows_become_a_group_of_chosen_and_rejected(tmp_path: Path) -> None:
    user = {"role": "user", "content": "2+2?"}
    rows = [
        {"prompt": "2+2?", "chosen": "4", "rejected": "5", "reference": "4", "source": "x"},
        # TRL's implicit-prompt shape: the messages both sides share are the prompt
        {"id": "p2", "chosen": [user, {"role": "assistant", "content": "4"}],
         "rejected": [user, {"role": "assistant", "content": "22"}]},
        {"prompt": "?", "chosen": 4, "rejected": "5"},
    ]  # fmt: skip
    items = list(read_rollouts(write_jsonl(tmp_path / "pairs.jsonl", rows)))
    assert detect_format(rows[0]) == "preference"
    first, second, third, fourth = ok(items)
    assert (first.id, first.completion, first.group, first.reference) == ("1-chosen", "4", "1", "4")
    assert first.metadata == {"source": "x", "preferred": True}
    assert second.metadata["preferred"] is False and second.completion == "5"
    assert third.id == "p2-chosen" and [m.role for m in third.prompt] == ["user"]  # type: ignore[union-attr]
    assert [m.content for m in fourth.completion] == ["22"]  # type: ignore[union-attr]
    [error] = [i for i in items if isinstance(i, RowError)]
    assert error.line == 3 and "'chosen' must be text or chat messages" in error.message


def test_verl_references_stored_as_json_text_are_decoded_as_verl_decodes_them(
    tmp_path: Path,
) -> None:
    """verl's compute_score decodes a ground truth that is a JSON object or array as text; the
    verl readers did not, so `referee score` failed field_match on the rows verl paid 1.0."""
    from referee.backends.verl import compute_score

    truth = '{"company": "Acme", "amount": 1000}'
    completion = '{"company": "ACME", "amount": "1,000"}'
    gen = {**VERL_ROW, "reward_model": {"ground_truth": truth}, "responses": [completion]}
    dump = {"input": "Q", "output": completion, "gts": truth, "score": 1.0, "step": 1}
    plain = {"input": "Q", "output": "4", "gts": "4", "score": 1.0, "step": 1}
    [from_gen] = ok(list(read_rollouts(write_jsonl(tmp_path / "gen.jsonl", [gen]))))
    from_dump, from_plain = ok(
        list(read_rollouts(write_jsonl(tmp_path / "d.jsonl", [dump, plain])))
    )
    assert from_gen.reference == from_dump.reference == {"company": "Acme", "amount": 1000}
    assert from_plain.reference == "4"  # a plain answer stays text
    spec = {"type": "field_match", "fields": {"company": "text", "amount": "number"}}
    [score] = referee.score(referee.load(spec), [from_dump])
    verl = compute_score("openai/gsm8k", completion, truth, spec=spec)
    assert score.value == verl["score"] == 1.0


def test_a_mapped_path_indexes_lists(tmp_path: Path) -> None:
    """--map reaches into lists as field_match's paths do (issue 46): `messages.1.content`,
    and `-1` for the last item; a path past a list's end is an error naming it."""
    row = {"messages": [{"role": "user", "content": "2+2?"}, {"role": "assistant",
           "content": "4"}], "answers": ["4", "four"]}  # fmt: skip
    path = write_jsonl(tmp_path / "r.jsonl", [row])
    mapping = {"prompt": "messages.0.content", "completion": "messages.-1.content",
               "reference": "answers.1"}  # fmt: skip
    [rollout] = ok(list(read_rollouts(path, format="canonical", mapping=mapping)))
    assert (rollout.prompt, rollout.completion, rollout.reference) == ("2+2?", "4", "four")
    [item] = list(read_rollouts(path, format="canonical", mapping={"reference": "answers.2"}))
    assert isinstance(item, RowError) and "'answers.2'" in item.message


def test_rows_with_no_group_are_grouped_by_their_prompt(tmp_path: Path) -> None:
    """OpenAI-chat and canonical rows that name no group: the attempts at one prompt form a
    group (issue 46), under a key that says where it came from; a row's own group, or a mapped
    one, wins."""
    ask = [{"role": "user", "content": "2+2?"}]
    chats = [{"messages": [*ask, {"role": "assistant", "content": a}]} for a in ("4", "5")]
    chats.append({"messages": [{"role": "user", "content": "3+3?"},
                               {"role": "assistant", "content": "6"}]})  # fmt: skip
    a, b, c = ok(list(read_rollouts(write_jsonl(tmp_path / "chat.jsonl", chats))))
    assert a.group == b.group != c.group and a.group.startswith("prompt:")
    plain = [{"prompt": "p", "completion": x} for x in ("1", "2")]
    plain.append({"prompt": "p", "completion": "3", "group": "mine"})
    plain.append({"prompt": "", "completion": "4"})
    path = write_jsonl(tmp_path / "plain.jsonl", plain)
    one, two, three, four = ok(list(read_rollouts(path)))
    assert one.group == two.group != a.group  # another prompt's
    assert one.group.startswith("prompt:") and three.group == "mine" and four.group is None
    mapped = ok(list(read_rollouts(path, mapping={"group": "completion"})))
    assert [r.group for r in mapped] == ["1", "2", "3", "4"]
