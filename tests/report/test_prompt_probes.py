"""`copy_prompt_template`: the probe that copies what the prompt offers to copy (issue 34).

A real GRPO run on the extraction task learned to copy the prompt's JSON hint, placeholders
and all: valid JSON, so a `json_schema` component worth 0.2 paid for no extraction at all.
"""

from __future__ import annotations

import json
import subprocess
import sys
from importlib import resources
from pathlib import Path
from typing import Any

import pytest
import yaml

import referee
from referee import Rollout
from referee._aio import run_sync
from referee.report.hacks import PROBES, PROMPT_CANDIDATES, TEXT_LIMIT, Gold, prompt_candidates
from referee.report.probes import ProbeReport, run_probes

DEMO = resources.files("referee") / "data" / "demo"
HINT = '{"company": "<name>", "amount": "<amount>"}'
DEALS = [
    ("Acme Robotics", "$12 million", "Northwind Capital"),
    ("Blue Harbor Labs", "$3.5 million", "Fjord Partners"),
    ("Cedar Health", "$40 million", "Summit Growth"),
]


def _schema(strict: bool) -> dict[str, Any]:
    field: dict[str, Any] = {"type": "string", "minLength": 1}
    if strict:  # a value that looks like a placeholder is no value
        field["not"] = {"pattern": "^<.*>$"}
    return {"type": "object", "required": ["company", "amount"],
            "properties": {"company": field, "amount": field}}  # fmt: skip


def extraction_spec(schema: str = "loose") -> dict[str, Any]:
    """The issue's spec: a weighted `json_schema` (0.2) and `field_match` (0.8); "strict"
    forbids placeholder values, "gate" makes the schema a gate that pays nothing alone."""
    valid: dict[str, Any] = {"type": "json_schema", "schema": _schema(schema == "strict"),
                             "weight": 0.2}  # fmt: skip
    if schema == "gate":
        valid.update(weight=0, gate=True)
    return {
        "name": "extraction",
        "combine": "weighted",
        "components": {
            "valid": valid,
            "fields": {"type": "field_match", "weight": 0.8,
                       "fields": {"company": "text", "amount": "text"}},
        },
    }  # fmt: skip


def extraction_rollouts() -> list[Rollout]:
    rollouts = []
    for n, (company, amount, lead) in enumerate(DEALS):
        prompt = (f"{company} raised {amount} in a Series A led by {lead}.\n"
                  f"Reply with JSON only: {HINT}")  # fmt: skip
        ref = {"company": company, "amount": amount}
        rollouts += [
            Rollout(id=f"{n}-gold", group=str(n), prompt=prompt, completion=json.dumps(ref),
                    reference=ref),
            Rollout(id=f"{n}-miss", group=str(n), prompt=prompt,
                    completion=json.dumps({"company": lead, "amount": amount}), reference=ref),
        ]  # fmt: skip
    return rollouts


def probes(reward: Any, rollouts: list[Rollout], **kw: Any) -> ProbeReport:
    return run_sync(run_probes(reward, rollouts, **kw))


def texts(prompt: Any, completion: str = "42") -> list[str]:
    [probe] = [p for p in PROBES if p.name == "copy_prompt_template"]
    return probe.texts(Gold(Rollout(prompt=prompt, completion=completion)))


def test_the_loose_extraction_spec_pays_for_the_copied_placeholders() -> None:
    result = probes(referee.load(extraction_spec("loose")), extraction_rollouts())
    assert result.fraction == 0.5  # the default bar: 0.2 of 1.0 would pass under it
    assert result.failed == ("copy_prompt_template",)  # and no other probe beats it
    copied = result.probes["copy_prompt_template"]
    assert copied.tried == copied.flagged == 3
    example = copied.examples[0]
    assert example.completion == HINT and example.probe == pytest.approx(0.2)
    assert example.gold == pytest.approx(1.0)


@pytest.mark.parametrize("schema", ["strict", "gate"])
def test_a_spec_that_pays_nothing_for_placeholders_is_not_flagged(schema: str) -> None:
    result = probes(referee.load(extraction_spec(schema)), extraction_rollouts())
    copied = result.probes["copy_prompt_template"]
    assert copied.tried == 3 and copied.flagged == 0 and copied.mean_probe_reward == 0
    assert result.failed == ()


