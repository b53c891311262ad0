"""`reasoning_gym`: reasoning-gym's procedural tasks, each verified by its own ``score_answer``.

reasoning-gym (``pip install "referee[reasoning]"``) generates 100+ task families
(``reasoning_gym.create_dataset(name, seed=..., size=...)``); every entry is a dict with
``question``, ``answer`` and ``metadata`` (whose ``source_dataset`` names its task), and every
task scores an answer with ``score_answer(answer, entry)`` in [0, 1]. This reward is that call:
its value is the task's ``score_answer`` on the same answer and entry (``tests/rewards/math/
test_reasoning_gym.py`` checks it on every family), so those tasks train with referee's gates,
combinations and reports.

The reference is the task's entry, in one of these shapes:

- the entry itself: ``{"question", "answer", "metadata": {"source_dataset": "chain_sum", ...}}``
  (as reasoning-gym makes it, composite datasets included);
- ``{"dataset": "chain_sum", "entry": {...}}``, for an entry whose metadata names no task;
- an entry alone, with ``dataset:`` in the spec naming the task;
- any of these as a JSON string (a verl ``ground_truth`` column often holds one).

Entries hold tuples, which JSON (and so a `Rollout`) does not: a rollout file has them as
lists; in Python, `entry_reference` makes the same JSON copy. reasoning-gym's scorers give the
same verdict on that copy except for ``arc_agi`` and ``rearc``, which compare a parsed grid with
the entry's tuple grid (a right answer would score 0.05): for those two, referee turns
``metadata.input`` and ``metadata.output`` back into tuples of tuples.

Which scorer: the task's ``score_answer`` on an instance built with reasoning-gym's default
config (what ``reasoning_gym.get_score_answer_fn(name)`` returns), once per task and process.
A few tasks read their config while scoring (``decimal_arithmetic``, ``polynomial_equations``,
``puzzle24``, ``time_intervals``, and ``arc_agi``/``rearc``'s board format): give the config
the entries were made with in `configs`, and the scorer is built from it.

The answer is the text of the last ``<answer>...</answer>``, by reasoning-gym's own
``extract_answer`` (on a text of more than four opening tags, where that function's regex
turns quadratic, the same pattern on a linear-time engine), or the whole completion
(``extract: full``). No tag: the scorer is called with None, as reasoning-gym does. An answer
longer than `max_answer_chars` (100,000 characters) scores 0.0 without calling the scorer:
some scorers parse with sympy and take seconds on a megabyte, and no task's answer is near
that long. A scorer that raises (``prime_factorization``
does on a non-number) is a ``Failure("error")`` with its message, not a 0.

Scorers that run the answer as code. Nine tasks' scorers pass the policy's answer to Python's
``eval`` or to sympy's ``parse_expr`` (which calls ``eval``): `EVALS_ANSWER`. There a policy
can run code in the scoring process, or stall it in native code no deadline interrupts
(``9**9**9**9``). referee fails closed: those rollouts score ``Failure("sandbox")`` unless the
spec says ``allow_eval: true`` (and a spec that names such a task in `dataset` or `configs`
without it does not load). ``tests/rewards/math/test_reasoning_gym.py`` re-audits the installed
reasoning-gym's scorers, so a new version that adds such a call fails the test until listed.
"""

from __future__ import annotations

import difflib
import importlib
import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

from referee.errors import MissingDependency, NotApplicable
from referee.registry import register
from referee.reward import CheckReward, Need
from referee.rewards._common import clip_text, reference_of, short
from referee.rewards._extract import extract_answer
from referee.rollout import Rollout
from referee.scores import Score
from referee.verifiers.patterns import compile_pattern
from referee.workers import RunIn

__all__ = ["EVALS_ANSWER", "ReasoningExtract", "ReasoningGym", "entry_reference"]

EVALS_ANSWER: frozenset[str] = frozenset({
    "binary_matrix",  # eval
    "countdown",  # sympy parse_expr
    "intermediate_integration",  # sympy parse_expr
    "n_queens",  # eval
    "polynomial_multiplication",  # sympy parse_expr
    "puzzle24",  # sympy parse_expr
    "simple_integration",  # sympy parse_expr
    "spiral_matrix",  # eval
    "string_insertion",  # eval
})  # fmt: skip
"""The tasks whose scorer evaluates the answer as Python (reasoning-gym 0.1.25): they score
only with ``allow_eval: true``."""

