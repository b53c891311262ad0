"""`field_match`: a completion's JSON object against the expected fields in the reference.

Each field is compared by its own matcher and reported as a component; the total is the
weighted mean of the field scores, with invented fields (keys the reference does not have)
counted as zeros when `extra_fields` is ``"penalize"``. Lists compared with ``set_f1`` lose
precision for every invented item, so listing every possible value does not pay.
"""

from __future__ import annotations

import decimal
import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import date, datetime
from decimal import Decimal
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, model_validator
from rapidfuzz import fuzz

from referee.errors import NotApplicable
from referee.registry import register
from referee.reward import CheckReward, Need
from referee.rewards._common import normalize_text, reference_of, short
from referee.rewards._extract import JsonExtract, parse_json
from referee.rollout import Rollout
from referee.scores import Score
from referee.workers import RunIn

__all__ = ["FieldMatch", "FieldRule", "MatcherKind"]

MatcherKind = Literal["exact", "text", "number", "date", "set_f1", "fuzzy"]
"""How one field is compared:

- exact: equal JSON values (1 and 1.0 are equal; true and 1 are not);
- text: equal after text normalisation (case, Unicode form, whitespace, edge punctuation);
- number: within `abs_tol` or `rel_tol`; numeric strings such as "1,200.5" or "$3.5" count;
  numbers beyond float range (``1e400``, a 5000-digit integer) are compared exactly;
- date: the same calendar date, whatever the format (ISO 8601 or `date_formats`);
- set_f1: lists compared as sets of normalised items, scored by F1 (invented items cost
  precision, missing ones recall);
- fuzzy: normalised edit-distance similarity in [0, 1]; 0 below `threshold`.
"""

_DEFAULT_DATE_FORMATS = (
    "%Y-%m-%d",
    "%Y/%m/%d",
    "%B %d, %Y",
    "%b %d, %Y",
    "%d %B %Y",
    "%d %b %Y",
    "%B %d %Y",
    "%b. %d, %Y",
)
_NUMERIC_JUNK = re.compile(r"[,\s_$€£¥]")
# For numbers beyond float range: 60 digits, and exponents that never overflow.
_WIDE = decimal.Context(prec=60, Emax=decimal.MAX_EMAX, Emin=decimal.MIN_EMIN, traps=[])


