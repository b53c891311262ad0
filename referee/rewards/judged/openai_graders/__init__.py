"""`openai_grader`: an OpenAI grader config (Evals, reinforcement fine-tuning) run unchanged.

The reward takes a grader object in OpenAI's JSON shape (``grader``), or a JSON or YAML file
holding one (``grader_file``), and scores each rollout as OpenAI's graders did:

=================== ========================================================================
grader type         value
=================== ========================================================================
``string_check``    1.0 or 0.0: ``eq`` (input == reference), ``ne`` (input != reference),
                    ``like`` (input contains reference), ``ilike`` (the same, ignoring case)
``text_similarity`` the ``evaluation_metric``'s value in [0, 1] (`.similarity`)
``score_model``     the score the grader's model gives, clipped to the grader's ``range``
                    (default [0, 1]), as OpenAI's guide says ("truncated to the given
                    range"); a reply with no number is a ``Failure("judge")`` (OpenAI: 0)
``label_model``     1.0 if the model's label is one of ``passing_labels``, else 0.0
``python``          what ``grade(sample, item)`` returns, run in the sandbox (`.python_grader`)
``multi``           ``calculate_output`` over its graders' scores, by name (`.expressions`)
=================== ========================================================================

Templates (``{{sample.output_text}}``, ``{{item.answer}}``) are filled from the rollout
(`.templating`): ``item`` is the rollout's ``reference`` (a mapping: the dataset row's fields),
``sample`` its completion. A template naming an ``item`` field the row lacks is a
``Failure("not_applicable")`` naming it, never a value. A completion that lacks what the grader
reads (``output_json`` of a text that is not JSON, a tool call it did not make, a key its JSON
does not have; a ``text_similarity`` input over ``max_chars``) scores 0.0, the reason naming
what is missing, for the whole grader (a ``multi`` formula is not computed): the policy's own
failure, which a mask would let it use to escape a low score.

Components: a ``multi`` grader's each sub-grader's score, by name; ``passed`` (1.0 or 0.0)
where the grader has a ``pass_threshold`` (score >= threshold) and for ``label_model``.

Everything is checked when the spec loads: an unknown grader type or key, a missing field, a
template namespace OpenAI does not define, a formula with anything but numbers, names,
arithmetic and OpenAI's functions, a python source that does not parse, defines no
``grade(sample, item)`` taking exactly two arguments or is not under OpenAI's 256kB, a
``multi`` inside a ``multi``, and a metric that cannot run here (``cosine``, ``meteor``) are
errors naming the key.
"""

from __future__ import annotations

import ast
import asyncio
import dataclasses
import hashlib
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Literal

from pydantic import GetCoreSchemaHandler, TypeAdapter, ValidationError
from pydantic_core import core_schema

from referee.errors import JudgeError, RewardError, VerifierTimeout
from referee.judges.client import JudgeClient
from referee.judges.options import CLIENT_OPTIONS
from referee.judges.via_litellm import supports_schema
from referee.registry import register
from referee.reward import AsyncReward, Need
from referee.rewards._sandboxed import SandboxOption
from referee.rewards.judged.openai_graders import model_graders
from referee.rewards.judged.openai_graders.expressions import check_formula, evaluate_formula
from referee.rewards.judged.openai_graders.graders import (
    Grader,
    GraderSpecError,
    LabelModel,
    MultiGrader,
    Python,
    ScoreModel,
    StringCheck,
    TextSimilarity,
    parse_grader,
)
from referee.rewards.judged.openai_graders.python_grader import (
    GraderRaised,
    InvalidGrade,
    PythonSandboxFailure,
    run_grader,
)
from referee.rewards.judged.openai_graders.similarity import UNAVAILABLE, metric
from referee.rewards.judged.openai_graders.templating import (
    Sample,
    SampleLacks,
    TemplateError,
    check_template,
    render,
)
from referee.rollout import Rollout
from referee.scores import Score
from referee.verifiers.sandbox import SandboxError, get_sandbox, sandbox_options

__all__ = ["OpenAIGrader"]

_CLIENT = TypeAdapter(JudgeClient)
_CALL_SLACK = 5.0
MAX_SOURCE_BYTES = 256 * 1024
"""OpenAI's limit on a python grader's source: "less than `256kB`" (its graders guide)."""


