"""patch_tests under attack: patches that forge a pass through the test runner's config and
plugin paths, patches the sandbox cannot apply, snapshot bombs, and references that name host
paths. Each test asserts the honest outcome (the patch's own result, a sandbox failure, a
refusal), and the attacks that the guards stop are shown to work where nothing guards."""

from __future__ import annotations

import gzip
import io
import os
import subprocess
import sys
import tarfile
import tracemalloc
import zipfile
from pathlib import Path
from typing import Any, NamedTuple

import pytest

import referee
from referee.errors import NotApplicable
from referee.reward import reference_powers
from referee.rewards import PatchTests
from referee.rewards.patch import _snapshot as snapshot_module
from referee.rewards.patch import patch_tests as patch_module
from referee.rewards.patch._driver import PYTEST_BOOT, PYTEST_OPTIONS
from referee.rewards.patch._snapshot import snapshot_tar
from tests.support.patches import (
    EVIL_PLUGIN,
    F2P,
    FIXED,
    P2P,
    REPO,
    SITECUSTOMIZE,
    Edit,
    make_diff,
    write_tree,
)
from tests.support.rollouts import make

SANDBOX = {"workers": 2}
REWARD = PatchTests(timeout=60, sandbox=SANDBOX)
UNGUARDED = PatchTests(timeout=60, sandbox=SANDBOX, protected=[])
REJECT = PatchTests(timeout=60, sandbox=SANDBOX, protected_edits="reject")

# A snapshot whose own conftest.py makes a vendored folder a site dir (as some repositories
# do for bundled dependencies): a .pth file there runs when the tests start.
VENDOR_CONFTEST = """\
import os
import site

site.addsitedir(os.path.join(os.path.dirname(__file__), "vendor"))
"""
VENDORED = {**REPO, "conftest.py": VENDOR_CONFTEST, "vendor/README": "bundled packages\n"}


def plugin_package(kind: str, where: str = "") -> dict[str, Edit]:
    """Installed-package metadata whose ``pytest11`` entry point names a plugin that turns
    every report into a pass (what pytest autoloads from any folder on sys.path)."""
    meta = "Metadata-Version: 2.1\nName: forge\nVersion: 1.0\n"
    folder = f"{where}forge-1.0.dist-info" if kind == "dist-info" else f"{where}forge.egg-info"
    return {
        f"{folder}/{'METADATA' if kind == 'dist-info' else 'PKG-INFO'}": meta,
        f"{folder}/entry_points.txt": "[pytest11]\nforge = forge_plugin\n",
        f"{where}forge_plugin.py": EVIL_PLUGIN,
    }


class Attack(NamedTuple):
    label: str
    edits: dict[str, Edit]
    reason: str  # a fragment of the default reward's reason
    unguarded: float  # the score with protected: [] (1.0: the attack is real)
    snapshot: dict[str, str] = REPO
    ref: dict[str, Any] | None = None  # more reference keys
    value: float = 0.0  # the honest score


