"""referee's library-backed verifiers against calling those libraries directly, same run.

1. text_similarity, per metric: referee against the library's own scorer object built once and
   called per pair (sacrebleu's BLEU/CHRF/TER ``sentence_score``, rouge-score's
   ``RougeScorer.score``/``score_multi``, rapidfuzz's ``fuzz.ratio``), on the same
   (completion, references) pairs. Target: referee at most 1.2x the direct time.
2. reasoning_gym: referee against reasoning-gym alone (``extract_answer`` then the task's
   ``score_answer``, looked up once per task with ``get_score_answer_fn``), on entries of
   every task family and answers right, wrong, empty and missing. referee's rollouts carry
   each entry's JSON copy (as a rollout file does); reasoning-gym scores the entry as made.
   Target: at most 1.2x.

Each prints the agreement: rollouts on which referee's value equals the direct one (for
reasoning_gym, or both raise). Each side is timed best-of-N after a warm-up, the two sides
alternating run by run, in CPU time of this process (all its threads: referee's deadline
watchdog counts against referee), so that other work on a shared machine does not.

Usage: python benchmarks/bench_verifiers.py [--pairs 5000] [--entries 20] [--repeat 5]
"""

from __future__ import annotations

import argparse
import contextlib
import io
import random
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import referee  # noqa: E402
from benchmarks.bench_deterministic import best_of_interleaved  # noqa: E402
from referee import Score  # noqa: E402
from referee.reward import CheckReward  # noqa: E402
from referee.rewards.math.reasoning_gym import entry_reference  # noqa: E402

METRICS = ["bleu", "chrf", "chrf++", "ter", "rouge1", "rouge2", "rougeL", "rougeLsum", "fuzzy"]
VOCAB = [
    *("the", "a", "cat", "dog", "sat", "ran", "on", "under", "mat", "table", "quickly"),
    *("slowly", "red", "blue", "house", "garden", "river", "model", "reward", "policy"),
    *("gradient", "token", "answer", "question", "summary", "report", "data", "result"),
]


