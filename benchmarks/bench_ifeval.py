"""instruction_following against lm-eval's own IFEval checker, on the same inputs, same run.

1. Agreement: for every instruction type, generated responses (meant to pass and to fail,
   fixed seed; tests/support/ifeval_cases.py) and references of two to four instructions
   ("mixed", as IFEval's prompts); referee's per-instruction verdicts (the reward's
   components) against lm-eval's ``test_instruction_following_strict`` / ``_loose``
   ``follow_instruction_list``. Prints type, cases, agreement in each mode, and each side's
   time per case (strict and loose; best of N on the first `--timed` cases).
2. Throughput: scoring the mixed set, ``referee.score(instruction_following)`` against a loop
   calling lm-eval's two functions directly on prebuilt ``InputExample``s. Target: referee at
   most 1.2x lm-eval's time. Best of N after a warm-up, the sides alternating run by run.

lm-eval runs from its own installed modules (``pip install --no-deps lm-eval``), with NLTK's
English Punkt model written from the data referee reads and langdetect seeded with 0 (see
tests/support/ifeval_oracle.py).

Usage: python benchmarks/bench_ifeval.py [--cases 2000] [--timed 300] [--rollouts 2000]
       [--repeat 5]
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import referee  # noqa: E402
from benchmarks.bench_deterministic import best_of_interleaved  # noqa: E402
from referee.rewards import InstructionFollowing  # noqa: E402
from tests.support import ifeval_cases, ifeval_oracle  # noqa: E402

MODES = ("strict", "loose")
Case = tuple[dict[str, Any], str]


def lm_eval_side(utils: Any, cases: list[Case]) -> Callable[[], dict[str, list[list[bool]]]]:
    """lm-eval's strict and loose functions over the cases (inputs built beforehand)."""
    examples = [
        utils.InputExample(
            key=i,
            instruction_id_list=ref["instruction_id_list"],
            prompt="",
            kwargs=ref["kwargs"],
        )
        for i, (ref, _) in enumerate(cases)
    ]
    responses = [response for _, response in cases]
    strict, loose = utils.test_instruction_following_strict, utils.test_instruction_following_loose

    def run() -> dict[str, list[list[bool]]]:
        return {
            "strict": [
                strict(e, r).follow_instruction_list
                for e, r in zip(examples, responses, strict=True)
            ],
            "loose": [
                loose(e, r).follow_instruction_list
                for e, r in zip(examples, responses, strict=True)
            ],
        }

    return run


def referee_side(cases: list[Case]) -> Callable[[], dict[str, list[list[bool]]]]:
    """The reward, one per mode, over rollouts built beforehand; verdicts from components."""
    rollouts = [referee.Rollout(completion=response, reference=ref) for ref, response in cases]
    rewards = {mode: InstructionFollowing(mode=mode) for mode in MODES}  # type: ignore[arg-type]

    def run() -> dict[str, list[list[bool]]]:
        out = {}
        for mode, reward in rewards.items():
            scores = referee.score(reward, rollouts)
            out[mode] = [[v == 1.0 for v in s.components.values()] for s in scores]
        return out

    return run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--cases", type=int, default=2_000, help="responses per instruction")
    parser.add_argument("--rollouts", type=int, default=2_000, help="mixed rollouts, timed")
    parser.add_argument("--timed", type=int, default=300, help="cases per type timed")
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    logging.disable(logging.CRITICAL)  # lm-eval logs every text langdetect finds no feature in
    utils = ifeval_oracle.load()

    warm = ifeval_cases.mixed_cases(50, seed=99)
    referee_side(warm)()
    lm_eval_side(utils, warm)()

    print(f"Agreement with lm-eval's IFEval checker, {args.cases:,} responses per type")
    header = f"{'type':46} {'cases':>6} {'agree strict':>13} {'agree loose':>12}"
    print(f"{header} {'lm-eval ms':>10} {'referee ms':>10} {'ratio':>6}  (ms: per case)")
    total_cases = total_bad = 0
    groups = [(i, ifeval_cases.cases(i, args.cases)) for i in ifeval_cases.GENERATORS]
    groups.append(("mixed (2-4 instructions)", ifeval_cases.mixed_cases(args.cases)))
    for name, cases in groups:
        theirs, ours = lm_eval_side(utils, cases)(), referee_side(cases)()
        agree = {m: sum(a == b for a, b in zip(ours[m], theirs[m], strict=True)) for m in MODES}
        total_cases += 2 * len(cases)
        total_bad += sum(len(cases) - agree[m] for m in MODES)
        timed = cases[: args.timed]
        (t_lm, _), (t_ref, _) = best_of_interleaved(
            lm_eval_side(utils, timed), referee_side(timed), args.repeat
        )
        n, k = len(cases), len(timed)
        print(
            f"{name:46} {n:>6,} {agree['strict']:>6,}/{n:<6,} {agree['loose']:>5,}/{n:<6,}"
            f" {t_lm / k * 1e3:>10.3f} {t_ref / k * 1e3:>10.3f} {t_ref / t_lm:>5.2f}x"
        )
    print(f"  verdict lists equal on {total_cases - total_bad:,}/{total_cases:,} (case, mode)")

    cases = ifeval_cases.mixed_cases(args.rollouts, seed=7)
    (t_lm, theirs), (t_ref, ours) = best_of_interleaved(
        lm_eval_side(utils, cases), referee_side(cases), args.repeat
    )
    same = sum(ours[m] == theirs[m] for m in MODES)
    instructions = sum(len(ref["instruction_id_list"]) for ref, _ in cases)
    print(
        f"\nThroughput, {len(cases):,} mixed rollouts ({instructions:,} instructions), strict "
        f"then loose, best of {args.repeat}"
    )
    print(f"  lm-eval test_instruction_following_strict + _loose: {t_lm:.3f}s")
    print(f"  referee.score(instruction_following, strict + loose): {t_ref:.3f}s")
    print(f"  same verdicts in {same}/2 modes")
    print(f"  ratio referee/lm-eval: {t_ref / t_lm:.2f}x (target <= 1.2x)")


if __name__ == "__main__":
    main()