PYTHON_M = "python3 -m pytest -rA -p no:cacheprovider tests"
ATTACKS = [
    # plugin autoload off holds alone: these score honestly even with nothing protected
    Attack("a dist-info pytest plugin at the root", plugin_package("dist-info"),
           "added forge-1.0.dist-info/entry_points.txt", 0.0),
    Attack("an egg-info pytest plugin at the root", plugin_package("egg-info"),
           "added forge.egg-info/entry_points.txt", 0.0),
    Attack("a dist-info plugin under python -m pytest (the reference's command)",
           plugin_package("dist-info"), "added forge-1.0.dist-info", 0.0,
           ref={"test_command": PYTHON_M}),
    Attack("a dist-info plugin with the right fix: the fix is graded",
           {**plugin_package("dist-info"), "calc/ops.py": FIXED}, "restored before the tests ran",
           1.0, value=1.0),
    # restored to the snapshot's state: these work where nothing is protected
    Attack("conftest.py forges every report (pytest_runtest_makereport)",
           {"conftest.py": EVIL_PLUGIN}, "added conftest.py", 1.0),
    Attack("a .pth in a site dir the snapshot's conftest adds",
           {"vendor/forge.pth": "import forge_hook\n", "vendor/forge_hook.py": SITECUSTOMIZE},
           "added vendor/forge.pth", 1.0, snapshot=VENDORED),
    Attack("sitecustomize.py forges PASSED lines and exit 0", {"sitecustomize.py": SITECUSTOMIZE},
           "added sitecustomize.py", 1.0,
           ref={"test_command": "PYTHONPATH=. " + PYTHON_M}),
    Attack("pytest.ini addopts loads a forging plugin",
           {"pytest.ini": "[pytest]\naddopts = -p forge_plugin\n", "forge_plugin.py": EVIL_PLUGIN},
           "added pytest.ini", 1.0),
    Attack("pyproject.toml's pytest options load it",
           {"pyproject.toml": '[tool.pytest.ini_options]\naddopts = "-p forge_plugin"\n',
            "forge_plugin.py": EVIL_PLUGIN}, "added pyproject.toml", 1.0),
]  # fmt: skip
BY_LABEL = {attack.label: attack for attack in ATTACKS}


def snapshot_dir(root: Path, files: dict[str, str]) -> Path:
    name = "vendored" if files is VENDORED else "calc"
    path = root / name
    return path if path.exists() else write_tree(path, dict(files))


