"""A reward type's scoring example: rollouts and the value its example spec gives each.

A type's docstring holds, after its ``Example:`` spec, a ``Scores:`` section with a fenced YAML
block: the rollouts that spec scores, each with its ``value``. `referee types NAME` and the
type's docs page show it; a test scores every built-in type's example and checks each value,
and the conformance matrix (``tests/backends/test_matrix.py``) sends the same rollouts through
every trainer's entry point and checks that each gives the same number. A plugin's type gets
the same from the same convention (`prepared` runs one).

The block is a list of rollouts, or a mapping with the rollouts under ``rollouts`` and what
they need beside them::

    needs: [judge]              # what the example needs to run (below)
    files:                      # files written beside the spec (paths relative to it)
      rewards.py: |
        def has_answer(rollout, **options): ...
    judge:                      # the scripted judge's replies to requests showing several texts
      - {shown: [first text, second text], reply: '{"better": "A"}'}
    rollouts:
      - prompt: What is 2+2?    # optional, as are reference, group, metadata
        completion: <answer>4</answer>
        reference: "4"
        value: 1.0

A rollout takes `referee.Rollout`'s keys (``id``, ``prompt``, ``completion``, ``reference``,
``group``, ``metadata``) and ``value``, the number the example spec gives it. A group type's
example is a group: rollouts that share a ``group``, each with its own value.

``needs`` names what must be there, each one of:

- ``judge``: a scripted judge speaking the OpenAI protocol (`referee.judges.testing.
  FakeJudgeServer`). Every ``api_base`` in the spec is pointed at it and its cache turned
  off. It answers a request with the reply of the first rule whose ``shown`` texts all appear
  in it, in that order; a rollout's ``judge: reply`` is the rule ``shown: [its completion]``
  (``shown: text`` on the rollout names another text to look for). A reply is the message's
  text, or ``{tokens: [{text, top: {token: probability}}]}`` for a judge read from its
  logprobs. A request no rule answers gets HTTP 400 (a ``judge`` Failure).
- ``model``: a scripted served reward model (`referee.models.testing.FakeRewardServer`):
  every ``api_base`` is pointed at it and ``tokenizer`` set to a tiny model's. A rollout's
  ``model`` is what the model gives an input showing the rollout's completion (or ``shown``):
  a raw score, or for a process reward model each step's probability of being right (one
  row per step separator in the input, as a server pooling at the separator answers).
- ``sandbox``: referee's local sandbox, isolated (bubblewrap or unshare), for code rewards.
- ``docker``: a Docker Engine, where the images the example's Dockerfiles start ``FROM``
  are: ``referee-example-base:1`` is a Debian image with bash, python3, git and patch (the
  test suite imports one made of the host's own files). Every reward in the spec that takes
  a ``docker_host`` is given the engine's.
- any other name: a Python module that must be importable (an extra's package:
  ``reasoning_gym``, ``nltk``).

A file is text, or ``{sql: script}``: a SQLite database the script builds. A string in the spec
that is the relative path of one of the files, or of a folder holding them, is taken in the
folder they are written to.
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib.util
import json
import re
import sqlite3
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path, PurePosixPath
from typing import Any, Final

import yaml
from pydantic import ValidationError

from referee.rollout import Rollout

__all__ = [
    "RESOURCES",
    "ExampleRollout",
    "JudgeRule",
    "PreparedExample",
    "ScoringExample",
    "missing",
    "prepared",
]

RESOURCES: Final = ("judge", "model", "sandbox", "docker")
"""What ``needs`` may name besides a Python module."""
_ROLLOUT_KEYS: Final = frozenset({"id", "prompt", "completion", "reference", "group", "metadata"})
_OWN_KEYS: Final = frozenset({"value", "judge", "model", "shown"})
_TOP_KEYS: Final = frozenset({"needs", "files", "judge", "rollouts"})


@dataclasses.dataclass(frozen=True)
class JudgeRule:
    """What the scripted judge answers a request that shows each of `shown`, in order."""

    shown: tuple[str, ...]
    reply: str | Mapping[str, Any]


@dataclasses.dataclass(frozen=True)
class ExampleRollout:
    """One rollout of a scoring example and the value the example spec gives it.

    Attributes:
        rollout: The rollout.
        value: The value the type's example spec gives it.
        judge: With ``needs: [judge]``: the judge's reply when it is shown this rollout.
        model: With ``needs: [model]``: the scripted model's raw score (or step values).
        shown: The text the scripted judge or model finds this rollout by (default: its
            completion's text).
    """

    rollout: Rollout
    value: float
    judge: str | Mapping[str, Any] | None = None
    model: float | tuple[float, ...] | None = None
    shown: str | None = None

    @property
    def marker(self) -> str:
        """The text a scripted judge or model recognises this rollout by."""
        return self.shown if self.shown is not None else self.rollout.completion_text


@dataclasses.dataclass(frozen=True)
class ScoringExample:
    """A type's ``Scores:`` section, parsed (the module docstring has its format).

    Attributes:
        text: The YAML as written, for the reference page.
        rollouts: The rollouts, with their values.
        needs: What it needs to run (`RESOURCES`, or Python modules).
        files: Files written beside the spec: relative path -> text, or ``{"sql": script}``.
        judge: The scripted judge's rules beside the rollouts' own ``judge`` replies.
    """

    text: str
    rollouts: tuple[ExampleRollout, ...]
    needs: tuple[str, ...] = ()
    files: Mapping[str, str | Mapping[str, str]] = dataclasses.field(default_factory=dict)
    judge: tuple[JudgeRule, ...] = ()

    @classmethod
    def parse(cls, text: str, where: str) -> ScoringExample:
        """The example in `text` (the fenced block's YAML); `where` names it in errors.

        Raises:
            ValueError: The block is not a scoring example; the message says why.
        """
        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            raise ValueError(f"{where}: the Scores block is not YAML: {exc}") from None
        if isinstance(data, list):
            data = {"rollouts": data}
        if not isinstance(data, dict):
            raise ValueError(f"{where}: the Scores block must be a list of rollouts or a mapping")
        unknown = sorted(set(data) - _TOP_KEYS)
        if unknown:
            raise ValueError(f"{where}: unknown key {unknown[0]!r}; it takes {sorted(_TOP_KEYS)}")
        needs = data.get("needs") or []
        if not isinstance(needs, list) or not all(isinstance(n, str) for n in needs):
            raise ValueError(f"{where}: needs must be a list of names, got {needs!r}")
        files = data.get("files") or {}
        if not isinstance(files, dict) or not all(_is_file(v) for v in files.values()):
            raise ValueError(f"{where}: files must map paths to text or {{sql: script}}")
        for path in files:
            pure = PurePosixPath(path)
            if pure.is_absolute() or ".." in pure.parts:
                raise ValueError(f"{where}: a file's path must stay in the folder: {path!r}")
        judge = data.get("judge") or ()
        rules = tuple(_rule(r, f"{where}: judge[{i}]") for i, r in enumerate(judge))
        items = data.get("rollouts")
        if not isinstance(items, list) or not items:
            raise ValueError(f"{where}: the Scores block lists no rollouts")
        rollouts = tuple(_rollout(item, f"{where}: rollouts[{i}]") for i, item in enumerate(items))
        return cls(text, rollouts, tuple(needs), files, rules)

    def rules(self) -> list[JudgeRule]:
        """Every rule of the scripted judge: the example's own, then one per rollout's reply."""
        own = [JudgeRule((r.marker,), r.judge) for r in self.rollouts if r.judge is not None]
        return [*self.judge, *own]

    def markdown(self, heading: str) -> list[str]:
        """The section on a reference page (`TypeReference.markdown`)."""
        out = [f"{heading} Scores", ""]
        needs = ", ".join(f"`{n}`" for n in self.needs)
        out.append(
            "The example spec gives each of these rollouts the `value` written with it "
            "(`referee.spec.examples` describes the format"
            + (f"; this example needs {needs})." if self.needs else ").")
        )
        runs = [len(m) for m in re.findall(r"`{3,}", self.text)]
        fence = "`" * max([3, *(n + 1 for n in runs)])
        return [*out, "", f"{fence}yaml", self.text.rstrip(), fence, ""]


def _is_file(value: Any) -> bool:
    return isinstance(value, str) or (
        isinstance(value, dict) and set(value) == {"sql"} and isinstance(value["sql"], str)
    )


def _rule(item: Any, where: str) -> JudgeRule:
    if not isinstance(item, dict) or set(item) != {"shown", "reply"}:
        raise ValueError(f"{where}: a judge rule is {{shown: [texts], reply: ...}}, got {item!r}")
    shown = item["shown"]
    shown = [shown] if isinstance(shown, str) else shown
    if not isinstance(shown, list) or not shown or not all(isinstance(s, str) for s in shown):
        raise ValueError(f"{where}: shown must be a text or a list of texts")
    return JudgeRule(tuple(shown), _reply(item["reply"], where))


def _reply(reply: Any, where: str) -> str | Mapping[str, Any]:
    if isinstance(reply, str):
        return reply
    if isinstance(reply, dict) and set(reply) == {"tokens"} and isinstance(reply["tokens"], list):
        return reply
    raise ValueError(f"{where}: a reply is text or {{tokens: [...]}}, got {reply!r}")


def _rollout(item: Any, where: str) -> ExampleRollout:
    if not isinstance(item, dict):
        raise ValueError(f"{where}: a rollout is a mapping, got {item!r}")
    unknown = sorted(set(item) - _ROLLOUT_KEYS - _OWN_KEYS)
    if unknown:
        raise ValueError(f"{where}: unknown key {unknown[0]!r}")
    value = item.get("value")
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"{where}: value must be the number the example spec gives it")
    fields = {k: v for k, v in item.items() if k in _ROLLOUT_KEYS}
    fields.setdefault("completion", "")
    try:
        rollout = Rollout.model_validate(fields)
    except ValidationError as exc:
        raise ValueError(f"{where}: not a rollout: {exc.errors()[0]['msg']}") from None
    model = item.get("model")
    if isinstance(model, list):
        model = tuple(float(v) for v in model)
    elif model is not None:
        model = float(model)
    judge = item.get("judge")
    shown = item.get("shown")
    if shown is not None and not isinstance(shown, str):
        raise ValueError(f"{where}: shown must be a text")
    return ExampleRollout(
        rollout, float(value), None if judge is None else _reply(judge, where), model, shown
    )


# --- running an example -----------------------------------------------------------------------


def missing(needs: Sequence[str]) -> str | None:
    """Why an example's `needs` cannot be met here (None when they can): a module that is not
    installed, no Docker Engine, no sandbox. ``judge`` and ``model`` are always met."""
    for need in needs:
        if need in ("judge", "model"):
            continue
        if need == "sandbox":
            from referee.verifiers.sandbox.local import isolation_problem

            problem = isolation_problem()
            if problem is not None:
                return f"the local sandbox cannot run here: {problem}"
        elif need == "docker":
            if importlib.util.find_spec("docker") is None:
                return 'the docker package is not installed (pip install "referee[docker]")'
        elif importlib.util.find_spec(need) is None:
            return f"the module {need!r} is not installed"
    return None


@dataclasses.dataclass(frozen=True)
class PreparedExample:
    """An example ready to score: its spec with the resources it needs, and its rollouts.

    Attributes:
        spec: The example spec, its ``api_base``s pointed at the scripted servers and its
            paths into `folder`.
        path: The spec written to `folder` (``spec.yaml``), for what takes a path.
        folder: Where the example's files are.
        example: The example.
    """

    spec: Mapping[str, Any]
    path: Path
    folder: Path
    example: ScoringExample

    @property
    def rollouts(self) -> list[Rollout]:
        return [r.rollout for r in self.example.rollouts]

    @property
    def values(self) -> list[float]:
        return [r.value for r in self.example.rollouts]


@contextlib.contextmanager
def prepared(
    spec: Mapping[str, Any],
    example: ScoringExample,
    folder: str | Path,
    *,
    docker_host: str | None = None,
) -> Iterator[PreparedExample]:
    """The example's files written to `folder`, its scripted judge or model serving, and its
    spec pointed at them; the servers stop on leaving.

    `spec` is the type's example spec (`TypeReference.example`, loaded). What the example
    ``needs`` beside a judge and a model must be there already (`missing` says what is not);
    `docker_host` is the engine a ``docker`` example's rewards are given.
    """
    root = Path(folder).resolve()
    root.mkdir(parents=True, exist_ok=True)
    for name, content in example.files.items():
        _write(root / name, content)
    runnable = _in_folder(dict(spec), root, _paths(example.files))
    with contextlib.ExitStack() as stack:
        if "judge" in example.needs:
            url = stack.enter_context(_judge(example)).url
            runnable = _pointed(runnable, {"api_base": url, "cache": False})
        if "model" in example.needs:
            separator = str(spec.get("separator", "<extra_0>"))
            url, tokenizer = stack.enter_context(_model(example, separator))
            runnable = _pointed(runnable, {"api_base": url, "tokenizer": tokenizer})
        if docker_host is not None:
            runnable = _with_engine(runnable, docker_host)
        path = root / "spec.yaml"
        path.write_text(yaml.safe_dump(runnable, sort_keys=False, allow_unicode=True))
        yield PreparedExample(runnable, path, root, example)


def _write(path: Path, content: str | Mapping[str, str]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(content, str):
        path.write_text(content, encoding="utf-8")
        return
    path.unlink(missing_ok=True)
    with contextlib.closing(sqlite3.connect(path)) as db:
        db.executescript(content["sql"])
        db.commit()


def _paths(files: Mapping[str, Any]) -> set[str]:
    """The files' relative paths and the folders on them."""
    out: set[str] = set()
    for name in files:
        pure = PurePosixPath(name)
        out.add(str(pure))
        out.update(str(p) for p in pure.parents if str(p) != ".")
    return out


def _in_folder(value: Any, root: Path, paths: set[str]) -> Any:
    if isinstance(value, dict):
        return {k: _in_folder(v, root, paths) for k, v in value.items()}
    if isinstance(value, list):
        return [_in_folder(v, root, paths) for v in value]
    if isinstance(value, str) and value.rstrip("/") in paths:
        return str(root / value)
    return value


def _pointed(value: Any, settings: Mapping[str, Any]) -> Any:
    """`value` with every mapping that has an ``api_base`` updated by `settings`."""
    if isinstance(value, dict):
        out = {k: _pointed(v, settings) for k, v in value.items()}
        if "api_base" in out:
            out.update(settings)
        return out
    if isinstance(value, list):
        return [_pointed(v, settings) for v in value]
    return value


def _with_engine(value: Any, url: str) -> Any:
    """`value` with ``docker_host: url`` in every reward whose type takes one."""
    from referee.registry import lookup

    if isinstance(value, dict):
        out = {k: _with_engine(v, url) for k, v in value.items()}
        cls = lookup(out["type"]) if isinstance(out.get("type"), str) else None
        fields = dataclasses.fields(cls) if dataclasses.is_dataclass(cls) else ()
        if any(f.name == "docker_host" for f in fields):
            out["docker_host"] = url
        return out
    if isinstance(value, list):
        return [_with_engine(v, url) for v in value]
    return value


def _found(request: str, shown: Sequence[str]) -> bool:
    at = 0
    for text in shown:
        at = request.find(text, at)
        if at < 0:
            return False
        at += len(text)
    return True


@contextlib.contextmanager
def _judge(example: ScoringExample) -> Iterator[Any]:
    from referee.judges.testing import FakeJudgeServer, Fault, Reply, Token

    # The longest texts first: a rule for "12" does not answer a request showing "123".
    rules = sorted(example.rules(), key=lambda r: -sum(map(len, r.shown)))

    def script(body: dict[str, Any]) -> Reply | Fault:
        shown = "\n".join(str(m.get("content") or "") for m in body.get("messages", ()))
        for rule in rules:
            if _found(shown, rule.shown):
                if isinstance(rule.reply, str):
                    return Reply(rule.reply)
                tokens = [Token(t["text"], t.get("top") or {}) for t in rule.reply["tokens"]]
                return Reply.of_tokens(*tokens)
        return Fault(400)

    with FakeJudgeServer(script) as server:
        yield server


@contextlib.contextmanager
def _model(example: ScoringExample, separator: str) -> Iterator[tuple[str, str]]:
    from referee.models.testing import FakeRewardServer

    scripted = sorted(
        (r for r in example.rollouts if r.model is not None), key=lambda r: -len(r.marker)
    )

    def score(text: str) -> float | list[list[float]]:
        for r in scripted:
            if r.marker in text:
                if isinstance(r.model, tuple):
                    # A row per separator in the input, as a server pooling at the step
                    # separator gives (the first ones of the scripted steps).
                    count = text.count(separator)
                    if count > len(r.model):
                        raise ValueError(f"{count} steps in {json.dumps(text)[:200]}")
                    return [[1.0 - p, p] for p in r.model[:count]]
                return float(r.model or 0.0)
        raise ValueError(f"no scripted score for {json.dumps(text)[:200]}")

    with FakeRewardServer(score) as server:
        yield server.url + "/v1", _tokenizer()


_TOKENIZER: list[str] = []


def _tokenizer() -> str:
    """A tiny model's folder, for its tokenizer (a served model's rendering): made once per
    process, removed at its exit."""
    if not _TOKENIZER:
        import atexit
        import shutil
        import tempfile

        from referee.models.testing import tiny_model

        folder = tempfile.mkdtemp(prefix="referee-example-model-")
        atexit.register(shutil.rmtree, folder, True)
        _TOKENIZER.append(str(tiny_model(Path(folder) / "model")))
    return _TOKENIZER[0]
