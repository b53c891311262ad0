"""A small base image for container tests, without a registry: ``docker import`` of a root
filesystem assembled from the host's own files.

`base_image(url)` gives the tag of an image with bash, coreutils, diff, grep, sed, patch, git
(for ``git apply``) and python3 with its standard library (no tests, no site-packages), each
binary with the shared libraries ``ldd`` finds. Tests build their task images ``FROM`` it.
Imported once per engine and cached by the list of files (the engine keeps it for the session).
"""

from __future__ import annotations

import hashlib
import io
import os
import re
import shutil
import subprocess
import sys
import tarfile
import threading
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

__all__ = [
    "BINARIES",
    "HARBOR_FIX",
    "base_image",
    "harbor_case",
    "harbor_task",
    "rootfs_files",
    "swebench_instance_image",
]

BINARIES = (
    "bash", "sh", "cat", "ls", "mkdir", "rm", "rmdir", "chmod", "chown", "cp", "mv", "ln",
    "touch", "echo", "printf", "env", "sleep", "test", "true", "false", "id", "pwd", "head",
    "tail", "wc", "sort", "tr", "cut", "dirname", "basename", "readlink", "stat", "diff",
    "cmp", "grep", "sed", "patch", "git", "python3", "timeout", "kill", "seq", "expr",
)  # fmt: skip
_SKIP_STDLIB = {
    "test", "idlelib", "tkinter", "turtledemo", "ensurepip", "lib2to3", "pydoc_data",
    "site-packages", "dist-packages", "__pycache__", "config-3.11-x86_64-linux-gnu",
}  # fmt: skip
_LIB = re.compile(r"(?:=>\s*)?(/\S+)\s+\(0x")
_LOCK = threading.Lock()
_DONE: dict[str, str] = {}


def _which(name: str) -> str | None:
    for folder in ("/usr/bin", "/bin", "/usr/sbin"):
        path = os.path.join(folder, name)
        if os.path.exists(path):
            return path
    return shutil.which(name)


def _libraries(paths: Sequence[str]) -> set[str]:
    """The shared libraries the ELF files at `paths` load (ldd, in batches)."""
    found: set[str] = set()
    for start in range(0, len(paths), 64):
        batch = paths[start : start + 64]
        out = subprocess.run(["ldd", *batch], capture_output=True, text=True, check=False).stdout
        found.update(match.group(1) for match in _LIB.finditer(out))
    return found


def _stdlib() -> tuple[str, list[str]]:
    """The standard library's folder and its files (less tests, GUI and site-packages)."""
    root = Path(f"/usr/lib/python3.{sys.version_info.minor}")
    if not root.is_dir():  # the interpreter running the tests may not be the system's
        out = subprocess.run(
            ["/usr/bin/python3", "-c", "import os; print(os.path.dirname(os.__file__))"],
            capture_output=True, text=True, check=True,
        )  # fmt: skip
        root = Path(out.stdout.strip())
    files: list[str] = []
    for folder, dirs, names in os.walk(root):
        dirs[:] = [d for d in dirs if d not in _SKIP_STDLIB]
        files.extend(os.path.join(folder, n) for n in names if not n.endswith(".pyc"))
    return str(root), files


def rootfs_files(extra: Iterable[str] = ()) -> list[str]:
    """Every host path the root filesystem holds (files and links), sorted."""
    wanted: set[str] = set()
    for name in (*BINARIES, *extra):
        path = name if name.startswith("/") else _which(name)
        if path is None:
            continue
        wanted.add(path)
        real = os.path.realpath(path)
        wanted.add(real)
    _, stdlib = _stdlib()
    wanted.update(stdlib)
    elves = [
        p for p in wanted if os.path.isfile(p) and (p.endswith(".so") or os.access(p, os.X_OK))
    ]
    for lib in _libraries(sorted(elves)):
        wanted.add(lib)
        wanted.add(os.path.realpath(lib))
    return sorted(wanted)