def _read_grader_file(path: str) -> Any:
    file = Path(path)
    try:
        text = file.read_text(encoding="utf-8")
    except OSError as exc:
        raise ValueError(f"grader_file {path!r} cannot be read: {exc.strerror or exc}") from None
    try:
        if file.suffix.lower() in (".yaml", ".yml"):
            import yaml

            return yaml.safe_load(text)
        return json.loads(text)
    except ValueError as exc:  # yaml.YAMLError is not one: caught below
        raise ValueError(f"grader_file {path!r} is not valid JSON: {exc}") from None
    except Exception as exc:  # yaml.YAMLError
        raise ValueError(f"grader_file {path!r} is not valid YAML: {exc}") from None


@register("openai_grader")
@dataclass(kw_only=True)
class OpenAIGrader(AsyncReward):
    """An OpenAI grader config (``string_check``, ``text_similarity``, ``score_model``,
    ``label_model``, ``python``, ``multi``) as a reward, with OpenAI's semantics.

    Attributes:
        grader: The grader object, exactly in OpenAI's JSON shape.
        grader_file: A JSON or YAML file holding the grader object (relative paths in a spec
            resolve against the spec's folder); give this or ``grader``. The reward keeps the
            grader it read (``grader``), so it pickles without the file.
        client: The judge client's options for model graders, all but ``model`` (``api_base``,
            ``api_key_env``, ``timeout``, ``retries``, ``rpm``, ``cache``, ...;
            `referee.judges.JudgeClient`), as a mapping. Unused without a model grader. A
            grader's ``sampling_params`` set ``temperature``, ``seed`` and ``max_tokens``
            (from ``max_completions_tokens``) over these.
        models: A grader's ``model`` -> the litellm model to call instead (a local server's
            model). Without an entry, ``gpt-4o`` is called as ``openai/gpt-4o``.
        unsupported_sampling: What to do with ``sampling_params`` referee's client cannot
            send (``top_p``, ``reasoning_effort``): ``error`` when the spec loads (default),
            or ``ignore`` them (the model samples with its own defaults).
        sandbox: Where ``python`` graders run (`referee.verifiers.sandbox`): a backend's name
            or its options; default ``local`` (bubblewrap namespaces).
        python_timeout: Seconds a ``python`` grader may run per rollout (wall and CPU).
        python_memory_mb: Memory of a ``python`` grader's process, in MiB.
        invalid_grade: What a ``python`` grader that raises, returns no finite number or runs
            past ``python_timeout`` gives: ``zero`` (OpenAI's semantics, "marked as invalid and
            return a 0 grade"; the reason says so), or ``fail`` (referee's stricter choice: a
            Failure naming it, which a trainer masks; a grader's bug then shows in
            ``referee report`` instead of training as zeros, but a completion that makes the
            grader raise is masked rather than paid 0). A sandbox that cannot run the grader is
            ``Failure("sandbox")`` either way.
        max_chars: The longest input or reference a ``text_similarity`` grader scores (the
            metrics are quadratic): a longer input (the graded text) scores 0.0, a longer
            reference is a ``Failure("not_applicable")``.

    Example:
        ```yaml
        type: openai_grader
        grader:
          type: multi
          name: answer
          graders:
            exact: {type: string_check, name: exact, operation: eq,
                    input: "{{sample.output_json.answer}}", reference: "{{item.answer}}"}
            close: {type: text_similarity, name: close, evaluation_metric: fuzzy_match,
                    input: "{{sample.output_text}}", reference: "{{item.answer}}"}
          calculate_output: "0.8 * exact + 0.2 * close"
        ```

    Scores:
        ```yaml
        - prompt: Which city is the capital of Australia? Reply as JSON with an "answer" key.
          completion: '{"answer": "Canberra"}'
          reference: {answer: Canberra}
          value: 0.9800000000000001
        - prompt: Which city is the capital of Australia? Reply as JSON with an "answer" key.
          completion: '{"answer": "Sydney"}'
          reference: {answer: Canberra}
          value: 0.10285714285714286
        ```
    """

    name: str = "openai_grader"
    grader: dict[str, Any] | None = None
    grader_file: str | None = None
    client: dict[str, Any] = field(default_factory=dict)
    models: dict[str, str] = field(default_factory=dict)
    unsupported_sampling: Literal["error", "ignore"] = "error"
    sandbox: SandboxOption = None
    python_timeout: float = 120.0
    python_memory_mb: int = 2048
    max_chars: int = 10_000
    invalid_grade: Literal["zero", "fail"] = "zero"

    _UNSUPPORTED: ClassVar[tuple[str, ...]] = ("top_p", "reasoning_effort")
    client_flat: ClassVar[bool] = True  # the spec schema lists the client's options flat too

    @classmethod
    def __get_pydantic_core_schema__(
        cls, source: type[Any], handler: GetCoreSchemaHandler
    ) -> core_schema.CoreSchema:
        # As a judge's: the client's options written flat (``timeout: 30``, ``api_base``) are
        # gathered into `client` before the dataclass validates the rest (issue 46: the spec's
        # error listed `timeout` among the options it expected, and refused it).
        return core_schema.no_info_before_validator_function(_nest_flat_client, handler(source))

    def __post_init__(self) -> None:
        if (self.grader is None) == (self.grader_file is None):
            raise ValueError("give the grader object as 'grader' or a file as 'grader_file'")
        if self.grader_file is not None:
            self.grader = _read_grader_file(self.grader_file)
            self.grader_file = None  # the reward holds what it read
        if self.python_timeout <= 0 or self.python_memory_mb <= 0 or self.max_chars <= 0:
            raise ValueError("python_timeout, python_memory_mb and max_chars must be positive")
        _check_client(self.client)
        self._grader = parse_grader(self.grader)
        self._version = hashlib.sha256(
            json.dumps(self.grader, sort_keys=True, default=str).encode()
        ).hexdigest()[:16]
        self._uses_item = False
        self._clients: dict[str, JudgeClient] = {}
        self._formula = None
        parts: list[tuple[tuple[str, ...], Any]] = [((), self._grader)]
        if isinstance(self._grader, MultiGrader):
            self._formula = check_formula(self._grader.calculate_output, self._grader.graders)
            parts = [(("graders", name), g) for name, g in self._grader.graders.items()]
        self._python = False
        for path, grader in parts:
            self._check(path, grader)
        if self._python:
            self.sandbox = sandbox_options(self.sandbox)

    def _check(self, path: tuple[str, ...], grader: Any) -> None:
        """Check one (non-multi) grader beyond its shape; build its judge client."""

        def fail(message: str, *key: str | int) -> GraderSpecError:
            return GraderSpecError(message, (*path, *key))

        def template(text: str, *key: str | int) -> None:
            try:
                self._uses_item |= check_template(text)
            except TemplateError as exc:
                raise fail(str(exc), *key) from None

        if isinstance(grader, (StringCheck, TextSimilarity)):
            template(grader.input, "input")
            template(grader.reference, "reference")
            if isinstance(grader, TextSimilarity) and grader.evaluation_metric in UNAVAILABLE:
                metric_name = grader.evaluation_metric
                raise fail(f"{metric_name} cannot run here: {UNAVAILABLE[metric_name]}",
                           "evaluation_metric")  # fmt: skip
        elif isinstance(grader, (ScoreModel, LabelModel)):
            for i, message in enumerate(grader.input):
                for text in model_graders.texts(message.model_dump()["content"]):
                    template(text, "input", i, "content")
            options = dict(self.client)
            params = grader.sampling_params
            if params is not None:
                for key in self._UNSUPPORTED:
                    if getattr(params, key) is not None and self.unsupported_sampling == "error":
                        raise fail(
                            "referee's judge client cannot send it; set the reward's "
                            "unsupported_sampling: ignore to run without it",
                            "sampling_params",
                            key,
                        )
                if params.temperature is not None:
                    options["temperature"] = params.temperature
                if params.seed is not None:
                    options["seed"] = params.seed
                if params.max_completions_tokens is not None:
                    options["max_tokens"] = params.max_completions_tokens
            model = model_graders.litellm_model(grader.model, self.models)
            self._clients[".".join(path)] = _CLIENT.validate_python({**options, "model": model})
        elif isinstance(grader, Python):
            size = len(grader.source.encode("utf-8"))
            if size >= MAX_SOURCE_BYTES:
                raise fail(
                    f"the source is {size} bytes; OpenAI's limit is 256kB (\"Your uploaded code "
                    'must be less than `256kB`")',
                    "source",
                )
            try:
                compile(grader.source, "grader.py", "exec", dont_inherit=True)
            except (SyntaxError, ValueError) as exc:
                raise fail(f"the source does not compile: {exc}", "source") from None
            if not _defines_grade(grader.source):
                raise fail("the source defines no function grade(sample, item)", "source")
            if not _grade_takes_two(grader.source):
                raise fail(
                    "grade must take exactly two arguments, grade(sample, item) (OpenAI's guide: "
                    '"a grade function that takes in exactly two arguments")',
                    "source",
                )
            self._python = True

    def needs(self) -> frozenset[Need]:
        """The reference (the ``item``) where a template reads it."""
        return frozenset({"reference"}) if self._uses_item else frozenset()

    def default_deadline(self) -> float | None:
        """Each model grader's worst case (its client's, as a judge reward's) and each
        python grader's backstop, added up; else the default."""
        total = 0.0
        for client in self._clients.values():
            call = (client.retries + 1) * (client.timeout + _CALL_SLACK)
            total += 2 * (call + client.retries * client.max_backoff)
        if self._python:
            graders = (
                self._grader.graders.values()
                if isinstance(self._grader, MultiGrader)
                else [self._grader]
            )
            total += sum(
                self.backstop(self.python_timeout) for g in graders if isinstance(g, Python)
            )
        return total or super().default_deadline()

    async def evaluate(self, rollout: Rollout) -> Score:
        try:
            return await self._evaluate(Sample.of(rollout), rollout.reference)
        except SampleLacks as exc:
            # the policy did not produce what the grader reads: a 0 that says so, never a mask
            return Score(value=0.0, reason=f"the completion lacks what the grader reads: {exc}")

    async def _evaluate(self, sample: Sample, item: Any) -> Score:
        top = self._grader
        if not isinstance(top, MultiGrader):
            value, components, note = await self._grade("", top, sample, item)
            return Score(value=value, components=components, reason=note)
        names = list(top.graders)
        done = await asyncio.gather(
            *(self._grade(f"graders.{n}", top.graders[n], sample, item) for n in names),
            return_exceptions=True,
        )
        lacks = [(n, r) for n, r in zip(names, done, strict=True) if isinstance(r, SampleLacks)]
        if lacks:  # the whole score is 0: a formula could pay for one sub-grader's 0
            raise SampleLacks("; ".join(f"grader {n!r}: {r}" for n, r in lacks))
        results: list[tuple[float, dict[str, float | None], str]] = []
        for n, result in zip(names, done, strict=True):
            if isinstance(result, RewardError):  # the sub-grader named, its failure kept
                result.args = (f"grader {n!r}: {result}",)
                raise result
            if isinstance(result, BaseException):
                raise result
            results.append(result)
        scores = {n: r[0] for n, r in zip(names, results, strict=True)}
        assert self._formula is not None
        value = evaluate_formula(self._formula, scores, top.calculate_output)
        notes = "; ".join(f"{n}: {r[2]}" for n, r in zip(names, results, strict=True))
        return Score(value=value, components=dict(scores), reason=notes)

    async def _grade(
        self, key: str, grader: Grader, sample: Sample, item: Any
    ) -> tuple[float, dict[str, float | None], str]:
        """One grader's (value, components, reason) for a rollout."""
        components: dict[str, float | None] = {}
        threshold: float | None = None
        if isinstance(grader, StringCheck):
            text = render(grader.input, sample, item)
            reference = render(grader.reference, sample, item)
            op = grader.operation
            if op == "eq":
                passed = text == reference
            elif op == "ne":
                passed = text != reference
            elif op == "like":
                passed = reference in text
            else:
                passed = reference.lower() in text.lower()
            value, note = float(passed), f"string_check {op}: {passed}"
        elif isinstance(grader, TextSimilarity):
            text = render(grader.input, sample, item)
            reference = render(grader.reference, sample, item)
            value = await asyncio.to_thread(
                metric, grader.evaluation_metric, text, reference, self.max_chars
            )
            note, threshold = f"{grader.evaluation_metric} {value:.4f}", grader.pass_threshold
        elif isinstance(grader, Python):
            threshold = grader.pass_threshold
            try:
                value = await asyncio.to_thread(self._run_python, grader, sample, item)
            except (GraderRaised, InvalidGrade, VerifierTimeout) as exc:
                if self.invalid_grade == "fail":
                    raise
                # OpenAI's graders guide: "Any other result (exception, invalid float value,
                # etc.) will be marked as invalid and return a 0 grade."
                value, note = 0.0, f"an invalid grade, 0 as OpenAI gives it: {exc}"
            else:
                note = f"grade() returned {value:g}"
        elif isinstance(grader, ScoreModel):
            value, raw = await self._score_model(key, grader, sample, item)
            note, threshold = f"score_model {grader.model}: {value:g}", grader.pass_threshold
            if raw != value:
                low, high = grader.range
                note += f" (the model said {raw:g}: clipped to the range [{low:g}, {high:g}])"
        else:
            label = await self._label_model(key, grader, sample, item)
            value = float(label in grader.passing_labels)
            note = f"label_model {grader.model}: {label!r}"
            components["passed"] = value
        if threshold is not None:
            components["passed"] = float(value >= threshold)
        return value, components, note

    def _run_python(self, grader: Python, sample: Sample, item: Any) -> float:
        try:
            sandbox = get_sandbox(self.sandbox)
        except SandboxError as exc:
            raise PythonSandboxFailure(f"python grader {grader.name!r}: {exc}") from None
        return run_grader(
            sandbox,
            grader.name,
            grader.source,
            sample.as_dict(),
            {} if item is None else item,
            self.python_timeout,
            self.python_memory_mb,
        )

    async def _score_model(
        self, key: str, grader: ScoreModel, sample: Sample, item: Any
    ) -> tuple[float, float]:
        """The grader model's score clipped into ``range``, and the score as the model gave it."""
        messages = model_graders.messages(_inputs(grader), sample, item)
        client = self._clients[key]
        low, high = grader.range
        if not await _takes_schema(client):
            messages.append(model_graders.reply_format(f"<a number from {low:g} to {high:g}>"))
        verdict = await client.judge(
            messages, model_graders.ScoreVerdict, version=f"openai_grader@{self._version}"
        )
        raw = verdict.value.result
        if not math.isfinite(raw):
            raise JudgeError(
                f"score_model grader {grader.name!r}: the model's score {raw!r} is not a finite "
                "number"
            )
        # OpenAI's graders guide: "The output of the grader will be truncated to the given
        # `range`". The raw score stays in the reason.
        return min(max(raw, low), high), raw

    async def _label_model(self, key: str, grader: LabelModel, sample: Sample, item: Any) -> str:
        messages = model_graders.messages(_inputs(grader), sample, item)
        schema = model_graders.label_verdict(grader.labels)
        client = self._clients[key]
        if not await _takes_schema(client):
            labels = " or ".join(json.dumps(label) for label in grader.labels)
            messages.append(model_graders.reply_format(f"<one of {labels}>"))
        verdict = await client.judge(messages, schema, version=f"openai_grader@{self._version}")
        label = getattr(verdict.value, "result", None)
        if label not in grader.labels:  # pragma: no cover - the schema allows only the labels
            raise JudgeError(f"label_model grader {grader.name!r}: {label!r} is not a label")
        return str(label)


