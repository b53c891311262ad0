"""OpenAI grader objects, checked when the spec loads: OpenAI's JSON shape, field for field.

The shapes are the openai-python SDK's (``openai.types.graders``): ``string_check``,
``text_similarity``, ``score_model``, ``label_model``, ``python`` and ``multi``, plus the
``pass_threshold`` OpenAI's Evals add to ``text_similarity``, ``python`` and ``score_model``. An
unknown ``type``, an unknown key or a missing one is an error naming its path in the grader
(``grader.graders.accuracy.operation``). ``name`` may be left out (it names nothing referee uses).

Where the sources differ: the graders guide's prose names the not-equal operation ``neq``, but
its JSON shape and the SDK's type take ``"ne"``, and so does referee. A ``multi`` grader's
``graders`` is a mapping of graders by name in the guide's examples (the SDK types it as one
grader; both are read). The guide says "You cannot nest one `multigrader` inside another": a
``multi`` among a ``multi``'s graders is refused. ``label_model`` is not in the graders guide;
its shape is the SDK's (``labels``, ``passing_labels``, "Must be a subset of labels"), and
referee also takes an optional ``sampling_params`` there, as for ``score_model``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError, field_validator

from referee.errors import RefereeError
from referee.rewards.judged.openai_graders.similarity import METRICS

__all__ = ["GRADER_TYPES", "Grader", "GraderSpecError", "MultiGrader", "parse_grader"]

GRADER_TYPES = ("string_check", "text_similarity", "score_model", "label_model", "python", "multi")


class GraderSpecError(RefereeError, ValueError):
    """A grader object that is not in OpenAI's shape; `path` is where, in the grader."""

    def __init__(self, message: str, path: tuple[str | int, ...] = ()) -> None:
        self.path = path
        where = ".".join(str(p) for p in ("grader", *path))
        super().__init__(f"{where}: {message}")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class TextPart(_Strict):
    """A text part of a model grader's message (``input_text`` or ``output_text``)."""

    type: Literal["input_text", "output_text"]
    text: str


Content = str | TextPart | list[str | TextPart]


class InputMessage(_Strict):
    """One message of a model grader's ``input``."""

    role: Literal["user", "assistant", "system", "developer"]
    content: Content
    type: Literal["message"] | None = None

    @field_validator("content", mode="before")
    @classmethod
    def _no_media(cls, value: Any) -> Any:
        parts = value if isinstance(value, list) else [value]
        for part in parts:
            if isinstance(part, Mapping) and part.get("type") in ("input_image", "input_audio"):
                raise ValueError(
                    f"{part['type']} content is not supported by referee's openai_grader (text "
                    "judges only): grade images and audio another way"
                )
        return value


class SamplingParams(_Strict):
    """A model grader's ``sampling_params``."""

    max_completions_tokens: int | None = None
    reasoning_effort: str | None = None
    seed: int | None = None
    temperature: float | None = None
    top_p: float | None = None


class StringCheck(_Strict):
    type: Literal["string_check"]
    name: str = ""
    input: str
    reference: str
    operation: Literal["eq", "ne", "like", "ilike"]


class TextSimilarity(_Strict):
    type: Literal["text_similarity"]
    name: str = ""
    input: str
    reference: str
    evaluation_metric: Literal[METRICS]  # type: ignore[valid-type]
    pass_threshold: float | None = None


class ScoreModel(_Strict):
    type: Literal["score_model"]
    name: str = ""
    model: str
    input: list[InputMessage]
    range: tuple[float, float] = (0.0, 1.0)
    sampling_params: SamplingParams | None = None
    pass_threshold: float | None = None

    @field_validator("range")
    @classmethod
    def _ordered(cls, value: tuple[float, float]) -> tuple[float, float]:
        if not value[0] < value[1]:
            raise ValueError(f"range must be [low, high] with low < high, got {list(value)}")
        return value


class LabelModel(_Strict):
    type: Literal["label_model"]
    name: str = ""
    model: str
    input: list[InputMessage]
    labels: list[str] = Field(min_length=1)
    passing_labels: list[str]
    sampling_params: SamplingParams | None = None

    def model_post_init(self, context: Any) -> None:
        extra = [label for label in self.passing_labels if label not in self.labels]
        if extra:
            raise ValueError(f"passing_labels {extra} are not among labels {self.labels}")


class Python(_Strict):
    type: Literal["python"]
    name: str = ""
    source: str
    image_tag: str | None = None
    pass_threshold: float | None = None


Grader = Annotated[
    StringCheck | TextSimilarity | ScoreModel | LabelModel | Python, Field(discriminator="type")
]
"""A grader that is not a ``multi``."""


class MultiGrader(_Strict):
    type: Literal["multi"]
    name: str = ""
    graders: dict[str, Grader]
    calculate_output: str

    @field_validator("graders", mode="before")
    @classmethod
    def _one_or_many(cls, value: Any) -> Any:
        # The SDK types `graders` as one grader; OpenAI's guide writes a mapping of them by name.
        if isinstance(value, Mapping) and isinstance(value.get("type"), str):
            return {str(value.get("name") or value["type"]): value}
        if isinstance(value, Mapping) and not value:
            raise ValueError("a multi grader needs at least one grader")
        return value


_ANY: TypeAdapter[Any] = TypeAdapter(
    Annotated[
        StringCheck | TextSimilarity | ScoreModel | LabelModel | Python | MultiGrader,
        Field(discriminator="type"),
    ]
)


def parse_grader(
    data: Any,
) -> StringCheck | TextSimilarity | ScoreModel | LabelModel | Python | MultiGrader:
    """The grader object `data`, checked.

    Raises:
        GraderSpecError: It is not a grader in OpenAI's shape (the error names where).
    """
    if not isinstance(data, Mapping):
        raise GraderSpecError(f"a grader is a mapping, got {type(data).__name__}")
    kind = data.get("type")
    if kind not in GRADER_TYPES:
        raise GraderSpecError(
            f"unknown grader type {kind!r}; OpenAI's are {', '.join(GRADER_TYPES)}", ("type",)
        )
    try:
        parsed: Any = _ANY.validate_python(dict(data))
    except ValidationError as exc:
        first = exc.errors()[0]
        # a discriminated union puts the grader's type in the location: drop it
        loc = tuple(p for p in first["loc"] if p not in GRADER_TYPES)
        kinds = {
            "missing": "missing (OpenAI's grader needs it)",
            "extra_forbidden": "is not a field of this grader type",
        }
        message = kinds.get(first["type"], first["msg"].removeprefix("Value error, "))
        raise GraderSpecError(message, loc) from None
    return parsed  # type: ignore[no-any-return]
