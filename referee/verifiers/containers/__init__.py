"""Running a script in a task's own image, on a real Docker Engine: images built once, and a
warm pool of fresh, locked-down containers.

The modules: `engine` (the engine and its images), `container` (one leased container),
`pool` (the warm pools), `staging` (a job's files), `markers` (a job's account of itself).

What an environment reward (`referee.rewards.harbor`) and any grader that needs a task's own
image (a SWE-bench instance image) share. Generic on purpose: an image, files in, a command in
a working directory under a deadline, files out.

- **Images**, built once and cached by content (`ContainerEngine.image`): a build context (a
  folder with a ``Dockerfile``) is tagged ``referee-env/<name>:<sha256 of its files>``, so an
  unchanged context is never rebuilt (in this process or the next, while the engine keeps
  the tag); the legacy builder (``DOCKER_BUILDKIT=0``, through the ``docker`` SDK). Or an
  image the engine already has, by tag. A build that fails, or an image the engine lacks, is
  a `SandboxError` naming the task and the build log's tail.
- **A warm pool** (`ContainerPool`): per image, containers created and started ahead of need
  (idle ``sleep infinity``); each lease gets a *fresh* one, removed after the job, while the
  pool starts its replacement in the background. A concurrency limit per image and in total.
  One per process for each set of options (`shared_pool`; `job_pool` from a reward's options).
- **Per job** (`Container`): files copied in (``put_archive``), commands run (``exec``) under
  a deadline (on timeout the whole container is killed, not only the exec), files read out
  (``get_archive``), output capped. Small text files are better staged by the job's own
  command (`stage`: written from its environment by a shell prelude, a call saved), and a
  job's script reports what happened in marker lines (`SAY`, read back by `Marks`) that the
  code it runs cannot forge.
- **Hardening**, since what runs there is the policy's code: no network (``--network
  none``), every capability dropped but `CAPS` (what a test script run as root needs to own,
  chmod and kill its own files and processes, and to drop to another user), no new
  privileges, memory (and swap) and pids limits, no host mounts, optionally a runtime such as
  gVisor (``runsc``). The container's root filesystem stays writable (a task's tests install
  and build in it); it is thrown away after one job.

An engine that does not answer is a `SandboxError` naming its address.
"""

from __future__ import annotations

from referee.verifiers.containers.container import Container, ExecResult, FileContent
from referee.verifiers.containers.engine import ContainerEngine, context_digest, engine_url
from referee.verifiers.containers.markers import SAY, Mark, Marks
from referee.verifiers.containers.pool import (
    CAPS,
    IDLE_COMMAND,
    ContainerLimits,
    ContainerPool,
    close_shared,
    job_pool,
    shared_pool,
)
from referee.verifiers.containers.staging import Staging, stage

__all__ = [
    "CAPS",
    "IDLE_COMMAND",
    "SAY",
    "Container",
    "ContainerEngine",
    "ContainerLimits",
    "ContainerPool",
    "ExecResult",
    "FileContent",
    "Mark",
    "Marks",
    "Staging",
    "close_shared",
    "context_digest",
    "engine_url",
    "job_pool",
    "shared_pool",
    "stage",
]
