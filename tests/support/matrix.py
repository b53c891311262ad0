"""The conformance matrix's cases and schedule: every registered type's scoring example
through every door (`tests.support.doors`), each door fed as its trainer or client feeds it
(`tests.support.matrix_doors`, `tests.support.matrix_http`).

A type's example (its docstring's ``Scores:`` section, `referee.spec.examples`) is prepared
once: its files written, its scripted judge or model serving, its spec written to a file. Each
door then scores every type's rollouts under `DOOR_TIMEOUT` per type (a door that hangs fails
its cells, not the suite), and gives an `Outcome` per type: the values, the door's own failure
flag, a refusal, or the error. How each door is fed:

- ``cli``: the rollouts as a JSONL file, ``referee score ROLLOUTS --spec SPEC -o OUT``; every
  type's command in one process (`tests.support.matrix_cli`), a type after the other;
- ``serve*``: each type's ``referee serve`` (``--tasks`` for ORS, ``--group-size`` for a
  group reward, ``--trust-clients`` for a spec whose references carry code), all in one
  process, asked over HTTP as each protocol's client asks (one sample a request where the
  client sends one; a group's ``/verify`` requests at once);
- ``trl``: TRL's keyword arguments: prompts, completions (text or messages), the reference as
  the ``reference`` column, each metadata key a column, the group a ``group`` column, the
  response's token ids as ``completion_ids``;
- ``verl_compute_score*``: called with each sample's arguments (metadata in ``extra_info``,
  with the prompt) from a user's script without a ``__main__`` guard, in a process of its own;
- ``verl_*`` managers: a real `DataProto` batch: prompt and response as token ids of a
  character tokenizer that spells every example's text, a chat prompt as ``raw_prompt``, a
  group as ``uid``, a trajectory as the model's turns (Hermes ``<tool_call>`` blocks) and the
  tools' turns, told apart by ``response_mask``. The reward loop's two doors share one worker
  on Ray, whose reward manager verl's own `load_reward_manager` builds for each type's config;
- ``openrlhf_func``, ``serve_openrlhf``: a query of prompt and response with the chat
  template's end marker, the reference as the label (text as it is, else JSON);
- ``verifiers``: ``Task.score(trace)`` on a trace of the prompt and the completion's messages;
- ``ray``: a `RayReward` of one actor per type on the session's local Ray.

No dataset holds a response's token count, so ``metadata.completion_tokens`` reaches a reward
only where the door knows the response (TRL's ``completion_ids``, NeMo Gym's usage, a
verifiers trace's model call, a rollout file). The doors that start processes or actors run in
the background from the start (`BACKGROUND`), the others in the test's thread meanwhile.
"""

from __future__ import annotations

import contextlib
import os
import threading
import traceback
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import pytest
import yaml

import referee
from referee.errors import SpecError
from referee.registry import lookup
from referee.reward import needs, needs_groups, reference_powers
from referee.rollout import Rollout
from referee.spec.examples import PreparedExample, ScoringExample, missing, prepared
from referee.spec.reference import type_examples
from tests.support.doors import Door

DOOR_TIMEOUT = 180.0
"""Seconds a door may take for one type's rollouts before its cell fails as hung."""
SETUP_TIMEOUT = 600.0
"""Seconds a door's one-time start (verl's reward loop on Ray) may take."""
BASE_IMAGE = "referee-example-base:1"
"""The image the examples' Dockerfiles start FROM (`referee.spec.examples`)."""


# --- the cases --------------------------------------------------------------------------------


@dataclass
class Case:
    """One type's scoring example, prepared (or why it cannot run here)."""

    name: str
    example: ScoringExample
    spec: dict[str, Any]
    run: PreparedExample | None = None
    skip: str | None = None
    grouped: bool = False
    needs: frozenset[str] = frozenset()
    powers: bool = False

    @property
    def rollouts(self) -> list[Rollout]:
        return [r.rollout for r in self.example.rollouts]

    @property
    def values(self) -> list[float]:
        return [r.value for r in self.example.rollouts]

    @property
    def path(self) -> Path:
        assert self.run is not None
        return self.run.path

    @property
    def group_size(self) -> int:
        sizes = {sum(r.group == g for r in self.rollouts) for g in {r.group for r in self.rollouts}}
        return max(sizes)


def example_types() -> list[str]:
    """Every registered type with a scoring example (built-ins must have one: test_examples)."""
    from referee.registry import registered_types

    out = []
    for name in registered_types():
        with contextlib.suppress(Exception):
            if type_examples(name)[1] is not None:
                out.append(name)
    return out


def grouped_type(name: str) -> bool:
    """Whether the type compares the attempts of a group (its class is a group reward)."""
    cls = lookup(name)
    return cls is not None and callable(getattr(cls, "score_group", None))


