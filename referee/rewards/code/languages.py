"""The languages `io_tests` runs: how each is built and run in the sandbox, and what a run meant.

A compiled language is built once per rollout, in the sandbox, by a job of its own (its own
deadline and memory), whose standard output is the build: an executable, a jar, or JavaScript.
That build is then handed to one job per case, as a file; so every case runs against the same
build, each in a clean job. The host never runs or unpacks a build: it only carries its bytes.
Builds are kept in a bounded cache keyed by the sandbox, the language, the flags, the compile
limits and the source's digest, so a rollout scored twice (or two identical attempts) is
compiled once.

The program's source is hostile; so is what its compiler says about it, and what it prints.
None of it can make a case pass: a case passes only when the program exits 0 on its own and
its standard output equals the expected output, compared on the host. The verdict kinds
(``compile error``, ``runtime error``, ``time limit``, ``memory limit``, ``output limit``,
``wrong answer``) are reasons only; each is a failed case.

The flags, per language (``compile_flags`` replaces the defaults of the compiler's own part):

- ``c``: ``gcc -std=gnu11 -O2 -pipe -o prog main.c -lm`` (Debian ``gcc``).
- ``cpp``: ``g++ -std=gnu++17 -O2 -pipe -o prog main.cpp`` (Debian ``g++``).
- ``go``: ``go build -o prog main.go`` with ``GO111MODULE=off CGO_ENABLED=0`` (one file, the
  standard library only; Debian ``golang-go``). Run with ``GOMEMLIMIT=<memory_mb>MiB`` (the
  collector's target, a soft limit); the runtime reserves about 700 MiB of address space
  before ``main``, so the address-space limit, the hard one, is ``memory_mb`` plus
  `RUNTIME_RESERVE_MB`.
- ``rust``: ``rustc --edition 2021 -O -C strip=symbols -o prog main.rs`` (std only; Debian
  ``rustc``, which links with ``cc``).
- ``java``: ``javac -encoding UTF-8`` then ``jar``; run as ``java -Xmx<memory_mb>m`` with the
  serial collector, the client compiler only (``-XX:TieredStopAtLevel=1``: a faster start) and
  bounded class and code spaces. The heap is the memory limit (as Codeforces counts Java's);
  the address-space limit is ``memory_mb`` plus `RUNTIME_RESERVE_MB`, which the JVM reserves
  without using. The class run is the public class (in its package), else ``Main``. Debian
  ``default-jdk-headless``.
- ``typescript``: transpiled, not type-checked (as ``tsx``, Bun, Deno and ``node
  --experimental-strip-types`` run TypeScript): a syntax error is a compile error, a type error
  is not. The transpiler is the ``typescript`` package the sandbox's ``tsc`` belongs to
  (Debian ``node-typescript``); the program runs on ``node`` (Debian ``nodejs``) as
  JavaScript does: ``--max-old-space-size=<memory_mb>`` (V8's heap; buffers live outside it),
  the address space ``memory_mb`` plus `RUNTIME_RESERVE_MB` (node reserves about 720 MiB at
  start).

C, C++ and Rust run under the address-space limit alone: a C program whose ``malloc`` fails
gets NULL, and a crash after it reads as a runtime error (signal 11), not a memory limit.
"""

from __future__ import annotations

import dataclasses
import hashlib
import re
import shlex
import signal
import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Literal, get_args

from referee.verifiers.sandbox import Job, Limits, RunResult, Sandbox

__all__ = [
    "COMPILED",
    "LANGUAGES",
    "RUNTIME_RESERVE_MB",
    "Build",
    "Language",
    "Toolchain",
    "build",
    "case_job",
    "toolchain_problem",
    "verdict",
]

Language = Literal["python", "javascript", "bash", "c", "cpp", "go", "rust", "java", "typescript"]
"""A language `io_tests` runs."""

LANGUAGES: tuple[Language, ...] = get_args(Language)
"""Every language, in `Language`'s order."""

