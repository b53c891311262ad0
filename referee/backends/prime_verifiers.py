"""referee rewards in PrimeIntellect's verifiers (0.4, ``verifiers.v1``): a Task's reward, and
a group reward in an Env's ``finalize``.

verifiers 0.4 scores a rollout with its Task: ``Task.score(trace)`` (what a rollout, and
``vf replay``, call) awaits every ``@vf.reward`` method of the task and every reward plugged
by config (``TaskConfig.rewards``), passing each the arguments its signature names among
``task`` (the task's `TaskData`) and ``trace`` (the `Trace`: messages, tokens, state), and adds
``score * weight`` into ``trace.reward``. (verifiers 0.3's ``Rubric``, with reward functions of
``prompt, completion, answer, state``, is gone from 0.4.) A `RefereeReward` is such a reward:

```python
import verifiers.v1 as vf
from referee.backends.prime_verifiers import RefereeReward

class MathData(vf.TaskData):
    answer: str                     # the reference: a field of the task's data

class MathTask(vf.Task[MathData]):
    correct = RefereeReward("spec.yaml")     # recorded as trace.rewards["correct"]
```

or, with no code, by config: ``--env.taskset.task.rewards.referee.fn
referee.backends.prime_verifiers:reward`` with the spec in ``REFEREE_SPEC`` (and the reference's
field in ``REFEREE_REFERENCE``, ``answer`` by default).

How a trace becomes a rollout (`rollout_from_trace`):

- ``prompt``: the trace's final branch up to its first sampled message, as chat messages; the
  task's ``system_prompt`` and ``prompt`` where the trace has no sampled message;
- ``completion``: the rest of that branch (assistant turns, tool results, a simulated user's
  turns) as chat messages, as verifiers holds them;
- ``reference``: the task data's field named by `reference` (``answer``), or what a function of
  the task data returns; text that is a JSON object or array is decoded, as verl's
  ``compute_score`` decodes a ground truth (`referee.backends.contract.decode_json_text`);
- ``metadata``: the task's own fields (those its `TaskData` subclass adds, and the extra fields
  of a `WireTaskData`), its ``idx``, ``id`` and ``name``, and ``completion_tokens`` where the
  trace has token ids; ``id`` is the trace's, ``group`` the task's key.

What numbers reach verifiers (the contract's `Outlet`, verl's policy): verifiers records a
reward with ``float(value)`` and sums the rewards into ``trace.reward``, which prime-rl turns
into advantages; it has no None and no way to mask one rollout (a reward function that raises
fails the whole rollout, and verifiers retries it). So a rollout referee cannot score gets
``failure_value`` (0.0 unless set), with ``trace.metrics["referee_failed"] = 1.0``. The top-level
components of a combination are metrics too, ``referee/<component>`` (a component that ran
and failed reads ``failure_value``) and ``referee/<component>/skipped``; a skipped component
reads None, verifiers' own mark for a signal that did not run. The whole score (reason,
failure, components) is in ``trace.info["referee"]``, which verifiers writes with the trace.
Metrics keep these keys whatever the reward's name: give a task one referee reward (one spec
can combine several).

A reward that compares the attempts at a prompt (``group_rank``, a pairwise tournament) cannot
score one trace; a `RefereeReward` refuses such a spec at load. verifiers' own cross-attempt
judgement is an Env's ``finalize(task, episode)``, which sees every trace of an episode (the
attempts of ``best-of-n``): an `EpisodeScorer` scores them as one group there. prime-rl's
groups (``rollouts_per_example``) are separate episodes, which verifiers never shows together.

A task whose data lacks the reference's field while a component needs one (``math_answer``,
``field_match``) raises `MissingInput` at its first rollout, naming the component and the fix;
a task whose field is None scores as a failure (``not_applicable``).
"""

from __future__ import annotations

import importlib
import os
import threading
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

from referee.backends.contract import Bridge, Outlet, decode_json_text, resolve
from referee.errors import MissingInput, SpecError
from referee.reward import Need, Reward, needs, needs_groups
from referee.rollout import Rollout
from referee.rollouts.needs import REFERENCE_GUESSES, describe_missing, guess_column
from referee.scores import Score

# and `reward`, made on first access (module __getattr__)
__all__ = ["DEFAULT_FAILURE_VALUE", "EpisodeScorer", "RefereeReward", "rollout_from_trace"]

