"""``process_reward_model``: a learned process reward model (PRM) scores each step.

The completion's steps are each followed by a separator token, and the model's token-level
head is read at each separator: the step's value is the softmax probability of class
``label`` (1: the step is right) there, as Qwen2.5-Math-PRM is read (its separator is
``<extra_0>``; its head ships as remote code: ``trust_remote_code: true``). Any
``AutoModelForTokenClassification`` checkpoint is read the same way (a one-label head: the
sigmoid of its logit). Steps come from the completion (`referee.models.inputs.step_text`):
a text completion's parts between ``step_split`` (a blank line by default), or a
trajectory's assistant turns, one step each.

The per-step values are `Score.steps`, so verl's per-turn placement (one value at each turn's
last token) and ``referee report``'s per-step view take them as they take ``tool_use``'s;
``fold`` makes the total. The default, ``min``, scores a solution by its worst step: a
``sum`` pays for more steps and a ``mean`` for padding with easy ones, both length hacks. A
completion with no steps scores 0.0 with no steps.

Served (``api_base``), the server must return one row per step: vLLM's ``/pooling`` with
``task: token_classify`` on a model pooled at the separator (STEP pooling; see
`referee.rewards.learned._served`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from referee.errors import NotApplicable
from referee.models.forward import Reader, step_reader
from referee.models.inputs import step_text
from referee.models.loading import Loaded, ModelLoadError
from referee.registry import register
from referee.reward import coerce_result, failure_from_exception
from referee.rewards.learned._base import LearnedReward, Output
from referee.rewards.learned._served import Served, StepProtocol
from referee.rollout import Rollout
from referee.scores import Score
from referee.steps import Fold, fold_steps

__all__ = ["ProcessRewardModel"]


@register("process_reward_model")
@dataclass(kw_only=True)
class ProcessRewardModel(LearnedReward):
    """A process reward model values each step of the completion; the steps fold into a total.

    The completion's steps are each followed by `separator`, and the model's token-level
    head is read there: a step's value is the softmax probability of class `label` (1: the
    step is right), as Qwen2.5-Math-PRM is read (its separator is ``<extra_0>``; its head
    ships as remote code: ``trust_remote_code: true``). Any
    ``AutoModelForTokenClassification`` checkpoint is read the same way (a one-label head:
    the sigmoid of its logit). The steps are a text completion's parts between
    `step_split`, or a trajectory's assistant turns, one step each.

    The per-step values are `Score.steps` (verl's per-turn placement and ``referee report``'s
    per-step view take them), and `fold` makes the total (in [0, 1] for ``min``, ``mean``,
    ``last`` and ``product``). A completion with no steps scores 0.0. A model that reads
    another number of separators than there are steps is ``not_applicable``; a model that
    cannot be loaded fails the batch (``error``). Served (`api_base`), the server must
    return one row per step: vLLM's ``/pooling`` with ``task: token_classify`` on a model
    pooled at the separator (STEP pooling; vLLM's default for ``Qwen2ForProcessRewardModel``).

    Attributes:
        separator: The token after each step, where the head is read (one token of the
            model's tokenizer). Removed from the prompt's and the completion's own text.
        step_split: What separates the steps of a text completion (a blank line by
            default).
        label: The class whose probability is a step's value.
        fold: How the steps make the total: ``min`` (the default: a solution is as good as
            its worst step), ``mean``, ``sum``, ``last``, ``product`` (the chance that every
            step is right) or ``discounted`` (``sum(gamma**t * r_t)``). A ``sum`` pays for
            more steps and a ``mean`` for padding with easy ones: both are length hacks.
        gamma: The discount per step of ``fold: discounted``.
        protocol: Served: ``vllm_pooling`` (``POST /pooling``, ``task: token_classify``).
        overflow: In-process: a longer input than `max_length` is ``fail``
            (``Failure("not_applicable")``) or ``truncate_left``, which may cut only the
            prompt: a cut that reaches a step is a Failure.

    Example:
        ```yaml
        type: process_reward_model
        model: Qwen/Qwen2.5-Math-PRM-7B
        api_base: http://127.0.0.1:8000/v1
        separator: <extra_0>
        fold: min
        ```

    Scores:
        ```yaml
        needs: [model]
        rollouts:
          - prompt: What is 3 + 4 * 2?
            completion: "Multiplication first: 4 * 2 = 8.\\n\\nThen 3 + 8 = 11."
            shown: 'Multiplication first'  # the steps reach the model joined by the separator
            model: [0.95, 0.9]
            value: 0.9
          - prompt: What is 3 + 4 * 2?
            completion: "Left to right: 3 + 4 = 7.\\n\\nThen 7 * 2 = 14."
            shown: 'Left to right'
            model: [0.2, 0.85]
            value: 0.2
        ```
    """

    separator: str = "<extra_0>"
    step_split: str = "\n\n"
    label: int = 1
    fold: Fold = "min"
    gamma: float = 1.0
    protocol: StepProtocol = "vllm_pooling"
    name: str = "process_reward_model"

    head = "token"

    def __post_init__(self) -> None:
        if not self.separator:
            raise ValueError("separator must not be empty")
        if not self.step_split:
            raise ValueError("step_split must not be empty")
        if self.label < 0:
            raise ValueError(f"label must be 0 or more, got {self.label}")
        super().__post_init__()

    def _render(self, rollout: Rollout, tokenizer: Any) -> tuple[str | None, Any]:
        steps = step_text(rollout, tokenizer, self.separator, self.step_split, self.template)
        return (steps.text if steps.number else None), steps

    def _keep(self, extra: Any) -> int | None:
        return int(extra.start)

    def _reader(self, loaded: Loaded) -> Reader[Any]:
        tokenizer = loaded.tokenizer
        ids = tokenizer(self.separator, add_special_tokens=False)["input_ids"]
        if len(ids) != 1:
            raise ModelLoadError(
                f"the separator {self.separator!r} is {len(ids)} tokens of {loaded.spec.path!r}'s "
                "tokenizer; give one token of it (separator: ...)"
            )
        if loaded.labels != 1 and self.label >= loaded.labels:
            raise ModelLoadError(
                f"label {self.label} is past the {loaded.labels} classes of {loaded.spec.path!r}"
            )
        return step_reader(ids[0], self.label)

    async def _ask(self, served: Served, texts: list[str], rollouts: list[Rollout],
                   extras: list[Any], out: list[Any], at: list[int]) -> None:  # fmt: skip
        await served.steps(texts, self.label, out, at)

    def _one(self, output: Output | Exception) -> Score:
        if isinstance(output, Exception):
            return failure_from_exception(output, self.name)
        expected = int(output.extra.number)
        values = [] if output.value is None else [float(v) for v in output.value]
        if len(values) != expected:
            cut = " (its input was cut on the left, into the steps)" if output.cut else ""
            return failure_from_exception(
                NotApplicable(
                    f"{expected} steps, but the model read {len(values)} separators{cut}"
                ),
                self.name,
            )
        if not values:
            return Score(value=0.0, steps=(), components={"steps": 0.0}, reason="no steps")
        value = fold_steps(values, self.fold, self.gamma)
        worst = min(range(len(values)), key=values.__getitem__)
        reason = (
            f"{len(values)} steps, {self.fold} {value:.3f}; "
            f"worst: step {worst + 1} ({values[worst]:.3f})"
        )
        if output.cut:
            reason += f"; its prompt was cut by {output.cut} tokens on the left"
        score = Score(value=value, steps=tuple(values), components={"steps": float(len(values))},
                      reason=reason)  # fmt: skip
        return coerce_result(score, self.name)
