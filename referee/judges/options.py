"""What every judge reward shares: the `JudgeClient` it holds, and how a spec gives that client.

A judge reward is not a client; it has one (``client``). In Python the client is passed whole,
so several rewards can share one::

    judge = JudgeClient(model="openai/gpt-4.1-mini", rpm=500)
    reward = RubricJudge(rubric="helpfulness", client=judge)

A spec writes the client's options flat, beside the reward's own, or nested under ``client``::

    {type: rubric_judge, rubric: helpfulness, model: openai/gpt-4.1-mini, timeout: 30}
    {type: rubric_judge, rubric: helpfulness, client: {model: openai/gpt-4.1-mini, timeout: 30}}

Flat options are validated as the client's, and an error names the key the spec wrote
(``timeout``, not ``client.timeout``). ``concurrency`` is the reward's own option in both forms
(rollouts scored at once); the client's limit of calls in flight is ``max_in_flight``.

A panel (`referee.judges.panel`) gives ``models`` instead of ``model``: the flat (or nested)
client options are shared by every member, and a member is a model string or a mapping of
client options of its own (its ``model``, and an optional ``name``)::

    {type: reference_judge, models: [openai/a, {model: openai/b, temperature: 0.7}],
     api_base: http://127.0.0.1:8000/v1, vote: majority}

``model`` and ``models`` together are an error naming both.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pydantic import GetCoreSchemaHandler, TypeAdapter
from pydantic_core import core_schema

from referee.judges.client import JudgeClient
from referee.judges.panel import Vote, member_names, parse_member
from referee.reward import DEFAULT_CONCURRENCY

__all__ = ["CLIENT_OPTIONS", "JudgeOptions", "PanelOptions"]

CLIENT_OPTIONS = frozenset(f.name for f in dataclasses.fields(JudgeClient))
"""The `JudgeClient` options a spec may write flat in a judge reward."""

_CLIENT = TypeAdapter(JudgeClient)

# A judge call's worst case beyond its attempts: the extra 5s each attempt is given, and one
# repair call when the first reply is not a valid verdict.
_CALL_SLACK = 5.0
_CALLS_PER_VERDICT = 2


@dataclass(kw_only=True)
class JudgeOptions:
    """The options every judge reward has: the judge client, and how many rollouts at once.

    A mixin for judge rewards, before their reward base class (``class MyJudge(JudgeOptions,
    AsyncReward)``); call ``super().__post_init__()`` from a ``__post_init__`` of your own.
    A reward that can ask a panel of judges takes `PanelOptions` instead.

    Attributes:
        client: How to reach the judge model (`JudgeClient`); a spec may give its options
            flat (``model``, ``api_base``, ``timeout``, ...) or under ``client``. With
            ``models``, the options every member shares (its ``model`` is not asked unless
            it is a member).
        concurrency: Rollouts (for a group reward: groups) scored at once by ``score_batch``
            when the caller does not say. The client's ``max_in_flight`` caps the calls.
    """

    client: JudgeClient
    concurrency: int = DEFAULT_CONCURRENCY

    def __post_init__(self) -> None:
        pass  # the end of the rewards' __post_init__ chains

    def _clients(self) -> list[JudgeClient]:
        """Every client a rollout's judging may call."""
        return [self.client]

    def default_deadline(self) -> float | None:
        """The client's worst case, where the reward's ``deadline`` is not set:
        ``2 * ((retries + 1) * (timeout + 5) + retries * max_backoff)`` (every attempt with its
        5s of slack, the backoffs between them, twice for the repair call when the first reply
        is no valid verdict; the defaults give 1130s). A panel's members judge at once: its
        worst case is its slowest member's."""
        return max(_worst_case(c) for c in self._clients())

    @classmethod
    def __get_pydantic_core_schema__(
        cls, source: type[Any], handler: GetCoreSchemaHandler
    ) -> core_schema.CoreSchema:
        # How referee.load validates a spec's options: flat client options become `client`
        # first, then the reward's own dataclass schema validates the rest.
        return core_schema.no_info_before_validator_function(
            lambda data: _nest_client(cls, data), handler(source)
        )


