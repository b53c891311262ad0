"""The `referee` command: one module a verb (`referee.cli.score`, `referee.cli.serve`, ...),
each imported only when its verb runs, so ``referee --help`` imports none of them.

A verb's module parses its options and renders its output; the work is the library's
(`referee.rollouts`, `referee.report`, `referee.backends`). Helpers several verbs share are in
`referee.cli._common`.
"""

from __future__ import annotations

import click

from referee import __version__
from referee.cli._lazy import LazyGroup

__all__ = ["COMMANDS", "main"]

# Command -> (where it is, its one-line help). The help is the first sentence of the command's
# docstring, as click shortens it (tests/cli/test_lazy.py checks that they agree), kept here so
# that listing the commands imports none.
COMMANDS: dict[str, tuple[str, str]] = {
    "audit-judge": (
        "referee.cli.audit_judge:audit_judge",
        "Audit a judge on ROLLOUTS: position bias and flips under swap, preference for longer "
        "answers and for lists, injection resistance, consistency across seeds, and agreement "
        "with human labels where the rows carry them; exit 1 when a gate (--max-*, --min-*) "
        "fails.",
    ),
    "check": (
        "referee.cli.check:check",
        "Load each SPEC and show what it builds: the reward tree (types, weights, where each "
        "part runs, its deadline), what a rollout must carry, and what `referee serve` would "
        "refuse.",
    ),
    "compare": (
        "referee.cli.compare:compare",
        "Compare two rewards on the same rollouts: two files scored by `referee score` "
        "(SCORED SCORED), or two specs scoring the same rollouts (--spec A --spec B "
        "--rollouts R).",
    ),
    "demo": (
        "referee.cli.demo:demo",
        "Score the bundled rollouts with the bundled specs and print the results.",
    ),
    "openrlhf-func": (
        "referee.cli.openrlhf:openrlhf_func",
        "Write a reward_func file for OpenRLHF's --reward.remote_url: scores SPEC as "
        "/get_reward does.",
    ),
    "probe": (
        "referee.cli.probe:probe",
        "Try reward hacks built from ROLLOUTS against a spec; exit 1 when any works (for CI).",
    ),
    "report": (
        "referee.cli.report:report",
        "Diagnose a reward on logged rollouts: distributions, failures, GRPO signal, length "
        "correlation, agreement with human labels, determinism, pass@k, maj@n and avg@n per "
        "group, judge panels' agreement (HTML, JSON and a terminal summary).",
    ),
    "rubrics": (
        "referee.cli.rubrics:rubrics",
        "List the rubrics judges grade with (as `referee types` lists reward types); "
        "`referee rubrics show NAME` shows one.",
    ),
    "schema": (
        "referee.cli.schema:schema",
        "Print the JSON Schema of spec files (docs/spec.schema.json is the built-in one): "
        "point an editor at it to check specs as you type.",
    ),
    "score": (
        "referee.cli.score:score",
        "Score ROLLOUTS (JSONL or Parquet, from referee, verl, TRL or OpenAI chat logs) with a "
        "reward spec; one output row per rollout, in order.",
    ),
    "serve": (
        "referee.cli.serve:serve",
        "Serve a reward over HTTP: /score, /get_reward (OpenRLHF), NeMo Gym's /verify, the "
        "Open Reward Standard (with --tasks) and /health.",
    ),
    "watch": (
        "referee.cli.watch:watch",
        "Replay the training monitor over LOG's rollouts in step order (metadata.step): each "
        "step's reward, spread, zero-variance groups, length correlation, failures, the "
        "proxy-gold gap, a code reward's held-out gap, the probes the proxy pays (with "
        "--probe-every); where each rule fired.",
    ),
    "types": (
        "referee.cli.types:types_",
        "List the reward types a spec can use (built-in and plugins); with NAME, that type's "
        "reference: its options (type, default, meaning) and an example spec, as the docs "
        "site's page for it says.",
    ),
    "view": (
        "referee.cli.view:view",
        "Read scored rollouts one by one: an HTML page, lowest reward first, with each "
        "rollout's prompt, completion, reference, components, reason and failure.",
    ),
}


@click.group(cls=LazyGroup, lazy=COMMANDS, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="referee")
def main() -> None:
    """referee: rewards and verifiers for RL on LLMs."""