DEFAULT_FAILURE_VALUE = 0.0
"""What verifiers records for a rollout referee cannot score (it takes no None)."""

SPEC_ENV = "REFEREE_SPEC"
REFERENCE_ENV = "REFEREE_REFERENCE"
INFO_KEY = "referee"
"""The key of ``trace.info`` that holds the whole score."""

ReferenceMap = str | Callable[[Any], Any]
"""The task data's field that holds the reference, or a function of the task data."""

# The identity fields of verifiers' own TaskData, copied into the metadata beside the task's own.
_IDENTITY = ("idx", "id", "name")


def _verifiers() -> ModuleType:
    """``verifiers.v1``, imported here only (it takes seconds), or an error with the fix."""
    try:
        return importlib.import_module("verifiers.v1")
    except ImportError as exc:
        raise ImportError(
            "referee.backends.prime_verifiers needs PrimeIntellect's verifiers 0.4 or later "
            f"(its verifiers.v1 API), which could not be imported ({exc}).\n"
            '  fix: pip install "verifiers>=0.4"'
        ) from exc


def _row(data: Any) -> dict[str, Any]:
    """The task data as plain JSON values, extra fields (a WireTaskData's) included."""
    dumped: dict[str, Any] = data.model_dump(mode="json")
    return dumped


def _messages(messages: Sequence[Any]) -> list[dict[str, Any]]:
    # provider_state is opaque, possibly encrypted reasoning state: nothing a reward reads.
    return [m.model_dump(mode="json", exclude_none=True, exclude={"provider_state"})
            for m in messages]  # fmt: skip


def _split(trace: Any, row: Mapping[str, Any]) -> tuple[Any, list[dict[str, Any]]]:
    """The prompt and completion of a trace: its final branch, cut at the first sampled node."""
    branches = trace.branches
    nodes = branches[-1].nodes if branches else []
    first = next((i for i, node in enumerate(nodes) if node.sampled), None)
    if first is not None:
        sent = _messages([node.message for node in nodes[:first]])
        return sent, _messages([node.message for node in nodes[first:]])
    # Nothing sampled (the agent failed before its first turn): the task's own prompt.
    prompt, system = row.get("prompt"), row.get("system_prompt")
    if system is None:
        return (prompt if prompt is not None else ""), []
    turns = [{"role": "user", "content": prompt}] if isinstance(prompt, str) else (prompt or [])
    return [{"role": "system", "content": system}, *turns], []


def rollout_from_trace(
    task: Any,
    trace: Any,
    *,
    reference: ReferenceMap = "answer",
    group: str | None = None,
) -> Rollout:
    """The Rollout referee scores for one verifiers trace.

    Args:
        task: The task's data (a `verifiers.v1.TaskData`), as verifiers passes it as ``task``.
        trace: The `verifiers.v1.Trace` being scored.
        reference: The task data's field that holds the reference, or a function of the task
            data that returns it.
        group: The rollout's group; by default the task's key (``trace.task.key``).

    Returns:
        The rollout: see the module docstring for where each part comes from.
    """
    return _rollout(task, _row(task), trace, reference, group)


def _own_fields(row: Mapping[str, Any]) -> list[str]:
    """The fields a task's data adds to verifiers' TaskData (a subclass's, a WireTaskData's)."""
    base = _verifiers().TaskData.model_fields
    return [k for k in row if k not in base]


def _rollout(
    task: Any, row: Mapping[str, Any], trace: Any, reference: ReferenceMap, group: str | None
) -> Rollout:
    value = reference(task) if callable(reference) else row.get(reference)
    keys = (*_IDENTITY, *_own_fields(row))
    metadata = {k: row[k] for k in keys if row.get(k) is not None and k != reference}
    tokens = trace.num_output_tokens
    if tokens:
        metadata["completion_tokens"] = tokens
    prompt, completion = _split(trace, row)
    if group is None:
        group = trace.task.key or trace.task.hash
    return Rollout(
        id=str(trace.id),
        prompt=prompt,
        completion=completion,
        reference=decode_json_text(value),
        group=group,
        metadata=metadata,
    )