@dataclass(kw_only=True)
class PanelOptions(JudgeOptions):
    """`JudgeOptions` with a panel: ``models`` instead of one ``model``, and their vote.

    Attributes:
        models: A panel of judges instead of one ``model``: each a model string, or a mapping
            of client options over the shared ones (``{model: ..., temperature: ...}``) with
            an optional ``name``. Every member judges on its own, at once, and the panel
            votes (``vote``). A member's name (for its components ``panel.<name>`` and
            ``panel.<name>.cost``) is its model after the provider prefix, every character
            outside ``[A-Za-z0-9_-]`` as ``_``, a repeated one suffixed ``_2``, ``_3``.
        vote: How the members' values become one: ``majority`` (a value given by more than
            half of all the members, those that gave no verdict included; none is a
            ``judge`` Failure: for pass/fail and pairwise verdicts), ``mean`` or ``median``
            (of the members that answered: for scales).
        quorum: The fewest members that must answer (fewer is a ``judge`` Failure); default
            a strict majority of the members, ``len(models) // 2 + 1``.
    """

    models: list[str | dict[str, Any]] | None = None
    vote: Vote = "majority"
    quorum: int | None = None
    # each member's name and client, built from `client` and `models` (None: one judge)
    _members: list[tuple[str, JudgeClient]] | None = field(
        default=None, init=False, repr=False, compare=False
    )

    def __post_init__(self) -> None:
        if self.models is None:
            if self.quorum is not None:
                raise ValueError("quorum is a panel's option: give models, or leave it out")
        else:
            self._members = _build_members(self.client, self.models)
            n = len(self._members)
            if self.quorum is None:
                self.quorum = n // 2 + 1
            if not 1 <= self.quorum <= n:
                raise ValueError(
                    f"quorum must be between 1 and the {n} members of the panel, got {self.quorum}"
                )
        super().__post_init__()

    def _clients(self) -> list[JudgeClient]:
        return [c for _, c in self._members] if self._members else [self.client]


def _build_members(
    client: JudgeClient, models: list[str | dict[str, Any]]
) -> list[tuple[str, JudgeClient]]:
    """Each member's name and client: `client` with the member's options over it."""
    if not isinstance(models, (list, tuple)) or not models:
        raise ValueError(f"models must be a non-empty list of judges, got {models!r}")
    shared = {f.name: getattr(client, f.name) for f in dataclasses.fields(JudgeClient)}
    parsed = [parse_member(m) for m in models]
    clients = []
    for options, _ in parsed:
        unknown = sorted(set(options) - CLIENT_OPTIONS)
        if unknown:
            raise ValueError(
                f"a panel member has options the judge client does not: {unknown}; "
                f"valid: name, {', '.join(sorted(CLIENT_OPTIONS))}"
            )
        if set(options) == {"model"}:
            clients.append(dataclasses.replace(client, model=options["model"]))
        else:
            clients.append(_CLIENT.validate_python({**shared, **options}))
    names = member_names([c.model for c in clients], [name for _, name in parsed])
    return list(zip(names, clients, strict=True))


def _worst_case(client: JudgeClient) -> float:
    call = (client.retries + 1) * (client.timeout + _CALL_SLACK)
    return _CALLS_PER_VERDICT * (call + client.retries * client.max_backoff)


def _nest_client(cls: type[JudgeOptions], data: Any) -> Any:
    """`data` with the client options written flat gathered into a validated `client`.

    For a panel (``models``), that client holds the options its members share, with the first
    member's model; each member's own client is built from it by `PanelOptions`.

    Raises:
        ValueError: The options give the client both flat and under ``client``, or give
            ``model`` (flat or under ``client``) beside ``models``.
        pydantic.ValidationError: A flat client option is missing or invalid (its location is
            the flat key, as the spec wrote it).
    """
    if not isinstance(data, Mapping):
        return data  # an instance, validated as such
    own = {f.name for f in dataclasses.fields(cls)}
    flat = {k: v for k, v in data.items() if k in CLIENT_OPTIONS and k not in own}
    models = data.get("models") if "models" in own else None
    if "client" in data:
        if flat:
            raise ValueError(
                f"the judge client is given both under 'client' and flat ({', '.join(flat)}): "
                "give its options one way"
            )
        nested = data["client"]
        if models is not None and isinstance(nested, Mapping):
            if "model" in nested:
                raise ValueError(_BOTH.format(model="client.model", value=nested["model"]))
            return {**data, "client": {**nested, "model": _first_model(models)}}
        return data
    rest = {k: v for k, v in data.items() if k not in flat}
    if models is not None:
        if "model" in flat:
            raise ValueError(_BOTH.format(model="model", value=flat["model"]))
        flat["model"] = _first_model(models)
    return {**rest, "client": _CLIENT.validate_python(flat)}


_BOTH = (
    "the judge is given both {model} ({value!r}) and models: give one model, or a panel "
    "under models"
)


def _first_model(models: Any) -> Any:
    """The shared client's model for a panel (the first member's; the reward checks
    `models` itself)."""
    if isinstance(models, list) and models:
        first = models[0]
        if isinstance(first, Mapping):
            return first.get("model", "panel")
        if isinstance(first, str) and first:
            return first
    return "panel"
