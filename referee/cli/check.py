"""`referee check`: what each spec builds, what a rollout must carry, what serve would refuse."""

from __future__ import annotations

import sys

import click
from rich.console import Console
from rich.tree import Tree

from referee.errors import RefereeError
from referee.reward import Composite, Reward, needs, reference_powers

__all__ = ["NEED_FIELDS", "check"]

NEED_FIELDS = {
    "reference": "its reference, or --map reference=COLUMN",
    "group": "a group (its group, else its prompt's), or --map group=COLUMN",
    "messages": "the completion as chat messages (OpenAI-chat rows)",
    "tokens": "metadata.completion_ids or metadata.completion_tokens",
}
"""What each `referee.reward.Need` asks of a rollout's row, as `check` says it."""


@click.command()
@click.argument("specs", nargs=-1, required=True, metavar="SPEC...")
def check(specs: tuple[str, ...]) -> None:
    """Load each SPEC and show what it builds: the reward tree (types, weights, where each
    part runs, its deadline), what a rollout must carry, and what `referee serve` would
    refuse. Exit status 1 when a spec does not load (the error names the file and the key)."""
    from referee.spec import load

    console = Console()
    failed = False
    for spec in specs:
        try:
            reward = load(spec)
        except RefereeError as exc:
            Console(stderr=True, soft_wrap=True).print(f"[red]error[/red] {exc}", highlight=False)
            failed = True
            continue
        tree = Tree(f"{spec}: ok")
        _node(tree, reward.name, reward)
        console.print(tree, highlight=False)
        wanted = needs(reward)
        if wanted:
            lead = "  each rollout needs: "
            for need in dict.fromkeys(n for _, n in wanted):
                parts = ", ".join(where for where, n in wanted if n == need)
                console.print(
                    f"{lead}{need} ({parts}): {NEED_FIELDS[need]}", highlight=False, soft_wrap=True
                )
                lead = " " * len(lead)
        powers = reference_powers(reward)
        if powers:
            listed = "; ".join(f"{name}: {what}" for name, what in powers)
            console.print(
                f"  trusts the reference ({listed}): `referee serve` needs --trust-clients",
                highlight=False,
            )
    if failed:
        sys.exit(1)


def _node(tree: Tree, label: str, reward: Reward, depth: int = 0) -> None:
    """`reward` under `tree`: its kind, where it runs and its deadline; its parts under it."""
    mode = getattr(reward, "mode", None)
    kind = getattr(reward, "kind", None) or (f"combine: {mode}" if mode else "")
    kind = kind or type(reward).__name__
    where = _runs(reward)
    seconds = getattr(reward, "deadline_seconds", None)
    extra = f", deadline {seconds:g}s" if isinstance(seconds, int | float) else ""
    branch = tree.add(f"[bold]{label}[/bold]: {kind} ({where}{extra})")
    if isinstance(reward, Composite) and depth < 20:
        for part in reward.children():
            how = f"weight {part.weight:g}" + ("" if part.required else ", optional")
            _node(branch, f"{part.name} [dim]{how}[/dim]", part.reward, depth + 1)


def _runs(reward: Reward) -> str:
    """Where a reward's work runs, as `referee types` says it (a check: its run_in)."""
    from referee.rewards import runs_where

    runs_in = getattr(reward, "runs_in", None)
    if isinstance(runs_in, str) and type(reward).__name__ not in ("Combined", "Transform"):
        where = runs_where(type(reward))
        return runs_in if where in ("inline", "thread", "process") else where
    return runs_where(type(reward))