ReasoningExtract = Literal["answer_tag", "full"]
"""The answer: the last ``<answer>`` tag's text (reasoning-gym's ``extract_answer``), or the
whole completion."""

# reasoning_gym.utils.extract_answer's pattern, unchanged, on RE2 (`compile_pattern` keeps
# `re`'s meaning): with `re`, each unclosed tag costs a scan to the end of the text, so a text
# of many takes quadratic time. Up to `_FEW_TAGS` tags, reasoning-gym's own function runs (in
# at most that many scans of the text; RE2's wrapper costs more than a whole extraction on a
# short text).
_ANSWER_TAG = compile_pattern(r"<answer>\s?(.*?)\s?</answer>", re.DOTALL)
_FEW_TAGS = 4
_COMPOSITE = "composite"  # its entries name the task that made them in source_dataset

_EVAL_WARNING = (
    "its reasoning-gym scorer runs the answer through eval (a policy can run code in this "
    "process); set allow_eval: true to score it anyway"
)

_ScoreAnswer = Callable[[str | None, dict[str, Any]], float]


def entry_reference(entry: Mapping[str, Any]) -> Any:
    """A reasoning-gym entry as a JSON value (tuples as lists), for `Rollout.reference`."""
    return json.loads(json.dumps(entry))


def _tuple_grid(grid: Any) -> Any:
    if not isinstance(grid, list):
        return grid
    return tuple(tuple(row) if isinstance(row, list) else row for row in grid)


def _arc_grids(entry: dict[str, Any]) -> dict[str, Any]:
    """An ARC entry with its grids as reasoning-gym builds them (tuples), not as JSON has them."""
    metadata = entry["metadata"]
    grids = {k: _tuple_grid(metadata[k]) for k in ("input", "output") if k in metadata}
    return {**entry, "metadata": {**metadata, **grids}}


# Tasks whose scorer gives another verdict on an entry's JSON copy, and the repair.
_AS_BUILT: dict[str, Callable[[dict[str, Any]], dict[str, Any]]] = {
    "arc_agi": _arc_grids,
    "rearc": _arc_grids,
}


def _factory() -> Any:
    try:
        return importlib.import_module("reasoning_gym.factory")
    except ImportError:
        raise MissingDependency("reasoning-gym", "reasoning", "reasoning_gym") from None


def _unknown(name: str, known: Mapping[str, Any]) -> str:
    close = difflib.get_close_matches(name, list(known), n=1)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    return f"{name!r} is not a reasoning-gym task{hint}"