@contextlib.contextmanager
def docker_for(example: ScoringExample, request: pytest.FixtureRequest) -> Iterator[str | None]:
    """For an example that needs Docker: the engine's URL (the session's `docker_engine`,
    which skips where there is none), with `BASE_IMAGE` on it; else None."""
    if "docker" not in example.needs:
        yield None
        return
    url = request.getfixturevalue("docker_engine")
    import docker

    from tests.support.images import base_image

    tag = base_image(url)
    client = docker.DockerClient(base_url=url)
    try:
        repository, _, version = BASE_IMAGE.partition(":")
        client.images.get(tag).tag(repository, version)
    finally:
        client.close()
    yield url


@contextlib.contextmanager
def prepared_cases(
    names: Sequence[str], root: Path, request: pytest.FixtureRequest
) -> Iterator[dict[str, Case]]:
    """Each type's example prepared in a folder of `root`; its servers stop on leaving."""
    cases: dict[str, Case] = {}
    with contextlib.ExitStack() as stack:
        for name in names:
            spec, scores = type_examples(name)
            assert spec is not None and scores is not None
            case = Case(name, scores, yaml.safe_load(spec))
            cases[name] = case
            case.skip = missing(case.example.needs)
            if case.skip is not None:
                continue
            try:
                url = stack.enter_context(docker_for(case.example, request))
            except pytest.skip.Exception as exc:
                case.skip = str(exc)
                continue
            case.run = stack.enter_context(
                prepared(case.spec, case.example, root / name, docker_host=url)
            )
            reward = referee.load(case.path)
            case.grouped = needs_groups(reward)
            case.needs = frozenset(n for _, n in needs(reward) if n != "reference")
            case.powers = bool(reference_powers(reward))
        yield cases


# --- outcomes ---------------------------------------------------------------------------------


@dataclass
class Outcome:
    """What a door gave for one type's rollouts.

    Attributes:
        values: Each rollout's value, as the trainer gets it.
        failed: Each rollout's failure flag at the door (True: the door says it has no score).
        refused: The door refused the spec, with this message.
        error: The door broke otherwise (the message and the traceback's end).
        skipped: The door cannot run here (a package it needs is missing), with why.
        notes: What the door said beside (a failure's reason), for the cell's message.
    """

    values: list[float | None] | None = None
    failed: list[bool] | None = None
    refused: str | None = None
    error: str | None = None
    skipped: str | None = None
    notes: list[str] = field(default_factory=list)
    hung: bool = False  # no answer within the limit (`timed`)


def _refusal(exc: BaseException) -> str | None:
    """The message of a refusal (a `SpecError`, or one raised in a Ray worker), else None."""
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, SpecError):
            return str(seen)
        cause = getattr(seen, "cause", None)  # RayTaskError
        if isinstance(cause, SpecError):
            return str(cause)
        seen = seen.__cause__
    text = str(exc)
    if "SpecError" in text:
        return text.split("SpecError:", 1)[-1].strip()
    return None


def timed(fn: Callable[[], Any], timeout: float = DOOR_TIMEOUT) -> Any:
    """`fn()` in a daemon thread, for at most `timeout` seconds; an exception, or no answer
    in time, as an `Outcome` of its own (a refusal where it is one)."""
    box: list[Any] = []

    def work() -> None:
        try:
            box.append(fn())
        except pytest.skip.Exception as exc:
            box.append(Outcome(skipped=str(exc)))
        except BaseException as exc:
            refused = _refusal(exc)
            if refused is not None:
                box.append(Outcome(refused=refused))
            else:
                tail = "".join(traceback.format_exception(exc)[-3:])
                box.append(Outcome(error=f"{type(exc).__name__}: {exc}\n{tail}"[:3000]))

    thread = threading.Thread(target=work, name="matrix-door", daemon=True)
    thread.start()
    thread.join(timeout)
    if not box:
        return Outcome(error=f"no answer within {timeout:g} s: the door hangs", hung=True)
    return box[0]


def _batch(work: Callable[[], Any], cases: Sequence[Case], limit: float) -> dict[str, Any]:
    """A batch door's outcomes for `cases`, each type's the door's error where it broke."""
    got = timed(work, limit)
    return {c.name: got for c in cases} if isinstance(got, Outcome) else got  # type: ignore[no-any-return]


# --- the context the doors share --------------------------------------------------------------

SERVE = ("serve", "serve_openrlhf", "serve_nemo_gym", "serve_ors")
"""The doors one ``referee serve`` per type answers."""
LOOP = ("verl_loop", "verl_referee_loop")
"""verl's reward-loop doors: one worker on Ray, its manager rebuilt for each type in turn."""
FUNCTIONS = ("verl_compute_score", "verl_compute_score_async")
"""verl's reward functions: called from a user's script (one process for every type)."""
BACKGROUND = ("cli", "ray", *LOOP, *FUNCTIONS)
"""Doors (beside `SERVE`'s) that start processes or Ray actors: run in the background from
the start, `WORKERS` jobs at a time, while the in-process doors run in the test's thread."""
WORKERS = 4


