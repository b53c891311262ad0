"""What the code rewards share: the sandbox they name, and grading on threads of their own.

Grading blocks (on the sandbox), so it runs on a thread pool that each reward sizes from its
own ``concurrency``, not on asyncio's default pool (``min(32, CPUs + 4)`` threads), which
would cap the jobs in flight below what the reward was asked for.
"""

from __future__ import annotations

import asyncio
import contextvars
import os
import threading
from abc import abstractmethod
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import InitVar, dataclass
from typing import Annotated, Any, Literal

from pydantic import PlainValidator

from referee.errors import RewardError
from referee.reward import DEFAULT_CONCURRENCY, AsyncReward
from referee.rewards._extract import fenced_blocks
from referee.rollout import Rollout
from referee.scores import Score
from referee.verifiers.sandbox import (
    BackendOptions,
    Isolation,
    Limits,
    Sandbox,
    SandboxError,
    get_sandbox,
    sandbox_options,
)

__all__ = [
    "SandboxFailure",
    "SandboxOption",
    "SandboxedReward",
    "Scoring",
    "ThreadedReward",
    "extract_code",
    "limits",
]

Scoring = Literal["fraction", "all"]
"""``fraction``: the share of test cases passed. ``all``: 1.0 only when every case passes."""

SandboxOption = Annotated[
    BackendOptions | str | Mapping[str, Any] | None, PlainValidator(sandbox_options)
]
"""A reward's ``sandbox`` option: a backend's name or its options (`sandbox_options`)."""

_LANGS = {
    "python": {"python", "py", "python3", ""},
    "javascript": {"javascript", "js", "node", ""},
    "bash": {"bash", "sh", "shell", ""},
    "c": {"c", "h", ""},
    "cpp": {"cpp", "c++", "cc", "cxx", "hpp", ""},
    "go": {"go", "golang", ""},
    "rust": {"rust", "rs", ""},
    "java": {"java", ""},
    "typescript": {"typescript", "ts", ""},
}
_POOL_LOCK = threading.Lock()


class SandboxFailure(RewardError):
    """The sandbox could not run the code: ``Failure("sandbox")``, never a score."""

    failure_type = "sandbox"


def extract_code(text: str, language: str = "python") -> str:
    """The code in a completion: the last fenced block in `language` (or untagged), else all."""
    blocks = [body for _, lang, body in fenced_blocks(text) if lang.lower() in _LANGS[language]]
    return blocks[-1] if blocks else text


def limits(timeout: float, memory_mb: int) -> Limits:
    """A job's limits from a reward's ``timeout`` and ``memory_mb``."""
    return Limits(wall_seconds=timeout, cpu_seconds=timeout, memory_bytes=memory_mb << 20)


class ThreadedReward(AsyncReward):
    """An async reward whose blocking `grade` runs on threads of its own, at most
    ``concurrency`` at once (the subclass's option): the code rewards, and `harbor_task`."""

    concurrency: int  # declared by each subclass's dataclass, with its default

    @abstractmethod
    def grade(self, rollout: Rollout) -> Score:
        """Score one rollout, blocking (what `evaluate` runs on the reward's threads)."""

    async def evaluate(self, rollout: Rollout) -> Score:
        loop = asyncio.get_running_loop()
        run = contextvars.copy_context().run
        return await loop.run_in_executor(
            self._executor(self.concurrency), run, self.grade, rollout
        )

    async def score_batch(
        self, rollouts: Sequence[Rollout], *, concurrency: int | None = None
    ) -> list[Score]:
        if concurrency is not None and concurrency > 1:
            self._executor(concurrency)  # a caller asking for more at once gets the threads
        return await super().score_batch(rollouts, concurrency=concurrency)

    def _executor(self, size: int) -> ThreadPoolExecutor:
        """This process's thread pool of at least `size` threads (started as jobs need them).

        A pool's threads end when it is dropped (replaced by a larger one, or with the
        reward); a forked child starts its own (the parent's threads are not there).
        """
        pool: tuple[int, int, ThreadPoolExecutor] | None = getattr(self, "_pool", None)
        pid = os.getpid()
        if pool is not None and pool[0] == pid and pool[1] >= size:
            return pool[2]
        with _POOL_LOCK:
            pool = getattr(self, "_pool", None)  # (pid, size, executor), made on first use
            if pool is not None and pool[0] == pid and pool[1] >= size:
                found: ThreadPoolExecutor = pool[2]
                return found
            # A pool replaced here is not shut down: another thread may be about to submit to
            # it. Its threads end once its jobs are done and its last reference is dropped.
            executor = ThreadPoolExecutor(size, thread_name_prefix=f"referee-{self.name}")
            self._pool = (pid, size, executor)
        return executor


@dataclass(kw_only=True)
class SandboxedReward(ThreadedReward):
    """Base of the code rewards: the sandbox option, and `grade` run on the reward's threads.

    Attributes:
        sandbox: Which sandbox runs the code and its options: a backend's name (``docker``)
            or a mapping (``{backend: docker, runtime: runsc}``); default: ``local`` with its
            defaults. Each backend checks its own options (`referee.verifiers.sandbox`).
        concurrency: Rollouts graded at once (threads; the sandbox's ``workers`` bound the
            jobs that run at once).
        backend: Shorthand for ``sandbox: {backend: ...}`` (``backend: docker`` is
            ``sandbox: docker``): ``local`` (namespaces on this machine) or ``docker``
            (containers on a Docker Engine; ``pip install "referee[docker]"``).
        isolation: Shorthand for the ``local`` backend's ``isolation``: ``auto`` (namespaces
            through bubblewrap, else ``unshare``; where neither works, no code runs),
            ``bwrap`` or ``unshare`` (that path only), or ``none`` (resource limits only: the
            code can reach the network and read what its uid can). An error with ``docker``.
        runtime: Shorthand for the ``docker`` backend's ``runtime``: a container runtime,
            e.g. ``runsc`` for gVisor (it must be installed). An error with ``local``.
        workers: Shorthand for the sandbox's ``workers``: jobs run at once (local workers or
            warm containers; default: the CPU count).
    """

    sandbox: SandboxOption = None
    concurrency: int = DEFAULT_CONCURRENCY
    backend: InitVar[str | None] = None
    isolation: InitVar[Isolation | None] = None
    runtime: InitVar[str | None] = None
    workers: InitVar[int | None] = None

    def __post_init__(
        self,
        backend: str | None,
        isolation: Isolation | None,
        runtime: str | None,
        workers: int | None,
    ) -> None:
        self.sandbox = sandbox_options(
            self.sandbox, backend=backend, isolation=isolation, runtime=runtime, workers=workers
        )
        if self.concurrency < 1:
            raise ValueError(f"concurrency must be at least 1, got {self.concurrency!r}")
        self.check_options()

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)  # the shorthand was folded into `sandbox` when it was made
        self.__post_init__(None, None, None, None)

    def check_options(self) -> None:
        """Reject invalid options with a ValueError (a subclass's checks)."""

    def default_deadline(self) -> float | None:
        """A backstop behind the reward's own ``timeout`` option, which its sandbox enforces
        (every code reward has one)."""
        own: float = vars(self)["timeout"]
        return self.backstop(own)

    def open_sandbox(self) -> Sandbox:
        """The process's sandbox for these options; a `sandbox` Failure if it cannot start."""
        try:
            return get_sandbox(self.sandbox)
        except SandboxError as exc:
            raise SandboxFailure(str(exc)) from None