def similarity_pairs(n: int, seed: int = 0) -> list[tuple[str, list[str]]]:
    """Reference sentences of 8-40 words and completions that edit 0-60% of their words."""
    rng = random.Random(seed)
    # A few common words and many rare ones, roughly as in text.
    vocab = VOCAB * 4 + [f"{w}{k}" for w in VOCAB for k in range(8)]
    pairs = []
    for i in range(n):
        ref = [rng.choice(vocab) for _ in range(rng.randrange(8, 40))]
        rate = rng.choice([0.0, 0.1, 0.3, 0.6])
        hyp = [w if rng.random() > rate else rng.choice(vocab) for w in ref]
        if i % 7 == 0:
            hyp = hyp[: len(hyp) // 2]  # truncated
        refs = [" ".join(ref)]
        if i % 3 == 0:  # a second reference: a paraphrase (a fifth of its words changed)
            refs.append(" ".join(w if rng.random() > 0.2 else rng.choice(vocab) for w in ref))
        pairs.append((" ".join(hyp).capitalize() + ".", refs))
    return pairs


def direct_similarity(metric: str) -> Callable[[str, Sequence[str]], float]:
    """The library's scorer, built once, called the way its sentence-level API calls it."""
    if metric in ("bleu", "chrf", "chrf++", "ter"):
        from sacrebleu.metrics import BLEU, CHRF, TER

        if metric == "bleu":
            bleu = BLEU(effective_order=True)  # what sacrebleu.sentence_bleu builds
            return lambda h, r: bleu.sentence_score(h, r).score / 100
        if metric == "ter":
            ter = TER()
            return lambda h, r: max(0.0, 1 - ter.sentence_score(h, r).score / 100)
        chrf = CHRF(word_order=2 if metric == "chrf++" else 0)
        return lambda h, r: chrf.sentence_score(h, r).score / 100
    if metric == "fuzzy":
        from rapidfuzz import fuzz

        ratio = fuzz.ratio
        return lambda h, r: max(ratio(h, x) for x in r) / 100
    from rouge_score import rouge_scorer

    scorer = rouge_scorer.RougeScorer([metric])

    def rouge(h: str, r: Sequence[str]) -> float:
        result = scorer.score(r[0], h) if len(r) == 1 else scorer.score_multi(list(r), h)
        return float(result[metric].fmeasure)

    return rouge


@dataclass(kw_only=True)
class Constant(CheckReward):
    """A reward that does no work: referee's own cost per rollout, whatever the check."""

    name: str = "constant"

    def check(self, rollout: referee.Rollout) -> Score:
        return Score(value=1.0)


def floor_us(rollouts: list[referee.Rollout], repeat: int) -> float:
    """Microseconds per rollout that referee.score spends around any check."""
    best = min(_timed(lambda: referee.score(Constant(), rollouts)) for _ in range(repeat))
    return best / len(rollouts) * 1e6


def _timed(fn: Callable[[], Any]) -> float:
    start = time.process_time()
    fn()
    return time.process_time() - start


def bench_similarity(n: int, repeat: int) -> None:
    pairs = similarity_pairs(n)
    rollouts = [
        referee.Rollout(id=str(i), completion=h, reference=r) for i, (h, r) in enumerate(pairs)
    ]
    print(f"text_similarity, {n:,} (completion, references) pairs, a third with 2 references")
    worst = 0.0
    for metric in METRICS:
        reward = referee.load({"type": "text_similarity", "metric": metric})
        direct = direct_similarity(metric)
        referee.score(reward, rollouts[:200])  # warm-up
        [direct(h, r) for h, r in pairs[:200]]
        (t_direct, expected), (t_ref, scores) = best_of_interleaved(
            lambda direct=direct: [direct(h, r) for h, r in pairs],  # type: ignore[misc]
            lambda reward=reward: referee.score(reward, rollouts),  # type: ignore[misc]
            repeat,
            clock=time.process_time,
        )
        same = sum(
            1
            for s, e in zip(scores, expected, strict=True)
            if s.value == min(1.0, max(0.0, e))  # referee clamps float noise into [0, 1]
        )
        ratio = t_ref / t_direct
        worst = max(worst, ratio)
        print(
            f"  {metric:<9} direct {t_direct:.3f}s  referee {t_ref:.3f}s  ratio {ratio:.2f}x  "
            f"same values {same:,}/{n:,}"
        )
    print(f"  worst ratio referee/direct: {worst:.2f}x (target <= 1.2x)")
    print(
        f"  referee's own cost around any check: {floor_us(rollouts, repeat):.2f} us per rollout "
        "(a check that does nothing); a metric of about 1 us, like fuzzy, cannot be within 1.2x"
    )


def reasoning_rows(
    per_task: int, tasks: Sequence[str] = ()
) -> list[tuple[str, dict[str, Any], str]]:
    """(task, entry, completion) for every task (or `tasks`): right, wrong, empty and untagged
    answers."""
    import reasoning_gym
    from reasoning_gym.factory import DATASETS

    rows = []
    for task in tasks or sorted(DATASETS):
        if task == "composite":
            continue
        dataset = reasoning_gym.create_dataset(task, seed=7, size=per_task)
        entries = [dataset[i] for i in range(per_task)]
        for i, entry in enumerate(entries):
            other = entries[(i + 1) % per_task]["answer"]
            answer = [entry["answer"], other, "", None][i % 4]
            if answer is None:
                completion = "<think>...</think> I am not sure."
            else:
                completion = f"<think>let me work it out</think>\n<answer>{answer}</answer>"
            rows.append((task, entry, completion))
    return rows


_Scorer = Callable[[str | None, dict[str, Any]], float]
# Scorers of a few microseconds (string or number comparison), where referee's own cost shows.
CHEAP_TASKS = ("chain_sum", "leg_counting", "letter_counting", "spell_backward", "word_sorting")


def reasoning_scorers(rows: list[tuple[str, dict[str, Any], str]]) -> dict[str, _Scorer]:
    """Each task's score_answer, looked up once (as referee keeps its own, per reward)."""
    from reasoning_gym import get_score_answer_fn

    return {task: get_score_answer_fn(task) for task in {t for t, _, _ in rows}}


def direct_reasoning(
    rows: list[tuple[str, dict[str, Any], str]], scorers: dict[str, _Scorer]
) -> list[float | None]:
    from reasoning_gym.utils import extract_answer

    out: list[float | None] = []
    for task, entry, completion in rows:
        try:
            out.append(float(scorers[task](extract_answer(completion), entry)))
        except Exception:
            out.append(None)  # what the scorer raised
    return out


def bench_reasoning(per_task: int, repeat: int) -> None:
    with contextlib.redirect_stdout(io.StringIO()):  # some scorers print
        rows = reasoning_rows(per_task)
    rollouts = [
        referee.Rollout(id=str(i), completion=c, reference=entry_reference(e))
        for i, (_, e, c) in enumerate(rows)
    ]
    reward = referee.load({"type": "reasoning_gym", "allow_eval": True})
    tasks = len({t for t, _, _ in rows})
    with contextlib.redirect_stdout(io.StringIO()):
        referee.score(reward, rollouts)  # warm-up: every task's scorer built once
        scorers = reasoning_scorers(rows)
        direct_reasoning(rows, scorers)
        (t_direct, expected), (t_ref, scores) = best_of_interleaved(
            lambda: direct_reasoning(rows, scorers),
            lambda: referee.score(reward, rollouts),
            repeat,
            clock=time.process_time,
        )
    same = sum(
        1
        for s, e in zip(scores, expected, strict=True)
        if (s.value == e if e is not None else s.failure is not None and s.failure.type == "error")
    )
    raised = sum(1 for e in expected if e is None)
    print(
        f"reasoning_gym, {len(rows):,} rollouts over {tasks} tasks "
        f"(right, wrong, empty, untagged answers; allow_eval: true)"
    )
    print(f"  direct (extract_answer + get_score_answer_fn's score_answer): {t_direct:.3f}s")
    print(f"  referee: {t_ref:.3f}s  ({len(rows) / t_ref:,.0f} rollouts/s)")
    print(f"  same verdicts on {same:,}/{len(rows):,} ({raised} where score_answer raised)")
    print(f"  ratio referee/direct: {t_ref / t_direct:.2f}x (target <= 1.2x)")
    with contextlib.redirect_stdout(io.StringIO()):
        cheap_rows = reasoning_rows(per_task * 50, CHEAP_TASKS)
    cheap_rollouts = [
        referee.Rollout(id=str(i), completion=c, reference=entry_reference(e))
        for i, (_, e, c) in enumerate(cheap_rows)
    ]
    with contextlib.redirect_stdout(io.StringIO()):
        (t_d, _), (t_r, _) = best_of_interleaved(
            lambda: direct_reasoning(cheap_rows, scorers),
            lambda: referee.score(reward, cheap_rollouts),
            repeat,
            clock=time.process_time,
        )
    n = len(cheap_rows)
    print(
        f"  the {len(CHEAP_TASKS)} cheapest scorers alone ({n:,} rollouts): direct "
        f"{t_d / n * 1e6:.1f} us, referee {t_r / n * 1e6:.1f} us per rollout "
        f"({t_r / t_d:.2f}x; referee's floor {floor_us(cheap_rollouts, repeat):.2f} us)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--pairs", type=int, default=5_000)
    parser.add_argument("--entries", type=int, default=20, help="entries per reasoning-gym task")
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    bench_similarity(args.pairs, args.repeat)
    bench_reasoning(args.entries, args.repeat)


if __name__ == "__main__":
    main()
