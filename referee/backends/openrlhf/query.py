"""Reading OpenRLHF's ``(queries, prompts, labels)``: the completion is the query after its
prompt, end markers stripped (the package docstring says how a prompt is found)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pydantic import ValidationError

from referee.backends.contract import decode_json_text
from referee.backends.openrlhf.markers import EndMarkers
from referee.errors import RolloutError
from referee.rollout import Rollout
from referee.scores import Score

__all__ = ["completion_of", "in_place", "rollouts_from"]

_MIN_OVERLAP = 16
"""Non-space characters a cut prompt's rest must share with the query's start to be taken."""


def completion_of(query: str, prompt: str) -> str | None:
    """The response in an OpenRLHF query: the text after its prompt, end markers not stripped.

    None where the prompt cannot be found at the query's start (see the module docstring for
    how a decoded prompt that differs in whitespace, or was cut to fit, is still found).
    """
    if not prompt or query.startswith(prompt):
        return query[len(prompt) :]
    end = _loose_prefix_end(query, prompt)
    if end is None:
        end = _cut_prompt_end(query, prompt)
    return None if end is None else query[end:]


def _loose_prefix_end(query: str, prompt: str) -> int | None:
    """Where `prompt` ends in `query`, whitespace aside (decoding may add or drop spaces)."""
    i, n = 0, len(query)
    for ch in prompt:
        if ch.isspace():
            continue
        while i < n and query[i].isspace():
            i += 1
        if i == n or query[i] != ch:
            return None
        i += 1
    return _after_tail(query, prompt, i)


def _cut_prompt_end(query: str, prompt: str) -> int | None:
    """Where the rest of a prompt cut from the left ends in `query` (OpenRLHF keeps the last
    tokens of a prompt that is too long): the longest end of the prompt that starts the query,
    whitespace aside, and at least `_MIN_OVERLAP` characters of it."""
    solid = "".join(prompt.split())
    head: list[str] = []
    where: list[int] = []
    for i, ch in enumerate(query):
        if len(head) == len(solid):
            break
        if not ch.isspace():
            head.append(ch)
            where.append(i)
    # Knuth-Morris-Pratt: the longest prefix of `head` that is a suffix of `solid`.
    fail = [0] * len(head)
    k = 0
    for i in range(1, len(head)):
        while k and head[i] != head[k]:
            k = fail[k - 1]
        if head[i] == head[k]:
            k += 1
        fail[i] = k
    k = 0
    for ch in solid:
        while k and (k == len(head) or ch != head[k]):
            k = fail[k - 1]
        if k < len(head) and ch == head[k]:
            k += 1
    if k < min(_MIN_OVERLAP, len(solid)):
        return None
    return _after_tail(query, prompt, where[k - 1] + 1)


def _after_tail(query: str, prompt: str, i: int) -> int:
    """Past the prompt's trailing whitespace too, where the query's whitespace there holds it
    (whitespace after it is the response's own: Mistral's answers start with a space)."""
    tail = prompt[len(prompt.rstrip()) :]
    if not tail:
        return i
    run = query[i : len(query) - len(query[i:].lstrip())]
    at = run.find(tail)
    return i if at < 0 else i + at + len(tail)


def _sequence(value: Any, name: str) -> Sequence[Any]:
    if isinstance(value, (str, bytes)) or not isinstance(value, Sequence):
        raise RolloutError(f"must be a list, found {type(value).__name__}", source=name)
    return value


def rollouts_from(
    queries: Any,
    prompts: Any = None,
    labels: Any = None,
    *,
    end_markers: EndMarkers | None = None,
    names: tuple[str, str, str] = ("queries", "prompts", "labels"),
) -> list[Rollout | Score]:
    """OpenRLHF's ``(queries, prompts, labels)`` as rollouts to score.

    A query whose prompt cannot be found in it gives a failed `Score` in its place. `prompts`
    and `labels` may be empty or None (no prompt, no reference). `names` name the three in
    error messages (``/get_reward``'s keys are ``query``, ``prompts``, ``labels``).

    Raises:
        RolloutError: Input of the wrong shape; its ``source`` names the key and index
            (``query[3]``). One whose cause is a RecursionError is a label nested too deep;
            one whose cause is a pydantic ValidationError a label that is no JSON value.
    """
    markers = EndMarkers() if end_markers is None else end_markers
    q_name, p_name, l_name = names
    queries = _sequence(queries, q_name)
    prompts = [] if prompts is None else _sequence(prompts, p_name)
    labels = [] if labels is None else _sequence(labels, l_name)
    for key, values in ((p_name, prompts), (l_name, labels)):
        if values and len(values) != len(queries):
            raise RolloutError(
                f"{len(values)} {key} for {len(queries)} queries; send one per query", source=key
            )
    out: list[Rollout | Score] = []
    for i, query in enumerate(queries):
        prompt = prompts[i] if prompts else ""
        if not isinstance(query, str):
            raise RolloutError(
                f"must be a string, found {type(query).__name__}", source=f"{q_name}[{i}]"
            )
        if prompt is None:
            prompt = ""
        if not isinstance(prompt, str):
            raise RolloutError(
                f"must be a string, found {type(prompt).__name__}", source=f"{p_name}[{i}]"
            )
        try:
            label = decode_json_text(labels[i] if labels else None)
        except RecursionError as exc:  # Python's json recurses once per level of nesting
            raise RolloutError(
                "JSON nested too deep to read: send flatter JSON", source=f"{l_name}[{i}]"
            ) from exc
        completion = completion_of(query, prompt)
        if completion is None:
            out.append(_prompt_not_found(i, query, prompt, names))
            continue
        try:
            rollout = Rollout(
                id=str(i), prompt=prompt, completion=markers.strip(completion), reference=label
            )
        except ValidationError as exc:
            raise RolloutError(exc.errors()[0]["msg"], source=f"{l_name}[{i}]") from exc
        out.append(rollout)
    return out


def _prompt_not_found(i: int, query: str, prompt: str, names: tuple[str, str, str]) -> Score:
    message = (
        f"{names[0]}[{i}] does not start with its prompt ({names[1]}[{i}], "
        f"{_clip(prompt)}); it starts {_clip(query)}: send the query as prompt + response"
    )
    return Score.failed("invalid_input", message, "openrlhf")


def _clip(text: str, limit: int = 60) -> str:
    return repr(text if len(text) <= limit else text[:limit] + "...")


def in_place(items: Sequence[Rollout | Score], scored: Sequence[Score]) -> list[Score]:
    """`rollouts_from`'s items with each rollout replaced by its score (`scored`, in order)."""
    scores = iter(scored)
    return [next(scores) if isinstance(item, Rollout) else item for item in items]