def test_the_copy_is_flagged_on_any_pay_above_an_empty_answers() -> None:
    """Another content probe keeps the `fraction` bar; the copy's bar is what an empty answer
    earns, so a reward that pays a little for every text is not flagged for the copy."""

    def pays_json(rollout: Rollout) -> float:
        text = rollout.completion_text
        if text.startswith('{"company": "Acme'):
            return 1.0
        try:
            json.loads(text)
        except ValueError:
            return 0.0
        return 0.2

    rollouts = extraction_rollouts()[:2]
    only = ["empty", "fake_verdict", "copy_prompt_template"]
    result = probes(referee.reward(pays_json), rollouts, only=only)
    assert result.probes["fake_verdict"].flagged == 0  # 0.2 of 1.0 is under the 0.5 bar
    assert result.failed == ("copy_prompt_template",)

    def pays_anything(rollout: Rollout) -> float:
        return max(pays_json(rollout), 0.2)

    result = probes(referee.reward(pays_anything), rollouts, only=only)
    copied = result.probes["copy_prompt_template"]
    assert copied.tried == 1 and copied.mean_probe_reward == pytest.approx(0.2)
    assert result.failed == ()


def test_the_demo_agent_spec_pays_the_copy_no_more_than_an_empty_answer() -> None:
    """The demo agent's prompt ends "End with 'ANSWER: <city>'"; its spec pays nothing for a
    text without tool calls (tool_use's no_calls is 0, and the calls and answer miss), the
    copy included, as it pays an empty answer."""
    with resources.as_file(DEMO / "agent.jsonl") as path:
        rollouts = [Rollout.model_validate_json(line) for line in path.read_text().splitlines()]
    with resources.as_file(DEMO / "agent.yaml") as spec:
        reward = referee.load(str(spec))
    result = probes(reward, rollouts, only=["copy_prompt_template"])
    copied = result.probes["copy_prompt_template"]
    assert copied.tried >= 1 and copied.mean_probe_reward == 0.0 and result.failed == ()


def test_probe_command_names_the_hack_on_the_loose_spec(tmp_path: Path) -> None:
    rollouts = tmp_path / "in.jsonl"
    rollouts.write_text("".join(r.model_dump_json() + "\n" for r in extraction_rollouts()))
    out = tmp_path / "probes.json"
    cmd = [sys.executable, "-m", "referee.cli", "probe", str(rollouts), "--spec"]
    for schema, code in [("loose", 1), ("strict", 0), ("gate", 0)]:
        spec = tmp_path / f"{schema}.yaml"
        spec.write_text(yaml.safe_dump(extraction_spec(schema)))
        run = subprocess.run([*cmd, str(spec), "--json", str(out)], capture_output=True,
                             text=True)  # fmt: skip
        assert run.returncode == code, run.stdout + run.stderr
        if code:
            assert "hacks that work: copy_prompt_template" in run.stdout
            example = json.loads(out.read_text())["probes"]["copy_prompt_template"]["examples"][0]
            assert example["completion"] == HINT  # the report shows what was copied
        else:
            assert "no probe beat the bar" in run.stdout


def test_a_prompt_without_a_template_gives_no_probe() -> None:
    plain = "Acme Robotics raised $12 million in a Series A. Which company raised money?"
    assert texts(plain) == [] and texts([{"role": "user", "content": plain}]) == []
    rollouts = [
        Rollout(id="p", prompt=plain, completion="Acme Robotics", reference="Acme Robotics")
    ]
    result = probes(referee.load({"type": "exact_match"}), rollouts, only=["copy_prompt_template"])
    assert result.golds == 1 and result.probes["copy_prompt_template"].tried == 0


@pytest.mark.parametrize(
    ("prompt", "expected"),
    [
        # a JSON hint written inline, and one whose bare placeholders are quoted to parse
        (f"Reply with JSON only: {HINT}", [HINT, "<name>", "<amount>"]),
        (
            'Use {"answer": <number>, "unit": <unit>}.',
            ['{"answer": "<number>", "unit": "<unit>"}', "<number>", "<unit>"],
        ),
        # a fenced block, an example output, and a quoted example
        ("Return a list:\n```json\n[1, 2, 3]\n```", ["[1, 2, 3]"]),
        ("Example output: Answer: Paris", ["Answer: Paris"]),
        ('For example, "The answer is 12."', ["The answer is 12."]),
        ("e.g.\n`ANSWER = 7`", ["ANSWER = 7"]),
        # format templates with placeholders
        ("Put it in <answer>...</answer>.", ["<answer>...</answer>"]),
        (
            "Write {answer}, then [your answer], or YOUR_ANSWER.",
            ["{answer}", "[your answer]", "YOUR_ANSWER"],
        ),
        # quoted format text, read from a system message too
        (
            [
                {"role": "system", "content": "Respond in the format `Final: X`."},
                {"role": "user", "content": "6 * 7?"},
            ],
            ["Final: X"],
        ),
        # a quote in a sentence about something else is no format text
        ('The CEO said "we are thrilled". Who raised money?', []),
    ],
)
def test_what_a_prompt_offers_to_copy(prompt: Any, expected: list[str]) -> None:
    assert prompt_candidates(Rollout(prompt=prompt, completion="")) == expected


