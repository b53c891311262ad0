"""One leased container: files copied in, commands run under a deadline, files read out."""

from __future__ import annotations

import contextlib
import io
import tarfile
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from referee.errors import SandboxError
from referee.verifiers.containers.engine import ContainerEngine, docker_sdk
from referee.verifiers.sandbox.base import file_bytes

__all__ = ["Container", "ExecResult", "FileContent"]


@dataclass(frozen=True)
class ExecResult:
    """What a command did.

    Attributes:
        exit_code: Its exit status; None when it was killed at its deadline.
        output: Its stdout and stderr, interleaved, cut at the cap.
        truncated: The output was longer than the cap (the rest was read and dropped).
        timed_out: It ran past its deadline and the container was killed.
        seconds: How long it ran.
    """

    exit_code: int | None
    output: bytes
    truncated: bool = False
    timed_out: bool = False
    seconds: float = 0.0

    def text(self, tail: int = 2000) -> str:
        """The output's tail, as text, for a person."""
        return self.output.decode("utf-8", "replace")[-tail:]


FileContent = bytes | str | Path
"""A file to copy in: its bytes, text (UTF-8), or a host path (a folder is copied whole)."""


def _tar(files: Mapping[str, FileContent], mode: int) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for dest, content in files.items():
            if not dest.startswith("/") or ".." in dest.split("/"):
                raise ValueError(f"a destination must be an absolute path without '..': {dest!r}")
            name = dest.strip("/")
            if isinstance(content, Path):
                _add_path(tar, content, name)
                continue
            data = file_bytes(content)
            info = tarfile.TarInfo(name)
            info.size, info.mode, info.mtime = len(data), mode, int(time.time())
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def _add_path(tar: tarfile.TarFile, source: Path, name: str) -> None:
    """A host file or folder (its files' executable bits kept, owned by root)."""

    def reset(info: tarfile.TarInfo) -> tarfile.TarInfo:
        info.uid = info.gid = 0
        info.uname = info.gname = "root"
        return info

    tar.add(str(source), arcname=name, recursive=True, filter=reset)