RUNTIME_RESERVE_MB = 1024
"""Address space a managed runtime reserves beyond its heap before the program runs (the JVM's
class and code spaces, metaspace and shared archive; Go's page summaries, about 700 MiB;
node's code range, about 720 MiB): added to the address-space limit of Java, Go, JavaScript and
TypeScript programs, whose heap limit is their runtime's own."""

_JVM = (
    "-XX:+UseSerialGC",
    "-XX:TieredStopAtLevel=1",
    "-XX:CompressedClassSpaceSize=64m",
    "-XX:ReservedCodeCacheSize=64m",
    "-XX:MaxMetaspaceSize=256m",
    "-Xshare:auto",
)
_JAVAC_HEAP_MB = 512

# Transpiles main.ts to stdout; syntax errors to stderr (tsc's format) and exit 1. It finds the
# typescript package the sandbox's tsc belongs to when node's own resolution does not.
_TRANSPILE = r"""
const fs = require("fs"), path = require("path");
let ts;
try { ts = require("typescript"); } catch (e) {
  for (const dir of (process.env.PATH || "").split(":")) {
    const tsc = path.join(dir, "tsc");
    if (fs.existsSync(tsc)) {
      ts = require(path.dirname(path.dirname(fs.realpathSync(tsc))));
      break;
    }
  }
}
if (!ts) {
  process.stderr.write("referee: the typescript package is not installed\n");
  process.exit(3);
}
const out = ts.transpileModule(fs.readFileSync("main.ts", "utf8"), {
  reportDiagnostics: true, fileName: "main.ts",
  compilerOptions: { target: ts.ScriptTarget.ES2020, module: ts.ModuleKind.CommonJS },
});
const errors = (out.diagnostics || []).filter(d => d.category === ts.DiagnosticCategory.Error);
for (const d of errors) {
  const at = d.file ? d.file.getLineAndCharacterOfPosition(d.start) : { line: 0, character: 0 };
  const text = ts.flattenDiagnosticMessageText(d.messageText, "\n");
  process.stderr.write(`main.ts(${at.line + 1},${at.character + 1}): error TS${d.code}: ${text}\n`);
}
if (errors.length) process.exit(1);
process.stdout.write(out.outputText);
"""


@dataclass(frozen=True)
class Toolchain:
    """How one compiled language is built and run.

    Attributes:
        source: The source file's name (Java's follows the public class).
        script: The build, a shell script whose stdout is the build alone (the compiler's own
            output goes to stderr); ``{flags}`` and ``{source}`` are filled in.
        flags: The compiler's default flags (``compile_flags`` replaces them).
        artifact: The build's file name in each case's job.
        tools: (program, Debian package) the sandbox must have.
        memory: How the memory limit is set: ``rlimit``, the address space alone; ``jvm``,
            ``go``, ``node``, the runtime's own heap limit, the address space more.
    """

    source: str
    script: str
    flags: tuple[str, ...]
    artifact: str
    tools: tuple[tuple[str, str], ...]
    memory: Literal["rlimit", "jvm", "go", "node"] = "rlimit"


_JVM_J = " ".join(f"-J{flag}" for flag in _JVM)

