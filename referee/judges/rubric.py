"""Rubrics: what a judge grades, as files (YAML) with a name, a version and criteria.

Each criterion has an id, a description, a weight, and either a ``scale`` (an integer range)
or ``check: true`` (pass/fail). A rubric's total is the weighted mean of its criteria,
each normalised to [0, 1]. Rubrics ship in ``rubrics/`` (installed with the package); a
user's own rubric file works the same way: `load_rubric` takes a name or a path.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from referee._yaml import safe_load
from referee.errors import SpecError

__all__ = ["Criterion", "Rubric", "Scale", "available_rubrics", "load_rubric"]


class Scale(BaseModel):
    """An integer range a criterion is scored on."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    min: int = 1
    max: int = 5

    @model_validator(mode="after")
    def _ordered(self) -> Scale:
        if self.min >= self.max:
            raise ValueError(f"scale min {self.min} must be below max {self.max}")
        return self


class Criterion(BaseModel):
    """One thing a judge grades."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str = Field(pattern=r"^[a-z][a-z0-9_]*$")
    description: str = Field(min_length=1)
    weight: float = Field(default=1.0, ge=0)
    scale: Scale | None = None
    check: bool = False

    @model_validator(mode="after")
    def _one_kind(self) -> Criterion:
        if (self.scale is None) == (not self.check):
            raise ValueError(f"criterion {self.id!r} needs exactly one of scale or check: true")
        return self

    def normalise(self, value: int | bool) -> float:
        """The criterion's score in [0, 1]."""
        if self.scale is None:
            return 1.0 if value else 0.0
        clipped = min(max(int(value), self.scale.min), self.scale.max)
        return (clipped - self.scale.min) / (self.scale.max - self.scale.min)


class Rubric(BaseModel):
    """A named, versioned set of criteria."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str = Field(min_length=1)
    version: str = Field(min_length=1)
    description: str = ""
    requires_reference: bool = False
    criteria: list[Criterion] = Field(min_length=1)

    @model_validator(mode="after")
    def _unique_ids(self) -> Rubric:
        ids = [c.id for c in self.criteria]
        repeated = sorted({i for i in ids if ids.count(i) > 1})
        if repeated:
            raise ValueError(f"criterion ids must be unique, repeated: {repeated}")
        if sum(c.weight for c in self.criteria) <= 0:
            raise ValueError("the criteria's weights sum to 0")
        return self

    def total(self, scores: dict[str, int | bool]) -> float:
        """The weighted mean of the normalised criterion scores."""
        weight = sum(c.weight for c in self.criteria)
        return sum(c.weight * c.normalise(scores[c.id]) for c in self.criteria) / weight


def _rubric_dirs() -> list[Path]:
    here = Path(__file__).resolve().parent.parent
    # Installed: force-included as referee/rubrics. A source checkout: rubrics/ at the root.
    return [d for d in (here / "rubrics", here.parent / "rubrics") if d.is_dir()]


def available_rubrics() -> dict[str, Path]:
    """The shipped rubrics, by name."""
    found: dict[str, Path] = {}
    for folder in _rubric_dirs():
        for path in sorted(folder.glob("*.yaml")):
            found.setdefault(path.stem, path)
    return found


def load_rubric(name_or_path: str | os.PathLike[str]) -> Rubric:
    """A shipped rubric by name, or a rubric file by path.

    Raises:
        SpecError: No such rubric, or the file is not a valid rubric (with the key path).
    """
    text = str(name_or_path)
    path = Path(text)
    if not path.is_file():
        shipped = available_rubrics()
        if text not in shipped:
            raise SpecError(
                "no such rubric (neither a file nor a shipped rubric)",
                source=text,
                expected=f"a rubric file, or one of {', '.join(shipped)}",
            )
        path = shipped[text]
    try:
        data: Any = safe_load(path.read_text(encoding="utf-8"), str(path))
    except (OSError, yaml.YAMLError) as exc:
        raise SpecError(f"cannot read the rubric: {exc}", source=str(path)) from None
    try:
        return Rubric.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        message = first["msg"].removeprefix("Value error, ")
        raise SpecError(
            f"invalid rubric: {message}",
            source=str(path),
            path=list(first["loc"]),
            found=first.get("input") if first["type"] != "missing" else None,
        ) from None