class _Door:
    """What both entry points share: the reward, its bridge, rollouts, and what is recorded."""

    def __init__(
        self,
        reward_or_spec: Reward | str | Path | Mapping[str, Any],
        *,
        reference: ReferenceMap,
        failure_value: float,
        concurrency: int | None,
    ) -> None:
        self.vf = _verifiers()  # fails here, with the fix, where verifiers 0.4 is missing
        self.referee = resolve(reward_or_spec)
        self.reference = reference
        self.failure_value = failure_value
        self.concurrency = concurrency
        self.outlet = Outlet.of(self.referee, failure_value=failure_value, skipped=None)
        self._needs_reference = [c for c, n in needs(self.referee) if n == "reference"]
        self._bridge: Bridge | None = None
        self._lock = threading.Lock()

    # Rewards are shipped to worker processes by pickle; the bridge's threads are remade there.
    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state.update(_bridge=None, _lock=None, vf=None)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()
        self.vf = _verifiers()

    @property
    def bridge(self) -> Bridge:
        with self._lock:
            if self._bridge is None:
                self._bridge = Bridge(self.referee, concurrency=self.concurrency)
            return self._bridge

    def rollout(self, task: Any, trace: Any, group: str | None = None) -> Rollout:
        """The rollout of one trace (`rollout_from_trace` with this reward's `reference`)."""
        row = _row(task)
        if self._needs_reference and isinstance(self.reference, str) and self.reference not in row:
            raise self._missing_reference(type(task).__name__, _own_fields(row))
        return _rollout(task, row, trace, self.reference, group)

    def _missing_reference(self, data_type: str, fields: list[str]) -> MissingInput:
        # Every rollout of this task would fail: said at the first, loudly, as TRL's functions do.
        guess = guess_column(fields, REFERENCE_GUESSES)
        missing: list[tuple[str, Need]] = [(c, "reference") for c in self._needs_reference]
        message = describe_missing(
            missing,
            lacking=lambda _: (
                f"the task data ({data_type}) has no field {self.reference!r} (its own "
                f"fields: {fields})"
            ),
            fix=lambda _: (
                f"{type(self).__name__}(..., reference={guess or '<field>'!r}) (the field that "
                f"holds it, or a function of the task data; by config: {REFERENCE_ENV}=<field>)"
            ),
        )
        return MissingInput(f"referee: {message}", missing=missing, keys=fields)

    def total(self, score: Score) -> float:
        """What verifiers records: the score, or `failure_value` where there is none."""
        return self.failure_value if score.value is None else score.value

    def record(self, trace: Any, score: Score) -> None:
        """The components and the failure flag as metrics, the whole score in the trace's info."""
        for key, value in self.outlet.row(score).items():
            # Set directly: a skipped component is None, which record_metric (float()) refuses.
            trace.metrics[key] = value
        trace.info[INFO_KEY] = score.to_dict()


class RefereeReward(_Door):
    """A referee reward as a verifiers Task reward: ``async (task, trace) -> float``.

    Put it in a Task's class body (``correct = RefereeReward("spec.yaml")``, recorded under the
    attribute's name), call it from a ``@vf.reward`` method (``return await scorer(task,
    trace)``), or plug it by config (``TaskConfig.rewards``). It scores through the contract's
    `Bridge`, on verifiers' event loop, so a judge's calls for many traces run concurrently.

    Args:
        reward_or_spec: A `Reward`, or a spec file path or mapping.
        name: The name verifiers records the reward under; by default the attribute's name in
            a Task's class body, else the spec's name.
        reference: The task data's field that holds the reference (``answer``), or a function
            of the task data that returns it.
        weight: The reward's weight in ``trace.reward`` (verifiers' ``@vf.reward(weight=...)``).
        failure_value: What a rollout with no score records (verifiers takes no None).
        concurrency: How many rollouts an async reward scores at once within one call.

    Raises:
        SpecError: The spec has a group reward, which one trace cannot give (`EpisodeScorer`).
        ImportError: verifiers 0.4 is not installed.
    """

    def __init__(
        self,
        reward_or_spec: Reward | str | Path | Mapping[str, Any],
        *,
        name: str | None = None,
        reference: ReferenceMap = "answer",
        weight: float = 1.0,
        failure_value: float = DEFAULT_FAILURE_VALUE,
        concurrency: int | None = None,
    ) -> None:
        super().__init__(
            reward_or_spec,
            reference=reference,
            failure_value=failure_value,
            concurrency=concurrency,
        )
        if needs_groups(self.referee):
            raise SpecError(
                f"{self.referee.name}: this spec has a group reward, which a verifiers Task "
                "reward (one trace at a time) cannot give; score the attempts of an episode "
                "together in your Env's finalize(task, episode) with "
                "referee.backends.prime_verifiers.EpisodeScorer(spec) (docs/trainers/verifiers.md)",
                source="referee.backends.prime_verifiers",
            )
        self.__name__ = name or self.referee.name
        self._named = name is not None
        self.vf.reward(self, weight=weight)  # verifiers' own mark: weight, priority, the tag

    def __set_name__(self, owner: type, name: str) -> None:
        if not self._named:
            self.__name__ = name

    def __repr__(self) -> str:
        return f"<referee verifiers reward {self.__name__}>"

    async def __call__(self, task: Any, trace: Any) -> float:
        """Score one trace: the total verifiers records, components recorded as metrics."""
        rollout = self.rollout(task, trace)
        [score] = await self.bridge.score_async([rollout])
        self.record(trace, score)
        return self.total(score)