COMPILED: dict[str, Toolchain] = {
    "c": Toolchain(
        "main.c",
        "gcc {flags} -o prog {source} -lm 1>&2 && cat prog",
        ("-std=gnu11", "-O2", "-pipe"),
        "prog",
        (("gcc", "gcc"),),
    ),
    "cpp": Toolchain(
        "main.cpp",
        "g++ {flags} -o prog {source} 1>&2 && cat prog",
        ("-std=gnu++17", "-O2", "-pipe"),
        "prog",
        (("g++", "g++"),),
    ),
    "go": Toolchain(
        "main.go",
        "GOCACHE=/tmp/.gocache GOPATH=/tmp/.gopath GO111MODULE=off CGO_ENABLED=0 GOFLAGS= "
        "go build {flags} -o prog {source} 1>&2 && cat prog",
        (),
        "prog",
        (("go", "golang-go"),),
        memory="go",
    ),
    "rust": Toolchain(
        "main.rs",
        "rustc {flags} -o prog {source} 1>&2 && cat prog",
        ("--edition", "2021", "-O", "-C", "strip=symbols"),
        "prog",
        (("rustc", "rustc"), ("cc", "gcc")),
    ),
    "java": Toolchain(
        "Main.java",
        f"mkdir .classes && javac -J-Xmx{_JAVAC_HEAP_MB}m {_JVM_J} {{flags}} -d .classes "
        f"{{source}} 1>&2 && jar -J-Xmx256m {_JVM_J} cf prog.jar -C .classes . 1>&2 "
        "&& cat prog.jar",
        ("-encoding", "UTF-8"),
        "prog.jar",
        (("javac", "default-jdk-headless"), ("jar", "default-jdk-headless")),
        memory="jvm",
    ),
    "typescript": Toolchain(
        "main.ts",
        'node -e "$REFEREE_TRANSPILE"',
        (),
        "prog.js",
        (("node", "nodejs"), ("tsc", "node-typescript")),
        memory="node",
    ),
}
"""The compiled languages (the others run their source as it is)."""

_RUN_TOOLS = {
    "java": (("java", "default-jdk-headless"),),
    "javascript": (("node", "nodejs"),),
}

_CLASS = re.compile(r"^\s*public\s+(?:(?:final|abstract|strictfp)\s+)*class\s+(\w+)", re.MULTILINE)
_PACKAGE = re.compile(r"^\s*package\s+([\w.]+)\s*;", re.MULTILINE)


_ANY_CLASS = re.compile(r"\bclass\s+(\w+)")
_MAIN = re.compile(r"\bstatic\s+void\s+main\s*\(")


def java_class(source: str) -> tuple[str, str]:
    """(the source file's name, the class to run) of a Java program: its public class (in its
    package), else the class declared last before ``static void main``, else ``Main``."""
    found = _CLASS.search(source)
    if found:
        name = found.group(1)
    else:
        entry = _MAIN.search(source)
        before = _ANY_CLASS.findall(source[: entry.start()]) if entry else []
        name = before[-1] if before else "Main"
    package = _PACKAGE.search(source)
    return f"{name}.java", f"{package.group(1)}.{name}" if package else name


@dataclass(frozen=True)
class Build:
    """What building a program gave: its bytes, or why there are none.

    Attributes:
        artifact: The build (empty when it failed).
        error: None when it built; else the verdict's reason (``compile error: ...``).
        main: Java's class to run.
        seconds: How long the build took (0 when it came from the cache).
    """

    artifact: bytes
    error: str | None
    main: str = ""
    seconds: float = 0.0


class _Builds:
    """Builds by (sandbox options, language, flags, compile limits, source digest), least
    recently used out first, at most `max_bytes` of artifacts."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self._items: OrderedDict[tuple[object, ...], Build] = OrderedDict()
        self._size = 0
        self._lock = threading.Lock()

    def get(self, key: tuple[object, ...]) -> Build | None:
        with self._lock:
            hit = self._items.get(key)
            if hit is not None:
                self._items.move_to_end(key)
            return hit

    def put(self, key: tuple[object, ...], value: Build) -> None:
        size = len(value.artifact)
        if size > self.max_bytes:
            return
        with self._lock:
            old = self._items.pop(key, None)
            if old is not None:
                self._size -= len(old.artifact)
            self._items[key] = value
            self._size += size
            while self._size > self.max_bytes:
                _, dropped = self._items.popitem(last=False)
                self._size -= len(dropped.artifact)

    def clear(self) -> None:
        with self._lock:
            self._items.clear()
            self._size = 0


BUILDS = _Builds(256 << 20)
"""This process's build cache."""

_PROBED: dict[tuple[int, str], str | None] = {}
_PROBE_LOCK = threading.Lock()