class Container:
    """One fresh container leased from a `ContainerPool` for one job (see `ContainerPool.lease`).

    Attributes:
        id: The container's id.
        image: Its image.
        killed: It was killed (a command ran past its deadline); nothing more runs in it.
    """

    def __init__(self, engine: ContainerEngine, container_id: str, image: str) -> None:
        self.engine = engine
        self.id = container_id
        self.image = image
        self.killed = False

    @property
    def _api(self) -> Any:
        return self.engine.api

    def put(self, files: Mapping[str, FileContent], *, mode: int = 0o644) -> None:
        """Copy files in, by absolute path (parents are created; a host folder whole).

        Raises:
            SandboxError: The engine refused the copy.
        """
        if not files:
            return
        data = _tar(files, mode)
        try:
            self._api.put_archive(self.id, "/", data)
        except Exception as exc:
            raise SandboxError(
                f"cannot copy files into a container of {self.image}: {exc}"
            ) from None

    def exec(
        self,
        command: Sequence[str],
        *,
        timeout: float,
        workdir: str | None = None,
        env: Mapping[str, str] | None = None,
        user: str | None = None,
        output_bytes: int = 1 << 20,
        then: tuple[bytes, float] | None = None,
    ) -> ExecResult:
        """Run `command` and wait at most `timeout` seconds; past it, the container is killed
        (every process in it) and the result says ``timed_out``.

        `then`: ``(marker, seconds)``: once the output first holds `marker`, the deadline
        becomes `seconds` from then (a set-up step with its own allowance, then the job's
        own limit, in one exec).

        Raises:
            SandboxError: The engine could not start the command.
        """
        docker = docker_sdk()
        if self.killed:
            raise SandboxError("the container was killed; lease a fresh one")
        try:
            created = self._api.exec_create(
                self.id,
                list(command),
                stdout=True,
                stderr=True,
                workdir=workdir,
                environment=dict(env or {}),
                user=user or "",
            )
            sock = self._api.exec_start(created["Id"], socket=True)
        except Exception as exc:
            raise SandboxError(f"cannot run {list(command)!r} in {self.image}: {exc}") from None
        raw = getattr(sock, "_sock", sock)
        with contextlib.suppress(Exception):
            raw.settimeout(None)  # the deadline is ours, not the HTTP client's
        chunks: list[bytes] = []
        state = {"kept": 0, "seen": 0}
        marked: list[float] = []  # when `then`'s marker was seen
        marker = then[0] if then else b""

        def read() -> None:
            tail = b""
            with contextlib.suppress(Exception):
                for _, data in docker.utils.socket.frames_iter(sock, tty=False):
                    state["seen"] += len(data)
                    room = output_bytes - state["kept"]
                    if room > 0:
                        chunks.append(data[:room])
                        state["kept"] += min(room, len(data))
                    if marker and not marked:
                        window = tail + data
                        if marker in window:
                            marked.append(time.monotonic())
                        tail = window[-len(marker) :]

        started = time.monotonic()
        reader = threading.Thread(target=read, daemon=True, name="referee-exec")
        reader.start()
        deadline = started + timeout
        while reader.is_alive():
            if then is not None and marked:
                deadline = min(started + timeout, marked[0] + then[1])
            left = deadline - time.monotonic()
            if left <= 0:
                break
            reader.join(min(left, 0.1) if then is not None else left)
        timed_out = reader.is_alive()
        if timed_out:
            self.kill()
            reader.join(10)
        seconds = time.monotonic() - started
        with contextlib.suppress(Exception):
            sock.close()
        exit_code: int | None = None
        if not timed_out:
            with contextlib.suppress(Exception):
                code = self._api.exec_inspect(created["Id"]).get("ExitCode")
                exit_code = None if code is None else int(code)
        return ExecResult(
            exit_code=exit_code,
            output=b"".join(chunks),
            truncated=state["seen"] > state["kept"],
            timed_out=timed_out,
            seconds=seconds,
        )

    def read(self, path: str, *, max_bytes: int = 1 << 20) -> bytes | None:
        """The content of the regular file at `path`; None when nothing is there.

        Raises:
            SandboxError: Something is there but it is not a regular file, or it is larger
                than `max_bytes` (read no further), or the engine failed.
        """
        docker = docker_sdk()
        try:
            stream, stat = self._api.get_archive(self.id, path, chunk_size=64 << 10)
        except docker.errors.NotFound:
            return None
        except Exception as exc:
            raise SandboxError(
                f"cannot read {path} from a container of {self.image}: {exc}"
            ) from None
        try:
            mode = int(stat.get("mode", 0))
            if mode & ~0o7777 & 0xFFFFFFFF:  # Go's os.FileMode type bits: a dir, link, device
                raise SandboxError(f"{path} is not a regular file (mode {mode:#o})")
            if int(stat.get("size", 0)) > max_bytes:
                raise SandboxError(f"{path} is {stat.get('size')} bytes, over the {max_bytes} read")
            data = bytearray()
            for chunk in stream:
                data += chunk
                if len(data) > max_bytes + (64 << 10):
                    raise SandboxError(f"{path} is larger than the {max_bytes} bytes read")
        finally:
            with contextlib.suppress(Exception):
                stream.close()
        with tarfile.open(fileobj=io.BytesIO(bytes(data))) as tar:
            for member in tar:
                if not member.isfile():
                    raise SandboxError(f"{path} is not a regular file")
                handle = tar.extractfile(member)
                return handle.read(max_bytes + 1)[:max_bytes] if handle else b""
        return None

    def kill(self) -> None:
        """Kill every process in the container (it is removed when the lease ends)."""
        self.killed = True
        with contextlib.suppress(Exception):
            self._api.kill(self.id)
