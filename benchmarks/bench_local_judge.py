"""The local judges (``model: local/smollm2``, ``local/gemma3-270m``) on this machine: verdicts
per second at concurrency 1 and 4, and `referee audit-judge`'s measures of each, beside
AlpacaEval's published rows for two of its evaluators (its ``evaluators_leaderboard.csv``,
read from the ``alpaca-eval`` wheel where it is installed).

The rollouts are 2N answers to N questions of fact, one right and one wrong each, labelled
(``metadata.label``); the judge is `reference_judge` (is the answer equivalent to the
reference?). A 135M or 270M model is a poor judge: the figures are what they measure.

Usage: python benchmarks/bench_local_judge.py [--questions 12] [--models smollm2 gemma3-270m]
       [--kinds reference_judge pairwise_judge] [--no-throughput]
"""

from __future__ import annotations

import argparse
import asyncio
import csv
import time
from pathlib import Path

import referee
from referee.judges.local import stop_servers
from referee.report.audit import AuditOptions, reseed, run_audit
from referee.report.audit_html import measure_rows

FACTS = [
    ("What is the capital of France?", "Paris", "Lyon"),
    ("What is the largest planet of the solar system?", "Jupiter", "Saturn"),
    ("Who wrote Hamlet?", "William Shakespeare", "Christopher Marlowe"),
    ("What is the chemical symbol of gold?", "Au", "Ag"),
    ("How many legs does a spider have?", "Eight", "Six"),
    ("What is the boiling point of water at sea level in Celsius?", "100 degrees", "90 degrees"),
    ("Which ocean is the largest?", "The Pacific Ocean", "The Atlantic Ocean"),
    ("What is the square root of 81?", "9", "8"),
    ("In which year did the Berlin Wall fall?", "1989", "1991"),
    ("What gas do plants take in for photosynthesis?", "Carbon dioxide", "Oxygen"),
    ("What is the longest river in Africa?", "The Nile", "The Congo"),
    ("Who painted the Mona Lisa?", "Leonardo da Vinci", "Michelangelo"),
]


def rollouts(n: int) -> list[referee.Rollout]:
    out = []
    for i, (question, right, wrong) in enumerate(FACTS[:n]):
        for label, answer in ((1.0, right), (0.0, wrong)):
            out.append(referee.Rollout(
                id=f"q{i}-{int(label)}", group=f"q{i}", prompt=question, reference=right,
                completion=f"The answer is {answer}. I am confident in it.",
                metadata={"label": label},
            ))  # fmt: skip
    return out


def throughput(model: str, rows: list[referee.Rollout], concurrency: int) -> float:
    spec = {"type": "reference_judge", "model": f"local/{model}", "cache": False,
            "concurrency": concurrency, "max_in_flight": concurrency}  # fmt: skip
    judge = referee.load(spec)
    # A fresh server each time, started outside the timing, warmed on another prompt: one
    # that had read these prompts before reuses their prefill from its prompt cache (run
    # after the concurrency-1 pass on the same server, concurrency 4 measured 10x, not ~4x).
    stop_servers()
    referee.score(judge, [rows[0].model_copy(update={"prompt": "Warm up.", "id": "warm"})])
    start = time.perf_counter()
    referee.score(judge, rows)
    return len(rows) / (time.perf_counter() - start)


def alpaca_rows() -> list[dict[str, str]]:
    from importlib.metadata import PackageNotFoundError, distribution

    try:  # not imported: its __init__ needs setuptools' pkg_resources
        wheel = distribution("alpaca-eval")
    except PackageNotFoundError:
        return []
    path = Path(str(wheel.locate_file("alpaca_eval/leaderboards/evaluators/"
                                     "evaluators_leaderboard.csv")))  # fmt: skip
    with path.open() as f:
        rows = list(csv.DictReader(f))
    return [r for r in rows if r[""] in ("alpaca_eval_gpt4", "weighted_alpaca_eval_gpt4_turbo")]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--questions", type=int, default=12)
    parser.add_argument("--models", nargs="+", default=["smollm2", "gemma3-270m"])
    parser.add_argument("--kinds", nargs="+", default=["reference_judge", "pairwise_judge"],
                        choices=["reference_judge", "pairwise_judge"])  # fmt: skip
    parser.add_argument("--no-throughput", action="store_true", help="audits only")
    args = parser.parse_args()
    rows = rollouts(args.questions)
    for model in args.models:
        if not args.no_throughput:
            one, four = throughput(model, rows, 1), throughput(model, rows, 4)
            print(f"{model}: {one:.2f} verdicts/s at concurrency 1, {four:.2f} at 4 "
                  f"({len(rows)} verdicts each)", flush=True)  # fmt: skip
        for kind in args.kinds:
            spec = {"type": kind, "model": f"local/{model}", "cache": False, "temperature": 0.7,
                    "concurrency": 4, "max_in_flight": 4}  # fmt: skip
            judge = referee.load(reseed(spec, 0))
            again = lambda r, s=spec: referee.load(reseed(s, r))  # noqa: E731
            audit = asyncio.run(
                run_audit(judge, rows, AuditOptions(), name=f"{kind} {model}", reseeded=again)
            )
            print(f"  {kind} {model}: {audit.verdicts} verdicts, failed {audit.failed or 0}, "
                  f"{(audit.seconds_per_1000 or 0) * audit.verdicts / 1000:.0f} s",
                  flush=True)  # fmt: skip
            for failure, message in sorted(audit.failure_examples.items()):
                print(f"    first {failure}: {message[:300]}")
            for row in measure_rows(audit):
                s = row.statistic
                ci = f" [{s.ci_low:.3f}, {s.ci_high:.3f}]" if s and s.ci_low is not None else ""
                value = "-" if row.value is None else f"{row.value:.3f}"
                print(f"    {row.name}: {value}{ci}  ({row.alpaca or ''})", flush=True)
    for r in alpaca_rows():
        print(
            f"AlpacaEval {r['']}: human agreement {float(r['Human agreement']):.1f}, "
            f"P(prefer longer) {float(r['Proba. prefer longer']):.2f}, "
            f"P(prefer lists) {float(r['Proba. prefer lists']):.2f}, "
            f"P(prefer 1) {float(r['Proba. prefer 1']):.2f}"
        )


if __name__ == "__main__":
    main()