def toolchain_problem(sandbox: Sandbox, language: str) -> str | None:
    """None when the sandbox has what `language` needs to build and run a program, else what
    to install (asked of each sandbox once; Python and bash need nothing beyond the sandbox)."""
    chain = COMPILED.get(language)
    tools = (*(chain.tools if chain else ()), *_RUN_TOOLS.get(language, ()))
    if not tools:
        return None
    key = (id(sandbox), language)
    with _PROBE_LOCK:
        if key in _PROBED:
            return _PROBED[key]
    script = "; ".join(f"command -v {tool} >/dev/null || echo {tool}" for tool, _ in tools)
    probe = sandbox.run(Job(command=("sh", "-c", script), limits=Limits(wall_seconds=30)))
    missing = probe.stdout.decode(errors="replace").split()
    problem = None
    if missing or not probe.ok:
        packages = sorted({package for tool, package in tools if tool in missing or not probe.ok})
        what = ", ".join(missing) or probe.describe()
        problem = (
            f"the sandbox cannot {'build' if chain else 'run'} {language} programs "
            f"(missing: {what}): install "
            f"{' '.join(packages)} where the sandbox runs (apt-get install {' '.join(packages)})"
        )
    with _PROBE_LOCK:
        _PROBED[key] = problem
    return problem


def _compile_limits(timeout: float, memory_mb: int) -> Limits:
    return Limits(
        wall_seconds=timeout,
        cpu_seconds=timeout,
        memory_bytes=memory_mb << 20,
        output_bytes=64 << 20,  # the build comes back on stdout
        processes=64,
    )


def _first_lines(text: bytes, lines: int = 5, width: int = 300) -> str:
    """The compiler's first lines from its first error on (its warnings before it left out)."""
    said = text.decode(errors="replace").strip().splitlines()
    first = next((i for i, line in enumerate(said) if "error" in line.lower()), 0)
    return " | ".join(line[:width] for line in said[first : first + lines])


def build(
    sandbox: Sandbox,
    options: object,
    language: str,
    source: str,
    flags: tuple[str, ...] | None,
    timeout: float,
    memory_mb: int,
) -> Build:
    """The program built in the sandbox, or the compile error (a verdict, not a Failure).

    Raises:
        SandboxError: The sandbox could not run the build.
    """
    chain = COMPILED[language]
    flags = chain.flags if flags is None else flags
    digest = hashlib.sha256(source.encode()).hexdigest()
    key = (options, language, flags, timeout, memory_mb, digest)  # out of memory is a verdict
    hit = BUILDS.get(key)
    if hit is not None:
        return Build(hit.artifact, hit.error, hit.main)
    name, main = java_class(source) if language == "java" else (chain.source, "")
    script = chain.script.format(
        flags=" ".join(shlex.quote(flag) for flag in flags), source=shlex.quote(name)
    )
    if language == "typescript":
        script = script.replace('"$REFEREE_TRANSPILE"', shlex.quote(_TRANSPILE))
    bounds = _compile_limits(timeout, memory_mb)
    result = sandbox.run(Job(command=("sh", "-c", script), files={name: source}, limits=bounds))
    if result.ok and result.stdout:
        done = Build(result.stdout, None, main, result.wall_time)
    elif result.timed_out:  # not cached: a loaded machine may build it next time
        return Build(b"", f"compile time limit ({timeout:g} s)", main, result.wall_time)
    elif result.output_limited:
        done = Build(b"", "compile error: the build is over 64 MiB", main, result.wall_time)
    else:
        said = _first_lines(result.stderr) or result.describe()
        done = Build(b"", f"compile error: {said}", main, result.wall_time)
    BUILDS.put(key, done)
    return done


def _reserved(limits: Limits) -> Limits:
    """A managed runtime's limits: its address space `RUNTIME_RESERVE_MB` over its heap."""
    return dataclasses.replace(
        limits, memory_bytes=limits.memory_bytes + (RUNTIME_RESERVE_MB << 20)
    )


