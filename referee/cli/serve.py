"""`referee serve`: a reward over HTTP, in referee's protocol and the trainers' (their options
are declared with the protocols, in `referee.backends.protocols`)."""

from __future__ import annotations

from typing import Any

import click
from rich.console import Console

from referee.backends.protocols import (
    NEMO_GYM_OPTIONS,
    OPENRLHF_OPTIONS,
    ORS_OPTIONS,
    BadOption,
    mounts,
    with_options,
)
from referee.cli._common import bad_option, end_markers, load_spec
from referee.errors import RefereeError

__all__ = ["serve"]


@click.command()
@click.option("--spec", "-s", required=True, help="Reward spec file (YAML or JSON).")
@click.option(
    "--host", default="127.0.0.1", show_default=True,
    help="Address to listen on. Anything but loopback (127.0.0.0/8, ::1, localhost) needs "
    "a token.",
)  # fmt: skip
@click.option("--port", default=8000, show_default=True, type=click.IntRange(0, 65535))
@click.option(
    "--token", envvar="REFEREE_SERVE_TOKEN", show_envvar=True, metavar="TOKEN",
    help="Every request must send 'Authorization: Bearer TOKEN' (or TOKEN as its basic-auth "
    "password, as in http://referee:TOKEN@host:8000/get_reward); others get 401. Required "
    "beyond loopback; 16+ printable characters. Prefer the environment variable: an option "
    "shows in the process list.",
)  # fmt: skip
@click.option(
    "--trust-clients", is_flag=True,
    help="Serve a spec whose rewards act on the host on what a request's reference says "
    "(python_tests runs each reference's test code unsandboxed); refused without this flag. "
    "Only where everyone who can reach the server may run code as its user.",
)  # fmt: skip
@click.option(
    "--max-concurrent", default=8, show_default=True, type=click.IntRange(1),
    help="Requests scored at once; more wait their turn.",
)  # fmt: skip
@click.option(
    "--max-batch", default=10_000, show_default=True, type=click.IntRange(1),
    help="The most rollouts one request may carry (413 beyond).",
)  # fmt: skip
@click.option(
    "--max-body-mib", default=32.0, show_default=True, type=click.FloatRange(0, min_open=True),
    help="The most MiB a request body may have, counted decompressed (413 beyond).",
)  # fmt: skip
@click.option(
    "--max-connections", default=1024, show_default=True, type=click.IntRange(1),
    help="Connections open at once. Past it a new one closes the oldest idle one; with all "
    "busy with requests, it gets 503.",
)  # fmt: skip
@click.option(
    "--idle-timeout", default=30.0, show_default=True, type=click.FloatRange(0, min_open=True),
    help="Seconds a connection may stay open without sending a whole request's headers "
    "(idle keep-alive included) before it is closed.",
)  # fmt: skip
@click.option(
    "--io-timeout", default=60.0, show_default=True, type=click.FloatRange(0, min_open=True),
    help="Seconds a client has to send a request's body (408 past it), and again to read "
    "its answer (then its connection is closed).",
)  # fmt: skip
@click.option(
    "--failure-value", default=0.0, show_default=True,
    help="What /get_reward (OpenRLHF) returns for a rollout with no score.",
)  # fmt: skip
@click.option(
    "--slow-after", default=0.1, show_default=True, type=click.FloatRange(0, min_open=True),
    help="Seconds after which a request still being scored gives its slot back, so requests "
    "stuck until their deadline do not hold back fast ones.",
)  # fmt: skip
@with_options(*OPENRLHF_OPTIONS, *NEMO_GYM_OPTIONS, *ORS_OPTIONS)
def serve(
    spec: str,
    host: str,
    port: int,
    token: str | None,
    trust_clients: bool,
    max_concurrent: int,
    max_batch: int,
    max_body_mib: float,
    max_connections: int,
    idle_timeout: float,
    io_timeout: float,
    failure_value: float,
    slow_after: float,
    end_marker: tuple[str, ...],
    tokenizer: str | None,
    strip_markers: bool,
    **protocols: Any,
) -> None:
    """Serve a reward over HTTP: /score, /get_reward (OpenRLHF), NeMo Gym's /verify, the Open
    Reward Standard (with --tasks) and /health.

    Safe to expose: with a token (--token or REFEREE_SERVE_TOKEN, required beyond loopback)
    every endpoint wants it; a request's body is data, never a spec, an option or a file;
    a spec that would run what a request's reference carries on the host is refused unless
    started with --trust-clients; bodies, connections and slow clients are limited.
    """
    import asyncio

    try:
        from referee.backends.server import serve as run_server
        from referee.backends.server import serve_switch_intervals
    except RefereeError as exc:
        raise click.ClickException(str(exc)) from None
    reward = load_spec(spec)
    markers = end_markers(end_marker, tokenizer, strip_markers)
    try:
        mounted, notes = mounts(reward, **protocols)
    except BadOption as exc:
        raise bad_option(str(exc), exc.option) from None
    err = Console(stderr=True)

    def ready(url: str) -> None:
        err.print(f"referee: serving {reward.name!r} on {url} (Ctrl-C or SIGTERM to stop)")
        for note in notes:
            err.print(f"referee: {note}", markup=False, soft_wrap=True)
        if trust_clients:
            err.print("referee: --trust-clients: requests' references are trusted", markup=False)
        if end_marker or tokenizer:
            err.print(f"referee: /get_reward strips {markers.describe()}", markup=False,
                      soft_wrap=True)  # fmt: skip

    stuck_switch_interval = serve_switch_intervals()  # the command's, for the whole process

    try:
        asyncio.run(
            run_server(
                reward,
                host=host,
                port=port,
                token=token,
                trust_clients=trust_clients,
                max_batch=max_batch,
                max_concurrent=max_concurrent,
                max_body=int(max_body_mib * 1024**2),
                max_connections=max_connections,
                idle_timeout=idle_timeout,
                io_timeout=io_timeout,
                failure_value=failure_value,
                slow_after=slow_after,
                stuck_switch_interval=stuck_switch_interval,
                end_markers=markers,
                mounts=mounted,
                ready=ready,
            )
        )
    except OSError as exc:
        raise click.ClickException(f"cannot listen on {host}:{port}: {exc}") from None
    except ValueError as exc:  # refused before listening: exposure, trust, limits
        raise click.ClickException(str(exc)) from None
    err.print("referee: stopped")