class EpisodeScorer(_Door):
    """A referee reward over the traces of one verifiers episode, scored as one group.

    For an Env's ``finalize(task, episode)``, verifiers' surface for judging attempts against
    each other (``best-of-n`` makes ``n`` attempts in one episode)::

        rank = EpisodeScorer("ranked.yaml")

        class RankedEnv(BestOfNEnv):
            async def finalize(self, task, episode):
                await rank(episode)

    Each trace gets the reward (``trace.record_reward(name, value, weight)``), the metrics and
    the info a `RefereeReward` records. Any spec works here; a group reward is the reason.

    Args:
        reward_or_spec: A `Reward`, or a spec file path or mapping.
        name: The name of the reward on each trace; by default the spec's name.
        reference: As for `RefereeReward`, read from each trace's own task data.
        weight: The reward's weight in ``trace.reward``.
        failure_value: What a rollout with no score records.
        agent: Score only this agent's traces (``episode.by_agent[agent]``); all by default.
        concurrency: How many rollouts an async reward scores at once.
    """

    def __init__(
        self,
        reward_or_spec: Reward | str | Path | Mapping[str, Any],
        *,
        name: str | None = None,
        reference: ReferenceMap = "answer",
        weight: float = 1.0,
        failure_value: float = DEFAULT_FAILURE_VALUE,
        agent: str | None = None,
        concurrency: int | None = None,
    ) -> None:
        super().__init__(
            reward_or_spec,
            reference=reference,
            failure_value=failure_value,
            concurrency=concurrency,
        )
        self.name = name or self.referee.name
        self.weight = weight
        self.agent = agent

    def __repr__(self) -> str:
        return f"<referee verifiers episode scorer {self.name}>"

    async def __call__(self, episode: Any) -> list[float]:
        """Score the episode's traces as one group, record each, and return their values."""
        traces = list(
            episode.traces if self.agent is None else episode.by_agent.get(self.agent, [])
        )
        group = f"episode:{episode.id}"
        rollouts = [self.rollout(t.task.data, t, group=group) for t in traces]
        scores = await self.bridge.score_async(rollouts)
        totals = []
        for trace, score in zip(traces, scores, strict=True):
            total = self.total(score)
            trace.record_reward(self.name, total, self.weight)
            self.record(trace, score)
            totals.append(total)
        return totals


_env_lock = threading.Lock()
_from_env: dict[tuple[str, str], RefereeReward] = {}


def _reward_from_env() -> RefereeReward:
    """The spec in ``REFEREE_SPEC`` as a `RefereeReward`, once per process (per spec, field)."""
    path = os.environ.get(SPEC_ENV)
    if not path:
        raise SpecError(
            f"set {SPEC_ENV} to your spec file for referee.backends.prime_verifiers:reward "
            f"({SPEC_ENV}=/abs/path/spec.yaml, and {REFERENCE_ENV}=<field> where the reference "
            "is not the task data's 'answer')",
            source="referee.backends.prime_verifiers",
        )
    key = (os.path.abspath(os.path.expanduser(path)), os.environ.get(REFERENCE_ENV, "answer"))
    with _env_lock:
        reward = _from_env.get(key)
        if reward is None:
            reward = _from_env[key] = RefereeReward(key[0], reference=key[1])
    return reward


def __getattr__(name: str) -> Any:
    # `reward`, for a reward plugged by config (verifiers imports it by its dotted path).
    if name == "reward":
        return _reward_from_env()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