@pytest.fixture(scope="module")
def snapshots(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("snapshots")


@pytest.fixture(scope="module")
def attack_scores(snapshots: Path) -> dict[tuple[str, str], referee.Score]:
    """Every attack scored by the default, unguarded and reject rewards."""
    rewards = {"default": REWARD, "unguarded": UNGUARDED, "reject": REJECT}
    rollouts = []
    for attack in ATTACKS:
        repo = snapshot_dir(snapshots, attack.snapshot)
        reference = {"snapshot": str(repo), "FAIL_TO_PASS": F2P, "PASS_TO_PASS": P2P}
        rollouts.append(make(make_diff(repo, attack.edits), {**reference, **(attack.ref or {})}))
    scores: dict[tuple[str, str], referee.Score] = {}
    for kind, reward in rewards.items():
        done = referee.score(reward, rollouts, concurrency=2)
        for attack, score in zip(ATTACKS, done, strict=True):
            scores[(attack.label, kind)] = score
    return scores


@pytest.mark.parametrize("label", list(BY_LABEL))
def test_a_forged_pass_scores_the_patch_own_result(
    label: str, attack_scores: dict[tuple[str, str], referee.Score]
) -> None:
    attack, score = BY_LABEL[label], attack_scores[(label, "default")]
    assert score.failure is None, score.failure
    assert score.value == attack.value, score.reason
    assert attack.reason in str(score.reason), score.reason


@pytest.mark.parametrize("label", list(BY_LABEL))
def test_the_attack_with_nothing_protected(
    label: str, attack_scores: dict[tuple[str, str], referee.Score]
) -> None:
    # 1.0 for a no-op patch: the attack is real, and the restore stops it; 0.0: plugin
    # autoload off stops it alone
    score = attack_scores[(label, "unguarded")]
    assert score.value == BY_LABEL[label].unguarded, score.reason


@pytest.mark.parametrize("label", list(BY_LABEL))
def test_reject_mode_refuses_each_attack(
    label: str, attack_scores: dict[tuple[str, str], referee.Score]
) -> None:
    score = attack_scores[(label, "reject")]
    assert score.value == 0.0 and score.failure is None
    assert "rejected" in str(score.reason), score.reason


# --- the pytest boot, run here on the venv's pytest (which has plugins installed) -----------


def run_boot(repo: Path, *args: str) -> str:
    env = {**os.environ, "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}
    env.pop("PYTEST_PLUGINS", None)
    done = subprocess.run(
        [sys.executable, "-c", PYTEST_BOOT, *PYTEST_OPTIONS, *args, "tests"],
        cwd=repo,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    return done.stdout + done.stderr


ANYIO_TEST = "def test_backend(anyio_backend):\n    assert anyio_backend == 'asyncio'\n"


def test_installed_plugins_still_load_and_the_repository_plugins_do_not(tmp_path: Path) -> None:
    pytest.importorskip("anyio")  # its pytest11 plugin gives the anyio_backend fixture
    files: dict[str, str | bytes] = {"tests/test_a.py": ANYIO_TEST}
    files.update({k: v for k, v in plugin_package("dist-info").items() if isinstance(v, str)})
    repo = write_tree(tmp_path / "r", files)
    out = run_boot(repo)
    assert "PASSED tests/test_a.py::test_backend[asyncio]" in out, out
    # and a snapshot's `-p no:NAME` blocks an installed plugin by its entry point's name
    out = run_boot(repo, "-p", "no:anyio")
    assert "fixture 'anyio_backend' not found" in out or "ERROR tests/test_a.py" in out, out


def test_the_repository_plugin_would_load_if_autoload_were_on(tmp_path: Path) -> None:
    # The control: the same tree under plain pytest autoload is forged.
    files = {k: v for k, v in plugin_package("dist-info").items() if isinstance(v, str)}
    repo = write_tree(tmp_path / "r", {**files, "tests/test_a.py": "def test_x():\n    assert 0\n"})
    env = {k: v for k, v in os.environ.items() if k != "PYTEST_DISABLE_PLUGIN_AUTOLOAD"}
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-rA", "-p", "no:cacheprovider", "tests"],
        cwd=repo, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert "PASSED tests/test_a.py::test_x" in done.stdout, done.stdout
    out = run_boot(repo)
    assert "FAILED tests/test_a.py::test_x" in out, out


# --- a patch the sandbox cannot apply, or tests it cannot start: no verdict on the patch ----

NO_TOOLS = "\nos.environ['PATH'] = '/nonexistent'\n"  # git and patch gone from PATH
NO_FDS = """
import resource as _resource
_soft, _hard = _resource.getrlimit(_resource.RLIMIT_NOFILE)
_resource.setrlimit(_resource.RLIMIT_NOFILE, (min(_soft, 256), _hard))
_command = Driver.command


def _starved(self, argv, input_path):  # every descriptor taken when the tool is spawned
    held = []
    try:
        while True:
            held.append(os.open(os.devnull, os.O_RDONLY))
    except OSError:
        pass
    try:
        return _command(self, argv, input_path)
    finally:
        for fd in held:
            os.close(fd)


Driver.command = _starved
"""
NO_PYTHON = "\nsys.executable = '/nonexistent/python3'\n"


@pytest.mark.parametrize(
    ("tail", "message"),
    [
        (NO_TOOLS, "cannot run 'git': [Errno 2] No such file or directory"),
        (NO_FDS, "cannot run 'git': [Errno 24] Too many open files"),
        (NO_PYTHON, "cannot start the tests (/nonexistent/python3)"),
    ],
    ids=["git and patch missing from PATH", "EMFILE when spawning", "no interpreter for pytest"],
)
def test_tools_that_cannot_start_are_a_sandbox_failure(
    snapshots: Path, monkeypatch: pytest.MonkeyPatch, tail: str, message: str
) -> None:
    # The driver's own source, with the environment broken at its end (before `main` runs).
    monkeypatch.setattr(patch_module, "_DRIVER", patch_module._DRIVER + tail)
    repo = snapshot_dir(snapshots, REPO)
    reference = {"snapshot": str(repo), "FAIL_TO_PASS": F2P, "PASS_TO_PASS": P2P}
    score = referee.score(REWARD, [make(make_diff(repo, {"calc/ops.py": FIXED}), reference)])[0]
    assert score.value is None and score.failure is not None, score.reason
    assert score.failure.type == "sandbox"
    assert message in score.failure.message, score.failure.message


# --- snapshot bombs: refused while streaming, having read at most the limit -----------------

BOMB = 160 << 20  # what each bomb expands to: over the 44 MiB a snapshot may pack into


class Zeros(io.RawIOBase):
    """`size` zero bytes, read in chunks (a bomb's content, never held whole)."""

    def __init__(self, size: int) -> None:
        self.left = size

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        n = min(len(buffer), self.left, 1 << 20)
        buffer[:n] = bytes(n)
        self.left -= n
        return n


def gz_tar_bomb(path: Path) -> Path:
    with tarfile.open(path, "w:gz") as tf:
        tf.addfile(tarfile.TarInfo("repo/README.md"), io.BytesIO(b""))
        info = tarfile.TarInfo("repo/data.bin")
        info.size = BOMB
        tf.addfile(info, io.BufferedReader(Zeros(BOMB)))
    return path


def zip_bomb(path: Path) -> Path:
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf, zf.open("data.bin", "w") as fh:
        for _ in range(BOMB >> 20):
            fh.write(bytes(1 << 20))
    return path


def hard_link_bomb(path: Path) -> Path:
    # one 8 MiB file and twenty hard links to it: each link packs as a copy
    with tarfile.open(path, "w:gz") as tf:
        info = tarfile.TarInfo("data.bin")
        info.size = 8 << 20
        tf.addfile(info, io.BytesIO(bytes(info.size)))
        for i in range(20):
            link = tarfile.TarInfo(f"copy{i}.bin")
            link.type, link.linkname = tarfile.LNKTYPE, "data.bin"
            tf.addfile(link)
    return path


def pax_header_bomb(path: Path) -> Path:
    # a PAX header that claims 160 MiB: tarfile reads a header whole
    header = tarfile.TarInfo("././@PaxHeader")
    header.type, header.size = tarfile.XHDTYPE, BOMB
    with gzip.open(path, "wb") as fh:
        fh.write(header.tobuf(format=tarfile.USTAR_FORMAT))
        for _ in range(BOMB >> 20):
            fh.write(bytes(1 << 20))
    return path


def sparse_dir(path: Path) -> Path:
    # a directory snapshot with a 1 GiB file that takes no disk
    write_tree(path, {"README.md": "x\n"})
    with open(path / "data.bin", "wb") as fh:
        fh.truncate(1 << 30)
    return path


@pytest.mark.parametrize(
    "build",
    [
        pytest.param(lambda tmp: gz_tar_bomb(tmp / "bomb.tar.gz"), id="gzip tar bomb"),
        pytest.param(lambda tmp: zip_bomb(tmp / "bomb.zip"), id="zip bomb"),
        pytest.param(lambda tmp: hard_link_bomb(tmp / "links.tgz"), id="hard-link bomb"),
        pytest.param(lambda tmp: pax_header_bomb(tmp / "pax.tar.gz"), id="PAX header bomb"),
        pytest.param(lambda tmp: sparse_dir(tmp / "sparse"), id="sparse file in a folder"),
    ],
)
def test_a_snapshot_bomb_is_refused_before_it_expands(tmp_path: Path, build: Any) -> None:
    path = build(tmp_path)
    if path.is_file():
        assert path.stat().st_size < 2 << 20  # small on disk
    tracemalloc.start()
    try:
        with pytest.raises(NotApplicable) as caught:
            snapshot_tar(path)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 2 * snapshot_module.MAX_SNAPSHOT_BYTES, f"{peak >> 20} MiB held while packing"
    assert "too large for the sandbox" in str(caught.value), caught.value


def test_a_bomb_as_a_reference_is_not_applicable(tmp_path: Path, snapshots: Path) -> None:
    bomb = gz_tar_bomb(tmp_path / "bomb.tar.gz")
    repo = snapshot_dir(snapshots, REPO)
    diff = make_diff(repo, {"calc/ops.py": FIXED})
    ref = {"snapshot": str(bomb), "FAIL_TO_PASS": F2P, "PASS_TO_PASS": P2P}
    score = referee.score(REWARD, [make(diff, ref)])[0]
    assert score.value is None and score.failure is not None
    assert score.failure.type == "not_applicable"
    assert "refused while packing" in score.failure.message, score.failure.message


def test_an_archive_of_too_many_entries_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(snapshot_module, "MAX_SNAPSHOT_ENTRIES", 1000)
    path = tmp_path / "many.tar.gz"
    with tarfile.open(path, "w:gz") as tf:
        for i in range(1500):  # (in .git/: left out, and counted all the same)
            tf.addfile(tarfile.TarInfo(f"repo/.git/objects/{i}"), io.BytesIO(b""))
    with pytest.raises(NotApplicable, match="over 1000 entries"):
        snapshot_tar(path)


# --- host paths: snapshots confined to snapshot_root -----------------------------------------


@pytest.fixture
def confined(tmp_path: Path, snapshots: Path) -> tuple[Path, Path]:
    """(root, outside): a root holding the calc snapshot and a link out, and a folder beside
    it that holds a secret snapshot."""
    root, outside = tmp_path / "root", tmp_path / "outside"
    write_tree(root / "calc", dict(REPO))
    write_tree(outside / "secret", dict(REPO))
    (root / "escape").symlink_to(outside / "secret")
    (root / "up").symlink_to(outside)
    return root, outside


@pytest.mark.parametrize(
    ("snapshot", "message"),
    [
        ("../outside/secret", "has a '..' component"),
        ("calc/../../outside/secret", "has a '..' component"),
        ("{outside}/secret", "outside snapshot_root"),  # absolute, elsewhere
        ("escape", "outside snapshot_root"),  # a link in the root to a folder outside
        ("up/secret", "outside snapshot_root"),  # a link on the way
        ("/etc", "outside snapshot_root"),
    ],
)
def test_a_snapshot_outside_snapshot_root_is_not_applicable(
    confined: tuple[Path, Path], snapshot: str, message: str
) -> None:
    root, outside = confined
    reward = PatchTests(timeout=60, sandbox=SANDBOX, snapshot_root=str(root))
    ref = {"snapshot": snapshot.format(outside=outside), "FAIL_TO_PASS": F2P}
    diff = make_diff(root / "calc", {"calc/ops.py": FIXED})
    score = referee.score(reward, [make(diff, ref)])[0]
    assert score.value is None and score.failure is not None, score.reason
    assert score.failure.type == "not_applicable"
    assert message in score.failure.message, score.failure.message
    # unconfined, the same reference opens the folder (what serve must not allow untrusted)
    if not snapshot.startswith("/etc"):
        open_reward = PatchTests(timeout=60, sandbox=SANDBOX)
        if not snapshot.startswith("{"):
            ref = {**ref, "snapshot": str(root / snapshot)}
        opened = referee.score(open_reward, [make(diff, {**ref, "PASS_TO_PASS": P2P})])[0]
        assert opened.value == 1.0, (opened.reason, opened.failure)


@pytest.mark.parametrize("snapshot", ["calc", "./calc", "{root}/calc"])
def test_a_snapshot_inside_snapshot_root_is_graded(
    confined: tuple[Path, Path], snapshot: str
) -> None:
    root, _ = confined
    reward = PatchTests(timeout=60, sandbox=SANDBOX, snapshot_root=str(root))
    ref = {"snapshot": snapshot.format(root=root), "FAIL_TO_PASS": F2P, "PASS_TO_PASS": P2P}
    diff = make_diff(root / "calc", {"calc/ops.py": FIXED})
    score = referee.score(reward, [make(diff, ref)])[0]
    assert score.value == 1.0, (score.reason, score.failure)


def test_reference_powers_name_what_a_reference_can_do_on_the_host(tmp_path: Path) -> None:
    free = PatchTests(sandbox=SANDBOX)
    assert free.reference_powers() == (
        "opens the snapshot path each reference names, anywhere on the host",
    )
    assert PatchTests(sandbox=SANDBOX, snapshot_root=str(tmp_path)).reference_powers() == ()
    unisolated = PatchTests(sandbox={"isolation": "none"}, snapshot_root=str(tmp_path))
    assert [p for p in unisolated.reference_powers() if "test_command" in p]
    spec = {"combine": "weighted", "components": {"patch": {"type": "patch_tests"}}}
    assert reference_powers(referee.load(spec)) == [
        ("patch", "opens the snapshot path each reference names, anywhere on the host")
    ]