class FieldRule(BaseModel):
    """How one field is matched and weighed.

    In a spec, a rule can be written as a matcher name (``amount: number``), as a one-key
    mapping of the matcher to its options (``amount: {number: {rel_tol: 0.01}}``), or in full
    (``amount: {match: number, rel_tol: 0.01, weight: 2}``).

    Attributes:
        match: The matcher. ``exact``: equal JSON values (1 and 1.0 are equal; true and 1 are
            not). ``text``: equal after text normalisation (case, Unicode form, whitespace,
            edge punctuation). ``number``: within `abs_tol` or `rel_tol`; numeric strings such
            as "1,200.5" or "$3.5" count, and numbers beyond float range are compared exactly.
            ``date``: the same calendar date, in ISO 8601 or one of `date_formats`.
            ``set_f1``: lists compared as sets of normalised items, scored by F1 (an invented
            item costs precision, a missing one recall). ``fuzzy``: normalised edit-distance
            similarity in [0, 1], 0 below `threshold`.
        weight: The field's weight in the mean of the field scores.
        abs_tol: ``number``: the absolute difference allowed.
        rel_tol: ``number``: the difference allowed relative to the reference.
        threshold: ``fuzzy``: a similarity below this scores 0.
        date_formats: ``date``: the `strptime` formats tried after ISO 8601.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    match: MatcherKind = "exact"
    weight: float = 1.0
    abs_tol: float = 0.0
    rel_tol: float = 0.0
    threshold: float = 0.0
    date_formats: tuple[str, ...] = _DEFAULT_DATE_FORMATS

    @model_validator(mode="before")
    @classmethod
    def _short_forms(cls, data: Any) -> Any:
        if isinstance(data, str):
            return {"match": data}
        if isinstance(data, Mapping) and "match" not in data:
            kinds = [k for k in data if k in MatcherKind.__args__]  # type: ignore[attr-defined]
            if len(kinds) == 1:
                options = data[kinds[0]]
                rest = {k: v for k, v in data.items() if k != kinds[0]}
                if options is None:
                    options = {}
                if not isinstance(options, Mapping):
                    raise ValueError(f"options of {kinds[0]!r} must be a mapping, got {options!r}")
                return {"match": kinds[0], **options, **rest}
        return data


_MISSING = object()


def _lookup(obj: Any, path: str) -> Any:
    """Value at a dotted path ("a.b.0.c"); an exact key with dots wins; _MISSING if absent."""
    if isinstance(obj, dict) and path in obj:
        return obj[path]
    for part in path.split("."):
        if isinstance(obj, dict):
            if part not in obj:
                return _MISSING
            obj = obj[part]
        elif isinstance(obj, list) and part.isdigit() and int(part) < len(obj):
            obj = obj[int(part)]
        else:
            return _MISSING
    return obj


def _as_number(value: Any) -> float | Decimal | None:
    """A float, or an exact Decimal for a number beyond float range; None if not a number."""
    if isinstance(value, bool):
        return None
    if isinstance(value, float):
        return value
    if isinstance(value, int):
        try:
            return float(value)
        except OverflowError:
            return Decimal(value)
    if isinstance(value, Decimal):
        number = float(value)
        return number if math.isfinite(number) else value
    if isinstance(value, str):
        text = _NUMERIC_JUNK.sub("", value)
        try:
            number = float(text)
        except ValueError:
            return None
        if math.isfinite(number):
            return number
        try:
            exact = Decimal(text)  # beyond float range, or inf/nan
        except decimal.InvalidOperation:
            return None
        return exact if exact.is_finite() else None
    return None


def _close(p: Decimal, r: Decimal, rel_tol: float, abs_tol: float) -> bool:
    """`math.isclose` for Decimals of any size, to 60 significant digits."""
    if p == r:
        return True
    diff = _WIDE.subtract(p, r).copy_abs()
    scale = max(p.copy_abs(), r.copy_abs())
    return diff <= _WIDE.multiply(Decimal(rel_tol), scale) or diff <= Decimal(abs_tol)


def _as_date(value: Any, formats: tuple[str, ...]) -> date | None:
    if not isinstance(value, str):
        return None
    text = value.strip()
    try:
        return datetime.fromisoformat(text).date()
    except ValueError:
        pass
    for fmt in formats:
        try:
            return datetime.strptime(text, fmt).date()
        except ValueError:
            continue
    return None


def _item_key(item: Any) -> Any:
    if isinstance(item, str):
        return normalize_text(item)
    number = _as_number(item)
    return number if number is not None else repr(item)


def _exact(pred: Any, ref: Any) -> bool:
    if isinstance(pred, bool) or isinstance(ref, bool):
        return type(pred) is type(ref) and pred == ref
    return bool(pred == ref)


MatchResult = tuple[float, str | None]


def _match_exact(rule: FieldRule, pred: Any, ref: Any) -> MatchResult:
    return (1.0, None) if _exact(pred, ref) else (0.0, f"{short(pred)} != {short(ref)}")


def _match_text(rule: FieldRule, pred: Any, ref: Any) -> MatchResult:
    if normalize_text(str(pred)) == normalize_text(str(ref)):
        return 1.0, None
    return 0.0, f"{short(pred)} != {short(ref)}"


def _match_number(rule: FieldRule, pred: Any, ref: Any) -> MatchResult:
    p, r = _as_number(pred), _as_number(ref)
    if r is None:
        raise NotApplicable(f"reference value {short(ref)} is not a number")
    if p is None:
        return 0.0, f"{short(pred)} is not a number"
    if isinstance(p, float) and isinstance(r, float):
        if math.isclose(p, r, rel_tol=rule.rel_tol, abs_tol=rule.abs_tol):
            return 1.0, None
        return 0.0, f"{p:.12g} != {r:.12g}"
    if _close(Decimal(p), Decimal(r), rule.rel_tol, rule.abs_tol):
        return 1.0, None
    return 0.0, f"{p:.12g} != {r:.12g} (beyond float range: compared exactly)"


def _match_date(rule: FieldRule, pred: Any, ref: Any) -> MatchResult:
    rd = _as_date(ref, rule.date_formats)
    if rd is None:
        raise NotApplicable(f"reference value {short(ref)} is not a date")
    pd = _as_date(pred, rule.date_formats)
    if pd is None:
        return 0.0, f"{short(pred)} is not a date"
    return (1.0, None) if pd == rd else (0.0, f"{pd} != {rd}")


def _match_set_f1(rule: FieldRule, pred: Any, ref: Any) -> MatchResult:
    if not isinstance(ref, list):
        raise NotApplicable(f"set_f1 needs a list in the reference, got {short(ref)}")
    if not isinstance(pred, list):
        return 0.0, f"{short(pred)} is not a list"
    ps, rs = {_item_key(x) for x in pred}, {_item_key(x) for x in ref}
    if not ps and not rs:
        return 1.0, None
    hits = len(ps & rs)
    if hits == 0:
        return 0.0, f"no item matches (invented {len(ps)}, missed {len(rs)})"
    f1 = 2 * hits / (len(ps) + len(rs))
    if f1 == 1.0:
        return 1.0, None
    parts = [f"F1 {f1:.2f}"]
    if ps - rs:
        parts.append(f"invented {sorted(map(str, ps - rs))[:5]}")
    if rs - ps:
        parts.append(f"missed {sorted(map(str, rs - ps))[:5]}")
    return f1, "; ".join(parts)


def _match_fuzzy(rule: FieldRule, pred: Any, ref: Any) -> MatchResult:
    ratio = fuzz.ratio(normalize_text(str(pred)), normalize_text(str(ref))) / 100.0
    if ratio < rule.threshold:
        return 0.0, f"similarity {ratio:.2f} below {rule.threshold}"
    return ratio, None if ratio == 1.0 else f"similarity {ratio:.2f}"


_MATCHERS: dict[str, Callable[[FieldRule, Any, Any], MatchResult]] = {
    "exact": _match_exact,
    "text": _match_text,
    "number": _match_number,
    "date": _match_date,
    "set_f1": _match_set_f1,
    "fuzzy": _match_fuzzy,
}


def match_field(rule: FieldRule, pred: Any, ref: Any) -> MatchResult:
    """(score in [0, 1], why it is not 1) for one field."""
    return _MATCHERS[rule.match](rule, pred, ref)


@dataclass(frozen=True, slots=True)
class _Step:
    """One field to compare, with its matcher looked up once."""

    path: str
    rule: FieldRule
    weight: float
    matcher: Callable[[FieldRule, Any, Any], MatchResult]
    simple: bool  # a plain key, not a dotted path

    @classmethod
    def of(cls, path: str, rule: FieldRule) -> _Step:
        return cls(path, rule, rule.weight, _MATCHERS[rule.match], "." not in path)


@register("field_match")
@dataclass(kw_only=True)
class FieldMatch(CheckReward):
    """Scores the completion's JSON object field by field against the expected object.

    The reference (``rollout.reference``, or its `reference_key` entry) is the expected JSON
    object; a rollout without one is ``not_applicable``. Each field is compared by its own
    matcher and is a component (keyed by its path), in [0, 1]; a field the completion lacks
    scores 0, and a field absent from both is skipped. The value is the weighted mean of the
    field scores, in [0, 1], with invented fields (top-level keys the reference does not
    have) counted as zeros when `extra_fields` is ``penalize``. Lists compared with
    ``set_f1`` lose precision for every invented item, so listing every possible value does
    not pay. A completion that is not valid JSON, or not an object, scores 0.0.

    Attributes:
        fields: Field (dotted paths reach nested values: ``address.city``, ``items.0.sku``)
            -> rule (a field rule, below). When omitted, every key of the reference,
            compared with `default`.
        default: The matcher for fields listed without one, and for all fields when `fields`
            is omitted: ``exact``, ``text``, ``number``, ``date``, ``set_f1`` or ``fuzzy``
            (as a field rule's ``match``).
        extra_fields: What to do with top-level keys of the completion that the reference
            does not have: ``"penalize"`` counts each as a zero-scored field of weight
            `extra_weight`; ``"ignore"`` lets them pass.
        extra_weight: The weight of one invented field.
        reference_key: Take the expected object from this key of the reference.
        extract: Where the JSON is in the completion: ``strict`` (the whole completion),
            ``fenced`` (the first fenced code block) or ``first`` (the first JSON object or
            array anywhere in the text). Parsing is strict: no NaN or Infinity, no
            duplicate keys.

    Example:
        ```yaml
        type: field_match
        extract: fenced
        fields:
          company: text
          amount: {number: {rel_tol: 0.01}}
          date: date
          provinces: set_f1
          address.city: {match: fuzzy, threshold: 0.8, weight: 0.5}
        ```

    Scores:
        ````yaml
        - prompt: Extract the invoice's company, amount, date, provinces and city.
          completion: |-
            ```json
            {"company": "ACME Corp.", "amount": 1251, "date": "2024-03-05",
             "provinces": ["QC", "ON"], "address": {"city": "Montreal"}}
            ```
          reference:
            company: Acme Corp
            amount: 1250.0
            date: "2024-03-05"
            provinces: ["ON", "QC"]
            address: {city: Montréal}
          value: 0.9861111111111112
        - prompt: Extract the invoice's company, amount, date, provinces and city.
          completion: |-
            ```json
            {"company": "Acme Corp", "amount": 1400, "date": "2024-05-03",
             "provinces": ["ON", "QC", "BC"], "address": {"city": "Toronto"}, "currency": "CAD"}
            ```
          reference:
            company: Acme Corp
            amount: 1250.0
            date: "2024-03-05"
            provinces: ["ON", "QC"]
            address: {city: Montréal}
          value: 0.32727272727272727
        - prompt: Extract the invoice's company, amount, date, provinces and city.
          completion: I could not find an invoice in this text.
          reference:
            company: Acme Corp
            amount: 1250.0
            date: "2024-03-05"
            provinces: ["ON", "QC"]
            address: {city: Montréal}
          value: 0.0
        ````
    """

    default_run_in: ClassVar[RunIn] = "inline"  # its cost is bounded

    fields: dict[str, FieldRule | MatcherKind] | None = None
    default: MatcherKind = "exact"
    extra_fields: Literal["penalize", "ignore"] = "penalize"
    extra_weight: float = 1.0
    reference_key: str | None = None
    extract: JsonExtract = "strict"
    name: str = "field_match"
    _plan: list[_Step] | None = field(init=False, repr=False, compare=False, default=None)

    def needs(self) -> frozenset[Need]:
        """The expected object."""
        return frozenset({"reference"})

    def __post_init__(self) -> None:
        self._default = FieldRule(match=self.default)
        if self.fields is None:
            self._plan = None
            return
        rules = {
            path: rule if isinstance(rule, FieldRule) else FieldRule.model_validate(rule)
            for path, rule in self.fields.items()
        }
        self._plan = [_Step.of(path, rule) for path, rule in rules.items()]
        self._roots = {path.split(".", 1)[0] for path in rules} | set(rules)

    def check(self, rollout: Rollout) -> Score:
        ref = reference_of(rollout, self.reference_key)
        if not isinstance(ref, dict):
            raise NotApplicable(f"field_match needs an object reference, got {short(ref)}")
        plan = self._plan
        if plan is None:
            plan = [_Step.of(key, self._default) for key in ref]
        parsed = parse_json(rollout.completion_text, self.extract)
        if not parsed.ok:
            return Score(value=0.0, reason=f"invalid JSON: {parsed.error}")
        pred = parsed.value
        if not isinstance(pred, dict):
            return Score(value=0.0, reason=f"expected a JSON object, got {type(pred).__name__}")

        components: dict[str, float | None] = {}
        notes: list[str] = []
        total = weight = 0.0
        for step in plan:
            path = step.path
            if step.simple:
                expected, got = ref.get(path, _MISSING), pred.get(path, _MISSING)
            else:
                expected, got = _lookup(ref, path), _lookup(pred, path)
            why: str | None
            if expected is _MISSING:
                if got is _MISSING:
                    continue  # absent from both: nothing to grade
                value, why = 0.0, "not in the reference"
            elif got is _MISSING:
                value, why = 0.0, "missing"
            elif expected is None:
                value, why = (1.0, None) if got is None else (0.0, f"{short(got)} != None")
            else:
                value, why = step.matcher(step.rule, got, expected)
            components[path] = value
            total += step.weight * value
            weight += step.weight
            if why:
                notes.append(f"{path}: {why}")
        if self.extra_fields == "penalize":
            invented = pred.keys() - ref.keys()
            if invented and self._plan is not None:
                invented -= self._roots
            if invented:
                weight += self.extra_weight * len(invented)
                notes.append(f"invented fields {sorted(invented)[:10]}")
        if weight == 0:
            raise NotApplicable("no field to compare: the reference and the rules share no key")
        return Score(
            value=total / weight,
            components=components,
            reason="; ".join(notes) if notes else "all fields match",
        )
