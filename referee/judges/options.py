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
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import GetCoreSchemaHandler, TypeAdapter
from pydantic_core import core_schema

from referee.judges.client import JudgeClient
from referee.reward import DEFAULT_CONCURRENCY

__all__ = ["CLIENT_OPTIONS", "JudgeOptions"]

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

    Attributes:
        client: How to reach the judge model (`JudgeClient`); a spec may give its options
            flat (``model``, ``api_base``, ``timeout``, ...) or under ``client``.
        concurrency: Rollouts (for a group reward: groups) scored at once by ``score_batch``
            when the caller does not say. The client's ``max_in_flight`` caps the calls.
    """

    client: JudgeClient
    concurrency: int = DEFAULT_CONCURRENCY

    def __post_init__(self) -> None:
        pass  # the end of the rewards' __post_init__ chains

    def default_deadline(self) -> float | None:
        """The client's worst case, where the reward's ``deadline`` is not set:
        ``2 * ((retries + 1) * (timeout + 5) + retries * max_backoff)`` (every attempt with its
        5s of slack, the backoffs between them, twice for the repair call when the first reply
        is no valid verdict; the defaults give 1130s)."""
        client = self.client
        call = (client.retries + 1) * (client.timeout + _CALL_SLACK)
        return _CALLS_PER_VERDICT * (call + client.retries * client.max_backoff)

    @classmethod
    def __get_pydantic_core_schema__(
        cls, source: type[Any], handler: GetCoreSchemaHandler
    ) -> core_schema.CoreSchema:
        # How referee.load validates a spec's options: flat client options become `client`
        # first, then the reward's own dataclass schema validates the rest.
        return core_schema.no_info_before_validator_function(
            lambda data: _nest_client(cls, data), handler(source)
        )


def _nest_client(cls: type[JudgeOptions], data: Any) -> Any:
    """`data` with the client options written flat gathered into a validated `client`.

    Raises:
        ValueError: The options give the client both flat and under ``client``.
        pydantic.ValidationError: A flat client option is missing or invalid (its location is
            the flat key, as the spec wrote it).
    """
    if not isinstance(data, Mapping):
        return data  # an instance, validated as such
    own = {f.name for f in dataclasses.fields(cls)}
    flat = {k: v for k, v in data.items() if k in CLIENT_OPTIONS and k not in own}
    if "client" in data:
        if flat:
            raise ValueError(
                f"the judge client is given both under 'client' and flat ({', '.join(flat)}): "
                "give its options one way"
            )
        return data
    rest = {k: v for k, v in data.items() if k not in flat}
    return {**rest, "client": _CLIENT.validate_python(flat)}