def case_job(language: str, code: str, built: Build | None, stdin: bytes, limits: Limits) -> Job:
    """One case's job: the build (or the source) run on the case's input, under `limits` as
    the language reads them (see the module's docstring: a managed runtime's heap is
    ``memory_bytes``, its address space more)."""
    heap = limits.memory_bytes >> 20
    node = ("node", f"--max-old-space-size={heap}")
    if language == "python":
        return Job(source=code, stdin=stdin, limits=limits)
    if language == "javascript":
        files: dict[str, str | bytes] = {"main.js": code}
        return Job(command=(*node, "main.js"), files=files, stdin=stdin, limits=_reserved(limits))
    if language == "bash":
        return Job(command=("bash", "main.sh"), files={"main.sh": code}, stdin=stdin, limits=limits)
    assert built is not None
    chain = COMPILED[language]
    files = {chain.artifact: built.artifact}
    if chain.memory == "node":
        argv: tuple[str, ...] = (*node, chain.artifact)
        return Job(command=argv, files=files, stdin=stdin, limits=_reserved(limits))
    if chain.memory == "jvm":
        argv = ("java", f"-Xmx{heap}m", *_JVM, "-cp", chain.artifact, built.main)
        return Job(command=argv, files=files, stdin=stdin, limits=_reserved(limits))
    # Files arrive without the execute bit (the same for every backend): the shell sets it.
    run = f"chmod 755 {chain.artifact} && exec ./{chain.artifact}"
    if chain.memory == "go":
        run = f"chmod 755 {chain.artifact} && GOMEMLIMIT={heap}MiB exec ./{chain.artifact}"
        return Job(command=("sh", "-c", run), files=files, stdin=stdin, limits=_reserved(limits))
    return Job(command=("sh", "-c", run), files=files, stdin=stdin, limits=limits)


_OUT_OF_MEMORY = (
    "MemoryError",  # Python
    "std::bad_alloc",  # C++
    "java.lang.OutOfMemoryError",
    "Could not reserve enough space",  # the JVM's heap
    "runtime: out of memory",  # Go
    "fatal error: out of memory",
    "memory allocation of",  # Rust's allocator ("memory allocation of N bytes failed")
    "JavaScript heap out of memory",  # node
    "Array buffer allocation failed",
    "Allocation failed - process out of memory",
)


def verdict(result: RunResult, cpu_seconds: float) -> str:
    """How a case's run failed, as a kind with what shows it; ``""`` when it exited 0.

    ``time limit`` (the wall clock, or CPU time: SIGXCPU, or SIGKILL at the hard CPU limit),
    ``output limit``, ``memory limit`` (the runtime said it ran out, or a SIGKILL before the
    CPU limit could be reached: the memory cgroup's), or ``runtime error`` with its status or
    signal and the last line of stderr. The program can write any of these markers itself; a
    verdict is a reason only, never a pass.
    """
    if result.timed_out:
        return "time limit"
    if result.output_limited:
        return "output limit"
    if result.exit_code == 0:
        return ""
    said = (result.stderr[-8192:] + b"\n" + result.stdout[-2048:]).decode(errors="replace")
    if result.signal == signal.SIGXCPU:
        return "time limit (CPU)"
    if any(marker in said for marker in _OUT_OF_MEMORY):
        return "memory limit"
    if result.signal == signal.SIGKILL:
        if result.wall_time >= 0.9 * cpu_seconds:
            return "time limit (CPU)"
        return "memory limit (killed)"
    how = result.describe()
    lines = result.stderr.decode(errors="replace").strip().splitlines()
    # The runtime's own words (Go's "panic: ..." sits above its stack), else the last line.
    said_first = [line for line in lines if _CRASH.match(line)]
    line = (said_first or lines[-1:] or [""])[0]
    return f"runtime error ({how})" + (f": {line[:200]}" if line else "")


_CRASH = re.compile(
    r"(panic: |fatal error: |thread '.*' panicked|Exception in thread |[\w.]*(Error|Exception): )"
)