def _defines_grade(source: str) -> bool:
    """Whether `source` defines ``grade`` at its top level (a def, an assignment, an import)."""
    for node in ast.parse(source).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == "grade":
            return True
        if isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(isinstance(t, ast.Name) and t.id == "grade" for t in targets):
                return True
        if isinstance(node, (ast.Import, ast.ImportFrom)) and any(
            (a.asname or a.name) == "grade" for a in node.names
        ):
            return True
    return False


def _grade_takes_two(source: str) -> bool:
    """Whether a top-level ``def grade`` in `source` can be called as ``grade(sample, item)``
    (true where ``grade`` is not a plain ``def``: that is checked when it runs)."""
    ok = True  # the last top-level definition of grade is the one called
    for node in ast.parse(source).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == "grade":
            args = node.args
            positional = len(args.posonlyargs) + len(args.args)
            required = positional - len(args.defaults)
            kw_required = sum(d is None for d in args.kw_defaults)
            ok = required <= 2 and (positional >= 2 or args.vararg is not None) and kw_required == 0
    return ok


def _nest_flat_client(data: Any) -> Any:
    """`data` with the judge client's options given flat moved under ``client``."""
    if not isinstance(data, Mapping):
        return data
    own = {f.name for f in dataclasses.fields(OpenAIGrader)}
    flat = {k: v for k, v in data.items() if k in CLIENT_OPTIONS - {"model"} and k not in own}
    if not flat:
        return data
    if data.get("client"):
        raise ValueError(
            f"the judge client is given both under 'client' and flat ({', '.join(flat)}): "
            "give its options one way"
        )
    rest = {k: v for k, v in data.items() if k not in flat}
    return {**rest, "client": flat}


def _check_client(options: Mapping[str, Any]) -> None:
    """Refuse judge client options that are unknown or invalid, naming the key."""
    if "model" in options:
        raise ValueError(
            "client.model: each model grader's own 'model' names its model; map it to another "
            "with 'models' ({'gpt-4o-2024-08-06': 'openai/my-local-model'})"
        )
    try:
        _CLIENT.validate_python({**options, "model": "openai/check"})
    except ValidationError as exc:
        first = exc.errors()[0]
        key = ".".join(str(p) for p in ("client", *first["loc"]))
        raise ValueError(f"{key}: {first['msg']}") from None


async def _takes_schema(client: JudgeClient) -> bool:
    """Whether `client` asks its model for a JSON schema (else the prompt says the shape)."""
    if client.structured == "auto":
        return await asyncio.to_thread(supports_schema, client.model)
    return client.structured in ("json_schema", "json_object")


def _inputs(grader: ScoreModel | LabelModel) -> list[dict[str, Any]]:
    return [m.model_dump() for m in grader.input]