def _canonical(path: str) -> str:
    """`path` with the host's top-level links (/bin -> usr/bin) resolved, its name kept."""
    folder, name = os.path.split(path)
    return os.path.join(os.path.realpath(folder), name)


def _tar(paths: Sequence[str]) -> bytes:
    buf = io.BytesIO()
    seen: set[str] = set()
    with tarfile.open(fileobj=buf, mode="w") as tar:

        def add_dir(name: str, mode: int = 0o755) -> None:
            if name in seen or not name:
                return
            parent = os.path.dirname(name)
            add_dir(parent)
            info = tarfile.TarInfo(name)
            info.type, info.mode = tarfile.DIRTYPE, mode
            tar.addfile(info)
            seen.add(name)

        for name in ("tmp", "var/tmp"):
            add_dir(name, 0o1777)
        for name in ("root", "etc", "proc", "dev", "sys", "run", "usr/local/bin"):
            add_dir(name)
        for top in ("bin", "lib", "lib64", "sbin"):
            if os.path.islink(f"/{top}"):
                info = tarfile.TarInfo(top)
                info.type, info.linkname = tarfile.SYMTYPE, os.readlink(f"/{top}")
                tar.addfile(info)
                seen.add(top)
        for text_name, text in (
            ("etc/passwd", "root:x:0:0:root:/root:/bin/bash\nnobody:x:65534:65534::/:/bin/sh\n"),
            ("etc/group", "root:x:0:\nnogroup:x:65534:\n"),
        ):
            data = text.encode()
            info = tarfile.TarInfo(text_name)
            info.size, info.mode = len(data), 0o644
            tar.addfile(info, io.BytesIO(data))
        for path in sorted({_canonical(p) for p in paths}):
            name = path.lstrip("/")
            if name in seen:
                continue
            add_dir(os.path.dirname(name))
            if os.path.islink(path):
                info = tarfile.TarInfo(name)
                info.type, info.linkname = tarfile.SYMTYPE, os.readlink(path)
                tar.addfile(info)
            elif os.path.isfile(path):
                stat = os.stat(path)
                info = tarfile.TarInfo(name)
                info.size, info.mode = stat.st_size, stat.st_mode & 0o7777
                with open(path, "rb") as handle:
                    tar.addfile(info, handle)
            seen.add(name)
    return buf.getvalue()


def base_image(url: str, extra: Iterable[str] = ()) -> str:
    """The tag of the base image on the engine at `url`, imported on first use.

    `extra`: more host binaries (names on PATH or absolute paths) to put in.
    """
    import docker

    files = rootfs_files(extra)
    digest = hashlib.sha256()
    for path in files:
        try:
            stat = os.lstat(path)
        except OSError:
            continue
        digest.update(f"{path} {stat.st_size} {int(stat.st_mtime)}\0".encode())
    tag = f"referee-test-base:{digest.hexdigest()[:16]}"
    with _LOCK:
        if _DONE.get(url) == tag:
            return tag
        client = docker.DockerClient(base_url=url)
        try:
            try:
                client.images.get(tag)
            except docker.errors.ImageNotFound:
                repository, _, version = tag.partition(":")
                client.api.import_image_from_data(_tar(files), repository=repository, tag=version)
        finally:
            client.close()
        _DONE[url] = tag
    return tag


HARBOR_CALC = "def add(a, b):\n    return a - b\n"
HARBOR_FIX = """\
--- a/calc.py
+++ b/calc.py
@@ -1,2 +1,2 @@
 def add(a, b):
-    return a - b
+    return a + b
"""
HARBOR_TEST = """#!/bin/bash
if python3 -c 'import calc; assert calc.add(2, 3) == 5'; then r=1; else r=0; fi
echo $r > /logs/verifier/reward.txt
"""