@register("reasoning_gym")
@dataclass(kw_only=True)
class ReasoningGym(CheckReward):
    """A reasoning-gym task's own ``score_answer`` on the completion's answer, in [0, 1].

    reasoning-gym (``pip install "referee[reasoning]"``) generates 100+ task families; each
    scores an answer with ``score_answer(answer, entry)`` in [0, 1], and this reward's value
    is that call's. The reference is the task's entry: the entry itself (``{"question",
    "answer", "metadata": {"source_dataset": "chain_sum", ...}}``, as reasoning-gym makes
    it), ``{"dataset": "chain_sum", "entry": {...}}`` for an entry whose metadata names no
    task, or an entry alone with `dataset` naming the task; any of these may be a JSON string
    (a verl ``ground_truth`` column often holds one). A reference of another shape, or of an
    unknown task, is ``not_applicable``.

    The answer is the text of the last ``<answer>...</answer>`` (no tag: the scorer gets
    None, as in reasoning-gym) or the whole completion. An answer longer than
    `max_answer_chars` scores 0.0 without calling the scorer; a scorer that raises is
    ``Failure("error")``. The scorer is built with the task's default config unless
    `configs` gives one. Nine tasks' scorers run the answer through ``eval`` (`EVALS_ANSWER`:
    ``countdown``, ``puzzle24``, ``n_queens``, ...): their rollouts are
    ``Failure("sandbox")`` unless `allow_eval` is on, and a spec that names one in `dataset`
    or `configs` without it does not load.

    Attributes:
        dataset: The task, for entries that do not name theirs (``metadata.source_dataset``
            or the reference's ``dataset`` key). When both are given they must agree.
        configs: Task name -> the ``create_dataset`` options its entries were made with,
            for the tasks whose scoring reads its config (``decimal_arithmetic``,
            ``polynomial_equations``, ``puzzle24``, ``time_intervals``, and ``arc_agi`` and
            ``rearc``'s board format). Others score with the defaults.
        extract: Which part of the completion is the answer: ``answer_tag`` (the last
            ``<answer>`` tag's text, by reasoning-gym's own ``extract_answer``) or ``full``
            (the whole completion).
        allow_eval: Score the tasks of `EVALS_ANSWER`, whose scorers run the answer through
            ``eval`` in this process (a policy could run code there, or stall it). Off: their
            rollouts are ``Failure("sandbox")``.
        max_answer_chars: Longest answer passed to the scorer; longer scores 0.0.
        reference_key: Take the entry from this key of an object reference.

    Example:
        ```yaml
        type: reasoning_gym
        dataset: decimal_arithmetic
        configs:
          decimal_arithmetic: {min_num_decimal_places: 2, max_num_decimal_places: 4}
        extract: answer_tag
        ```

    Scores:
        ```yaml
        - prompt: &question >-
            Please solve this problem to a maximum of 12 significant digits, rounding up from
            the half. Only reply with the final value.

            0.87*7.54 = ?
          completion: 0.87 * 7.54 = 6.5598, so <answer>6.5598</answer>
          reference: &entry
            question: *question
            answer: "6.5598"
            metadata: {source_dataset: decimal_arithmetic, decimal_places: 2, num_terms: 2}
          value: 1.0
        - prompt: *question
          completion: Roughly <answer>6.56</answer>
          reference: *entry
          value: 0.0
        ```
    """

    # reasoning-gym's scorers are code referee did not write, run on the policy's text
    default_run_in: ClassVar[RunIn] = "process"

    dataset: str | None = None
    configs: dict[str, dict[str, Any]] = field(default_factory=dict)
    extract: ReasoningExtract = "answer_tag"
    allow_eval: bool = False
    max_answer_chars: int = 100_000
    reference_key: str | None = None
    name: str = "reasoning_gym"
    _tasks: Mapping[str, Any] = field(init=False, repr=False, compare=False)
    _scorers: dict[str, _ScoreAnswer] = field(init=False, repr=False, compare=False)
    _extract_answer: Callable[[str], str | None] = field(init=False, repr=False, compare=False)

    def needs(self) -> frozenset[Need]:
        """The reasoning-gym entry."""
        return frozenset({"reference"})

    def __post_init__(self) -> None:
        factory = _factory()
        self._tasks = factory.DATASETS
        self._extract_answer = importlib.import_module("reasoning_gym.utils").extract_answer
        if self.max_answer_chars < 1:
            raise ValueError(f"max_answer_chars must be at least 1, got {self.max_answer_chars}")
        for name in [self.dataset, *self.configs]:
            if name is not None and (name == _COMPOSITE or name not in self._tasks):
                why = (
                    "composite entries name their task in metadata.source_dataset"
                    if name == _COMPOSITE
                    else _unknown(name, self._tasks)
                )
                raise ValueError(f"dataset {name!r}: {why}")
            if name in EVALS_ANSWER and not self.allow_eval:
                raise ValueError(f"dataset {name!r}: {_EVAL_WARNING}")
        self._scorers = {}
        for name, options in self.configs.items():
            try:
                built = factory.create_dataset(name, **options)
            except (TypeError, ValueError, AssertionError) as exc:
                raise ValueError(f"configs[{name!r}]: {type(exc).__name__}: {exc}") from None
            self._scorers[name] = built.score_answer

    def check(self, rollout: Rollout) -> Score:
        found = self._well_formed(rollout.reference)
        task, entry = found if found is not None else self._entry(rollout)
        if task in EVALS_ANSWER and not self.allow_eval:
            return Score.failed("sandbox", f"{task}: {_EVAL_WARNING}", self.name)
        scorer = self._scorers.get(task)
        if scorer is None:
            scorer = self._scorers[task] = _factory().get_score_answer_fn(task)
        answer = self._answer(rollout.completion_text)
        if answer is not None and len(answer) > self.max_answer_chars:
            return Score(
                value=0.0,
                reason=f"answer is {len(answer):,} characters, over max_answer_chars "
                f"({self.max_answer_chars:,}): scored 0 without calling {task}'s score_answer",
            )
        repair = _AS_BUILT.get(task)
        value = float(scorer(answer, entry if repair is None else repair(entry)))
        shown = "no <answer> tag" if answer is None else f"answer {short(clip_text(answer))}"
        return Score(value=value, reason=f"{task}: {shown} scored {value:.4g}")

    def _answer(self, text: str) -> str | None:
        if self.extract == "full":
            return text
        if text.count("<answer>") <= _FEW_TAGS:
            return self._extract_answer(text)  # reasoning-gym's own, at its speed
        return extract_answer(text, pattern=_ANSWER_TAG)

    def _well_formed(self, ref: Any) -> tuple[str, dict[str, Any]] | None:
        """`_entry` for a well-formed reference, at the cost of a few lookups; else None."""
        if self.reference_key is not None:
            ref = ref.get(self.reference_key) if type(ref) is dict else None
        if type(ref) is not dict:
            return None
        named, entry = (ref.get("dataset"), ref["entry"]) if "entry" in ref else (None, ref)
        if type(entry) is not dict or "answer" not in entry:
            return None
        metadata = entry.get("metadata")
        if type(metadata) is not dict:
            return None
        task = None
        for name in (named, metadata.get("source_dataset"), self.dataset):
            if name is None or name == _COMPOSITE:
                continue
            if task is None:
                task = name
            elif name != task:
                return None
        if type(task) is not str or task not in self._tasks:
            return None
        return task, entry

    def _entry(self, rollout: Rollout) -> tuple[str, dict[str, Any]]:
        """The task's name and its entry, from the rollout's reference; NotApplicable naming
        what is wrong with it."""
        ref = reference_of(rollout, self.reference_key)
        where = "reference" if self.reference_key is None else f"reference[{self.reference_key!r}]"
        if isinstance(ref, str) and ref.lstrip().startswith("{"):
            try:
                ref = json.loads(ref)
            except ValueError:
                raise NotApplicable(f"{where} is a string but not a JSON object") from None
        if not isinstance(ref, dict):
            raise NotApplicable(
                f"{where} must be a reasoning-gym entry (an object with 'answer' and "
                f"'metadata') or {{'dataset': ..., 'entry': ...}}, got {short(ref)}"
            )
        named: object = None
        entry = ref
        if "entry" in ref:
            named, entry = ref.get("dataset"), ref["entry"]
            where += ".entry"
            if not isinstance(entry, dict):
                raise NotApplicable(f"{where} must be an object (the entry), got {short(entry)}")
        missing = [k for k in ("answer", "metadata") if k not in entry]
        if missing:
            raise NotApplicable(
                f"{where} has no {' or '.join(repr(k) for k in missing)}: not a reasoning-gym "
                f"entry (keys: {sorted(entry)[:10]})"
            )
        metadata = entry["metadata"]
        if not isinstance(metadata, dict):
            raise NotApplicable(f"{where}.metadata must be an object, got {short(metadata)}")
        return self._task(named, metadata.get("source_dataset"), where), entry

    def _task(self, named: object, source: object, where: str) -> str:
        """The one task the reference and the spec name; NotApplicable if none or two."""
        given = [v for v in (named, source, self.dataset) if v is not None and v != _COMPOSITE]
        first = given[0] if given else None
        if type(first) is str and first in self._tasks and all(v == first for v in given):
            return first  # the common case, checked without building messages
        names = {
            f"{where.removesuffix('.entry')}.dataset": named,
            f"{where}.metadata.source_dataset": source,
            "the spec's dataset": self.dataset,
        }
        known: dict[str, str] = {}
        for key, value in names.items():
            if value is None or value == _COMPOSITE:
                continue
            if not isinstance(value, str):
                raise NotApplicable(f"{key} must be a task name, got {short(value)}")
            if value not in self._tasks:
                raise NotApplicable(f"{key}: {_unknown(value, self._tasks)}")
            known[key] = value
        if not known:
            raise NotApplicable(
                f"no reasoning-gym task named: {where}.metadata has no 'source_dataset'; "
                "set dataset: in the spec, or give the reference as "
                "{'dataset': <task>, 'entry': <entry>}"
            )
        raise NotApplicable(
            "the task names disagree: " + ", ".join(f"{k} is {v!r}" for k, v in known.items())
        )