@pytest.mark.parametrize(
    ("completion", "wrapped"),
    [
        ('```json\n{"company": "Acme"}\n```', f"```json\n{HINT}\n```"),
        ("<think>sums</think>\n<answer>Acme</answer>", f"<answer>{HINT}</answer>"),
        ('{"company": "Acme"}', None),
    ],
)
def test_a_copy_is_also_sent_in_the_gold_answers_wrapper(completion: str,
                                                         wrapped: str | None) -> None:  # fmt: skip
    made = texts(f"Reply with JSON only: {HINT}", completion)
    assert made[0] == HINT
    assert (wrapped in made) is (wrapped is not None)
    assert len(made) == (6 if wrapped else 3)  # three candidates, each wrapped or not


def test_a_prompt_example_that_is_the_gold_answer_is_not_a_probe() -> None:
    gold = '{"company": "Acme"}'
    assert texts(f"Example output: {gold}", gold) == []


@pytest.mark.parametrize(
    "hostile",
    [
        "{" * 1_000_000,  # nesting that never closes
        '{"a": ' * 200_000,
        "[" * 500_000 + "]" * 500_000,  # balanced, but far too long to be a hint
        "<a>" * 400_000,
        "```\n" * 300_000,
        'Example output: "' * 60_000,
        "Reply with [your answer] {answer} <x> " * 30_000,  # many real candidates
    ],
)
def test_a_huge_or_hostile_prompt_is_capped(hostile: str) -> None:
    made = texts(hostile, "<a>" * 100_000 + "</a>")  # a hostile gold completion too
    assert len(made) <= 2 * PROMPT_CANDIDATES and all(len(t) <= 2 * TEXT_LIMIT for t in made)
    assert len(prompt_candidates(Rollout(prompt=hostile, completion=""))) <= PROMPT_CANDIDATES


def test_text_past_the_scanned_part_of_a_prompt_is_not_read() -> None:
    from referee.report.hacks import PROMPT_SCAN

    prompt = "x" * PROMPT_SCAN + f"Reply with JSON only: {HINT}"
    assert texts(prompt) == [] and texts(prompt[PROMPT_SCAN:])[0] == HINT


def test_a_group_reward_judges_each_copy_alone_beside_the_gold_group() -> None:
    sizes: list[int] = []

    class PaysValidJson(referee.GroupRewardBase):
        """Pays 1 for the reference, 0.1 for other JSON: sees the group sizes it is given."""

        name = "pays_valid_json"

        async def evaluate_group(self, rollouts: Any) -> list[float]:
            sizes.append(len(rollouts))
            out = []
            for r in rollouts:
                try:
                    value = json.loads(r.completion_text)
                except ValueError:
                    out.append(0.0)
                    continue
                out.append(1.0 if value == r.reference else 0.1)
            return out

    rollouts = extraction_rollouts()
    result = probes(PaysValidJson(), rollouts, only=["copy_prompt_template"])
    copied = result.probes["copy_prompt_template"]
    assert result.failed == ("copy_prompt_template",) and copied.tried == 3
    assert copied.examples[0].completion == HINT and copied.examples[0].probe == 0.1
    probing = sizes[3:]  # after the three groups were scored to find the golds
    assert probing and set(probing) == {3}  # the gold's group of two, and one probe


def test_the_learn_examples_task_flags_the_loose_spec_and_passes_the_strict_one(
    tmp_path: Path,
) -> None:
    """The task of examples/learn (48 training prompts, SmolLM2's real run), its prompt's hint
    a JSON template with placeholders: `referee probe` before training names the copy on the
    loose spec and finds nothing on the strict one (whose schema refuses placeholders; the
    first answer of a hedge once earned it partial credit: not a hack)."""
    learn = Path(__file__).resolve().parents[2] / "examples" / "learn"
    gold = tmp_path / "gold.jsonl"
    subprocess.run([sys.executable, str(learn / "data.py"), str(gold)], check=True,
                   capture_output=True)  # fmt: skip
    assert '"<name>"' in json.loads(gold.read_text().splitlines()[0])["prompt"][0]["content"]
    for spec, code in [("loose.yaml", 1), ("strict.yaml", 0)]:
        run = subprocess.run(
            [sys.executable, "-m", "referee.cli", "probe", str(gold), "--spec",
             str(learn / spec)], capture_output=True, text=True,
        )  # fmt: skip
        assert run.returncode == code, run.stdout + run.stderr
        last = run.stdout.strip().splitlines()[-1]
        loose = spec == "loose.yaml"
        expected = "hacks that work: copy_prompt_template" if loose else "no probe beat the bar"
        assert last == expected, run.stdout