def harbor_task(root: Path, base: str, name: str = "add") -> Path:
    """A Harbor task in `root`/`name`: ``calc.add`` subtracts, `HARBOR_FIX` fixes it; its
    test writes 1 or 0 to ``reward.txt``."""
    task = root / name
    if task.exists():
        return task
    (task / "tests").mkdir(parents=True)
    (task / "environment").mkdir()
    (task / "instruction.md").write_text("Make calc.add add.\n")
    (task / "task.toml").write_text('version = "1.0"\n[verifier]\ntimeout_sec = 60\n')
    (task / "tests" / "test.sh").write_text(HARBOR_TEST)
    (task / "environment" / "calc.py").write_text(HARBOR_CALC)
    (task / "environment" / "Dockerfile").write_text(
        f"FROM {base}\nWORKDIR /app\nCOPY calc.py /app/calc.py\n"
    )
    return task


def harbor_case(url: str, root: Path) -> tuple[list[Any], dict[str, Any]]:
    """Rollouts of the `harbor_task` task (a fix: 1.0, no change: 0.0) and the reward's
    options, on the engine at `url`."""
    from referee.rollout import Rollout

    task = harbor_task(root, base_image(url))
    rollouts = [
        Rollout(completion=f"```diff\n{HARBOR_FIX}```", reference={"task": task.name}),
        Rollout(completion="no change", reference={"task": task.name}),
    ]
    return rollouts, {"tasks_dir": str(root), "docker_host": url}


_GIT_ENV = {
    "GIT_AUTHOR_NAME": "referee", "GIT_AUTHOR_EMAIL": "referee@example.com",
    "GIT_COMMITTER_NAME": "referee", "GIT_COMMITTER_EMAIL": "referee@example.com",
    "GIT_AUTHOR_DATE": "2020-01-01T00:00:00Z", "GIT_COMMITTER_DATE": "2020-01-01T00:00:00Z",
}  # fmt: skip
_COMMIT = "git init -q && git add -A && git commit -qm base && git gc -q --prune=now"


def swebench_instance_image(
    engine: Any, root: Path, name: str, files: dict[str, str], *, site: Sequence[Path] = ()
) -> tuple[str, str]:
    """A SWE-bench-style instance image on `engine` (a `ContainerEngine`), and its base commit.

    The repository (`files`, path -> text; ``*.sh`` executable) lies at ``/testbed``, the
    image's ``WORKDIR``, as a git work tree of a single commit, as swebench's image builder
    leaves it (history scrubbed: no remote, no later commits). `site`: host folders or files
    (Python packages) copied to ``/opt/site``, on ``PYTHONPATH``. FROM the `base_image` with
    ``find`` and ``tar``; built once per content (`ContainerEngine.image`)."""
    context = root / name
    repo = context / "repo"
    if not context.exists():
        repo.mkdir(parents=True)
        for rel, text in files.items():
            path = repo / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
            path.chmod(0o755 if rel.endswith(".sh") else 0o644)
        lines = [f"FROM {base_image(engine.url, extra=('find', 'tar'))}"]
        if site:
            (context / "site").mkdir()
            for source in site:
                target = context / "site" / source.name
                if source.is_dir():
                    shutil.copytree(source, target, ignore=shutil.ignore_patterns("__pycache__"))
                else:
                    shutil.copy(source, target)
            lines += ["COPY site/ /opt/site/", "ENV PYTHONPATH=/opt/site"]
        env = " ".join(f"{k}='{v}'" for k, v in _GIT_ENV.items())
        lines += [
            "COPY repo/ /testbed/",
            "WORKDIR /testbed",
            f"RUN env {env} sh -c '{_COMMIT}'",
        ]
        (context / "Dockerfile").write_text("\n".join(lines) + "\n")
    tag = str(engine.image(name=name, context=context))
    scratch = root / f"{name}-commit"
    if not scratch.exists():  # the same commit on the host: same tree, author and dates
        shutil.copytree(repo, scratch)
        subprocess.run(
            ["sh", "-c", _COMMIT], cwd=scratch, env={**os.environ, **_GIT_ENV}, check=True
        )
    head = subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=scratch, capture_output=True, text=True, check=True
    )
    return tag, head.stdout.strip()
