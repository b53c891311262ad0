"""The Docker Engine, and the images on it: built once from a task's context, cached by
content (see `referee.verifiers.containers`)."""

from __future__ import annotations

import collections
import contextlib
import hashlib
import os
import re
import threading
import time
from pathlib import Path
from typing import Any

from referee.errors import MissingDependency, SandboxError

__all__ = ["ContainerEngine", "context_digest", "engine_url"]

_DEFAULT_URL = "unix:///var/run/docker.sock"
LABEL = "referee.containers"
"""The label on every image and container referee makes (a pool's id on a container)."""

_LOG_TAIL = 1500


def engine_url(base_url: str | None = None) -> str:
    """The engine's address: `base_url`, else ``DOCKER_HOST``, else the default socket."""
    return base_url or os.environ.get("DOCKER_HOST") or _DEFAULT_URL


def docker_sdk() -> Any:
    """The ``docker`` package (MissingDependency where it is not installed)."""
    try:
        import docker
    except ImportError:
        raise MissingDependency("docker", "docker", "Running tasks in containers") from None
    return docker


def context_digest(context: str | Path) -> str:
    """The sha256 of a build context: every file's path, type, executable bit and content
    (a link's target), in sorted order. Any change to what the build can see changes it."""
    root = Path(context)
    digest = hashlib.sha256()
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root).as_posix()
        if path.is_symlink():
            digest.update(f"L {rel} -> {os.readlink(path)}\0".encode())
        elif path.is_dir():
            digest.update(f"D {rel}\0".encode())
        elif path.is_file():
            executable = os.access(path, os.X_OK)
            digest.update(f"F {rel} {int(executable)} {path.stat().st_size}\0".encode())
            with path.open("rb") as handle:
                for chunk in iter(lambda: handle.read(1 << 20), b""):
                    digest.update(chunk)
    return digest.hexdigest()


def _slug(name: str) -> str:
    """A name as a repository name may spell it (lowercase letters, digits, ``._-``)."""
    slug = re.sub(r"[^a-z0-9._-]+", "-", name.lower()).strip("._-")
    return slug[:64] or "task"


def _build_log(lines: Any) -> str:
    """The tail of a build log (the SDK's list of JSON messages)."""
    text: list[str] = []
    with contextlib.suppress(Exception):
        for line in lines or ():
            if isinstance(line, dict):
                text.append(str(line.get("stream") or line.get("error") or line.get("status", "")))
    joined = "".join(text).strip()
    return joined[-_LOG_TAIL:] or "(no build output)"


class ContainerEngine:
    """A Docker Engine, and the images on it that referee built or was given.

    Args:
        base_url: The engine's address (``unix://...``, ``tcp://...``); default:
            ``DOCKER_HOST``, else ``unix:///var/run/docker.sock``.
        build_network: The network a build's ``RUN`` steps get (``none``, ``host``, or the
            engine's default when None). The build is the task's own, trusted.
        build_timeout: Seconds a build may take.

    Raises:
        MissingDependency: The ``docker`` package is not installed.
        SandboxError: The engine does not answer (the message names its address).

    Attributes:
        url: The engine's address.
        builds: Images this object built (a cached image is not counted).
    """

    def __init__(
        self,
        base_url: str | None = None,
        *,
        build_network: str | None = None,
        build_timeout: float = 1800.0,
    ) -> None:
        docker = docker_sdk()
        self.url = engine_url(base_url)
        self.build_network = build_network
        self.build_timeout = build_timeout
        self.builds = 0
        self._built: dict[str, str] = {}  # tag -> image id, what this object knows exists
        self._configs: dict[str, dict[str, Any]] = {}  # image -> its Config, asked once
        self._locks: dict[str, threading.Lock] = collections.defaultdict(threading.Lock)
        self._lock = threading.Lock()
        try:
            self.client = docker.DockerClient(base_url=self.url, timeout=120)
            self.client.ping()
        except Exception as exc:
            raise SandboxError(
                f"cannot reach the Docker Engine at {self.url}: {exc}; start it, or point "
                "DOCKER_HOST (or the reward's docker_host) at one"
            ) from None
        self.api = self.client.api

    def image(
        self,
        *,
        name: str,
        context: str | Path | None = None,
        tag: str | None = None,
        build_timeout: float | None = None,
    ) -> str:
        """The tag of `name`'s image: built from `context` (once per content, within
        `build_timeout` seconds, default the engine's), or `tag` as the engine has it.
        Exactly one of `context` and `tag`.

        Raises:
            SandboxError: The build failed (with the log's tail), or the engine lacks `tag`.
        """
        if (context is None) == (tag is None):
            raise ValueError("give exactly one of context and tag")
        if tag is not None:
            return self._existing(name, tag)
        assert context is not None
        root = Path(context)
        if not (root / "Dockerfile").is_file():
            raise SandboxError(f"{name}: no Dockerfile in {root}")
        wanted = f"referee-env/{_slug(name)}:{context_digest(root)[:20]}"
        with self._lock:
            lock = self._locks[wanted]
        with lock:
            if wanted in self._built:
                return wanted
            try:
                found = self.client.images.get(wanted)
                self._built[wanted] = found.id
                return wanted
            except Exception:
                pass
            self._build(name, root, wanted, build_timeout or self.build_timeout)
        return wanted

    def _existing(self, name: str, tag: str) -> str:
        if tag in self._built:
            return tag
        try:
            found = self.client.images.get(tag)
        except Exception as exc:
            raise SandboxError(
                f"{name}: the image {tag!r} is not on the Docker Engine at {self.url} ({exc}); "
                "pull or load it there first (referee does not pull)"
            ) from None
        self._built[tag] = found.id
        return tag

    def _build(self, name: str, root: Path, tag: str, timeout: float) -> None:
        docker = docker_sdk()
        started = time.monotonic()
        try:
            image, _ = self.client.images.build(
                path=str(root),
                tag=tag,
                rm=True,
                forcerm=True,
                network_mode=self.build_network,
                timeout=int(timeout),
                labels={LABEL: "image", "referee.task": name[:200]},
            )
        except docker.errors.BuildError as exc:
            raise SandboxError(
                f"{name}: the image does not build from {root / 'Dockerfile'}: {exc.msg}\n"
                f"build log (tail):\n{_build_log(exc.build_log)}"
            ) from None
        except Exception as exc:
            seconds = time.monotonic() - started
            raise SandboxError(
                f"{name}: the image could not be built from {root / 'Dockerfile'} on the "
                f"Docker Engine at {self.url} (after {seconds:.0f}s): {exc}"
            ) from None
        self.builds += 1
        self._built[tag] = image.id

    def _config(self, image: str) -> dict[str, Any]:
        """The image's ``Config`` (asked of the engine once per image)."""
        config = self._configs.get(image)
        if config is None:
            attrs = self.client.images.get(image).attrs
            config = self._configs[image] = dict(attrs.get("Config") or {})
        return config

    def workdir(self, image: str) -> str:
        """The image's working directory (its ``WORKDIR``), ``/`` where it sets none."""
        return str(self._config(image).get("WorkingDir") or "/")

    def user(self, image: str) -> str:
        """The image's user (its ``USER``), ``""`` where it sets none (root)."""
        return str(self._config(image).get("User") or "")

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.client.close()
