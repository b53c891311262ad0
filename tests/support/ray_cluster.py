"""A real multi-node Ray cluster on this machine: a head and worker nodes, each its own
``ray start --block`` process in a process group of its own, so one node can be killed whole
(raylet, object store, agents, workers), as when a machine is lost.

Every node gets its own temp dir, its own ports and a small object store; the cluster has its
own auth token (``RAY_AUTH_MODE=token``), so it neither reads nor writes ``~/.ray`` and no other
Ray on the machine can join it. A driver joins with `env` and `address`. Node loss is noticed by
the head's health checks, made fast here (`HEALTH`); Ray's defaults take about 15-30 s.

Used by tests/backends/test_ray_cluster.py and benchmarks/bench_ray.py; `score_on_ray` scores
through a `RayReward` on whatever Ray the test started.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any

RAY = str(Path(sys.executable).with_name("ray"))

# The head's health checks of raylets: a node that stops answering is declared dead after
# about period * threshold (here ~1 s), and its actors with it.
HEALTH = {
    "RAY_health_check_initial_delay_ms": "1000",
    "RAY_health_check_period_ms": "300",
    "RAY_health_check_timeout_ms": "300",
    "RAY_health_check_failure_threshold": "3",
}


def _free_ports(count: int) -> list[int]:
    socks = [socket.socket() for _ in range(count)]
    try:
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def _descendants(root: int) -> list[int]:
    """Every process under `root`, from /proc (workers leave the node's process group)."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
        except OSError:
            continue  # exited meanwhile
        # pid (comm) state ppid ...: comm may hold spaces and parentheses
        ppid = int(text[text.rindex(")") + 2 :].split()[1])
        children.setdefault(ppid, []).append(int(stat.parent.name))
    found, todo = [], [root]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


@dataclass
class Node:
    """One `ray start --block` process; its process group is the node."""

    name: str
    process: subprocess.Popen[str]
    log: Path

    @property
    def alive(self) -> bool:
        return self.process.poll() is None

    def kill(self) -> None:
        """Kill the node at once, every process of it, as a lost machine: SIGKILL to its
        process group (raylet, object store, agents) and to its Ray workers, which the raylet
        starts in process groups of their own."""
        pids = _descendants(self.process.pid)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        self.process.wait(timeout=30)


@dataclass
class LoopbackCluster:
    """A head and `workers` worker nodes on this machine (see the module docstring).

    Args:
        workers: Worker nodes besides the head.
        cpus: CPUs each worker node reports.
        head_cpus: CPUs the head reports (0, as on large clusters: no scoring on the head).
        object_store: Bytes of object store per node.
    """

    workers: int = 2
    cpus: int = 1
    head_cpus: int = 1
    object_store: int = 80 * 1024 * 1024
    nodes: list[Node] = field(default_factory=list)
    port: int = 0
    root: Path | None = None  # the nodes' temp dirs and logs, while started
    env: dict[str, str] = field(default_factory=dict)

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def __enter__(self) -> LoopbackCluster:
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    def start(self, timeout: float = 60) -> None:
        """Start the head, then the workers (at once); a stopped cluster starts afresh (new
        address, new token). Short paths under /tmp: Ray's unix sockets live in the temp dirs,
        and a socket path must stay under 108 bytes."""
        self.root = Path(tempfile.mkdtemp(prefix="rc-", dir="/tmp"))
        self.env = {
            **os.environ,
            **HEALTH,
            "RAY_AUTH_MODE": "token",
            "RAY_AUTH_TOKEN": secrets.token_hex(32),
            "RAY_USAGE_STATS_ENABLED": "0",
            "LITELLM_LOCAL_MODEL_COST_MAP": "True",
        }
        self.env.pop("RAY_ADDRESS", None)
        head_ports = _free_ports(3)
        self.port = head_ports[0]
        head = ["--head", f"--port={self.port}", f"--ray-client-server-port={head_ports[1]}",
                "--include-dashboard=false", f"--dashboard-port={head_ports[2]}"]  # fmt: skip
        self.nodes.append(self._launch("head", head, self.head_cpus))
        self._wait(self.nodes[:1], timeout)
        self.add_workers(self.workers, timeout)

    @property
    def live_workers(self) -> list[Node]:
        return [n for n in self.nodes[1:] if n.alive]

    def add_workers(self, count: int, timeout: float = 60) -> None:
        """Start `count` more worker nodes, one after another, each joined before the next
        starts; a node whose start timed out is started again, once. (`ray start` gives a
        raylet a fixed 30 s to register: two at once beside a loaded CI's other workers
        sometimes did not, and the test failed at set-up.)"""
        first = len(self.nodes)
        for i in range(first, first + count):
            for attempt in (1, 2):
                node = self._launch(f"worker{i}", [f"--address={self.address}"], self.cpus,
                                    retry=attempt > 1)  # fmt: skip
                try:
                    self._wait([node], timeout)
                except RuntimeError as exc:
                    node.kill()
                    if attempt == 2 or "timed out during startup" not in str(exc):
                        raise
                    continue
                self.nodes.append(node)
                break

    def _launch(self, name: str, role: list[str], cpus: int, retry: bool = False) -> Node:
        assert self.root is not None, "start() the cluster first"
        ports = _free_ports(6)
        temp = self.root / (f"{name}-again" if retry else name)
        temp.mkdir()
        args = [RAY, "start", "--block", *role, f"--num-cpus={cpus}",
                f"--object-store-memory={self.object_store}", f"--temp-dir={temp}",
                "--disable-usage-stats", f"--node-manager-port={ports[0]}",
                f"--object-manager-port={ports[1]}", f"--dashboard-agent-listen-port={ports[2]}",
                f"--dashboard-agent-grpc-port={ports[3]}", f"--runtime-env-agent-port={ports[4]}",
                f"--metrics-export-port={ports[5]}"]  # fmt: skip
        log = temp.with_suffix(".log")
        with open(log, "w") as out:
            process = subprocess.Popen(
                args, env=self.env, stdout=out, stderr=subprocess.STDOUT, text=True,
                start_new_session=True,  # the node's own process group: killed whole
            )  # fmt: skip
        return Node(name, process, log)

    def _wait(self, nodes: list[Node], timeout: float) -> None:
        """Until each node's `ray start` says its runtime started (its raylet registered)."""
        deadline = time.monotonic() + timeout
        pending = list(nodes)
        while pending:
            for node in list(pending):
                if "Ray runtime started" in node.log.read_text():
                    pending.remove(node)
                elif not node.alive:
                    raise RuntimeError(f"ray node {node.name} failed:\n{node.log.read_text()}")
            if time.monotonic() > deadline:
                names = ", ".join(n.name for n in pending)
                raise TimeoutError(f"ray nodes {names} not up in {timeout}s (logs in {self.root})")
            time.sleep(0.1)

    def stop(self) -> None:
        for node in reversed(self.nodes):
            node.kill()
        self.nodes.clear()
        if self.root is not None:
            shutil.rmtree(self.root, ignore_errors=True)
            self.root = None


def score_on_ray(
    reward: Any, rollouts: Sequence[Any], *, workers: int, concurrency: int | None = None
) -> list[Any]:
    """`referee.score` through a `RayReward` of `workers` actors, closed afterwards."""
    import referee
    from referee.backends.distributed import RayReward

    ray_reward = RayReward(reward, workers=workers)
    try:
        return referee.score(ray_reward, rollouts, concurrency=concurrency)
    finally:
        ray_reward.close()