class Context:
    """What the doors share: the cases, a scratch folder, state a door keeps across types
    (`state`: verl's tokenizer and reward loop), and each door's outcomes, for the types
    selected."""

    def __init__(self, cases: dict[str, Case], root: Path, selected: set[tuple[str, str]]):
        self.cases = cases
        self.root = root
        self.selected = selected
        self.state: dict[str, Any] = {}
        self.env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
        self._results: dict[str, dict[str, Outcome]] = {}
        self._jobs: dict[str | tuple[str, str], Future[Any]] = {}
        self._pool = ThreadPoolExecutor(WORKERS, thread_name_prefix="matrix")
        self._lock = threading.Lock()

    def folder(self, case: Case, door: str) -> Path:
        path = self.root / door / case.name
        path.mkdir(parents=True, exist_ok=True)
        return path

    def names(self, key: str) -> list[str]:
        """The types whose cells at door `key` (``serve``: any of its protocols) are selected."""
        doors = {"serve": SERVE, "functions": FUNCTIONS}.get(key, (key,))
        return [
            n for n, c in self.cases.items()
            if c.run is not None and any((n, d) in self.selected for d in doors)
        ]  # fmt: skip

    def start(self) -> None:
        """Start the background doors: the CLI's and the servers' one process each for every
        type, verl's reward loop (its two doors in turn: one worker on Ray), Ray's actors a
        type at a time."""
        from tests.support.matrix_doors import runner

        for key in ("cli", "serve", "functions"):
            cases = [self.cases[n] for n in self.names(key)]
            if cases:
                work = partial(runner(key), cases, self)
                self._jobs[key] = self._pool.submit(_batch, work, cases, DOOR_TIMEOUT * len(cases))
        loops = [k for k in LOOP if self.names(k)]
        if loops:
            self._jobs["loop"] = self._pool.submit(self._serially, loops)
        for name in self.names("ray"):
            self._jobs["ray", name] = self._pool.submit(
                timed, partial(runner("ray"), self.cases[name], self)
            )

    def _serially(self, keys: Sequence[str]) -> dict[str, dict[str, Outcome]]:
        """verl's reward-loop doors, a type after the other on one loop. The loop's start
        has its own limit (`SETUP_TIMEOUT`: on a loaded machine Ray's worker importing verl
        and torch can take minutes), apart from each type's `DOOR_TIMEOUT`; a type that hangs
        ends the loop, and the next type starts a fresh one rather than queueing behind it."""
        from tests.support.matrix_doors import drop_reward_loop, runner, start_reward_loop

        out: dict[str, dict[str, Outcome]] = {}
        for key in keys:
            out[key] = {}
            for name in self.names(key):
                case = self.cases[name]
                start = partial(start_reward_loop, case, self, referee_manager=key != "verl_loop")
                ready = timed(start, SETUP_TIMEOUT)
                if isinstance(ready, Outcome):
                    out[key][name] = Outcome(error=f"verl's reward loop did not start: {ready}")
                    drop_reward_loop(self)
                    continue
                got = out[key][name] = timed(partial(runner(key), case, self))
                if isinstance(got, Outcome) and got.hung:
                    drop_reward_loop(self)
        return out

    def run_in_process(self, doors: Sequence[Door]) -> None:
        """Run the in-process doors now, every selected type (while the background doors
        work), rather than when their first cell asks."""
        for door in doors:
            if self.in_process(door.name):
                for name in self.names(door.name)[:1]:
                    self.outcome(door, name)

    @staticmethod
    def in_process(key: str) -> bool:
        return key not in SERVE and key not in BACKGROUND

    def outcome(self, door: Door, name: str) -> Outcome:
        """The door's outcome for type `name` (an in-process door runs every selected type
        the first time it is asked)."""
        key, missing = door.name, Outcome(error="not run")
        for batch, doors in (("serve", SERVE), ("functions", FUNCTIONS)):
            if key in doors and batch in self._jobs:
                per: Any = self._jobs[batch].result().get(name, missing)
                return per if isinstance(per, Outcome) else per.get(key, missing)
        if key == "cli" and "cli" in self._jobs:
            return self._jobs["cli"].result().get(name, missing)  # type: ignore[no-any-return]
        if key in LOOP and "loop" in self._jobs:
            return self._jobs["loop"].result().get(key, {}).get(name, missing)  # type: ignore[no-any-return]
        if key == "ray":
            job = self._jobs.get(("ray", name))
            return missing if job is None else job.result()  # type: ignore[no-any-return]
        if not self.in_process(key):
            return missing
        with self._lock:
            if key not in self._results:
                from tests.support.matrix_doors import runner

                run = runner(key)
                self._results[key] = {
                    n: timed(partial(run, self.cases[n], self)) for n in self.names(key)
                }
            return self._results[key].get(name) or missing

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)
        self.state.clear()
