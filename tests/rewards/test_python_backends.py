"""A ``type: python`` spec goes wherever a spec goes: `referee score`, `referee serve`, TRL, verl,
OpenRLHF and Ray give the number the Python API gives. A request to the server cannot make it
load code: only the spec names code."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

import referee
from referee import Rollout
from tests.support.ray_cluster import score_on_ray
from tests.support.serving import Server, request

# A user's file beside the spec, with a sync check, an async one and a class of its own.
REWARDS = '''
import asyncio
from dataclasses import dataclass

import referee


def matches(rollout, *, strip=True):
    """1 where the completion is the reference."""
    text = rollout.completion_text.strip() if strip else rollout.completion_text
    return text == str(rollout.reference)


async def brevity(rollout):
    await asyncio.sleep(0)
    return referee.Score(value=1 / (1 + len(rollout.completion_text)),
                         components={"chars": float(len(rollout.completion_text))})


def nothing(rollout):
    """A check that cannot score: None, which is never a 0."""
    return None


@dataclass(kw_only=True)
class Mentions(referee.CheckReward):
    """1 where the completion mentions `word`."""

    word: str
    name: str = "mentions"

    def check(self, rollout):
        return self.word in rollout.completion_text
'''

SPEC = """\
name: mine
combine: weighted
components:
  match: {type: python, function: rewards.py:matches, options: {strip: true}, weight: 0.6}
  brevity: {type: python, function: rewards.py:brevity, weight: 0.2}
  mentions: {type: python, function: rewards.py:Mentions, options: {word: "4"}, weight: 0.2}
"""

ROWS = [  # prompt, completion, reference
    ("2+2?", "4", "4"),
    ("2+2?", " 5 ", "4"),
    ("3+1?", "It is 4, I think", "4"),
]


@pytest.fixture
def spec_path(tmp_path: Path) -> Path:
    folder = tmp_path / "project"
    folder.mkdir()
    (folder / "rewards.py").write_text(REWARDS)
    (folder / "spec.yaml").write_text(SPEC)
    return folder / "spec.yaml"


def api_values(spec_path: Path) -> list[float | None]:
    rollouts = [Rollout(prompt=p, completion=c, reference=r) for p, c, r in ROWS]
    return [s.value for s in referee.score(referee.load(spec_path), rollouts)]


def test_the_api_values(spec_path: Path) -> None:
    values = api_values(spec_path)
    assert values == pytest.approx([0.6 + 0.2 / 2 + 0.2, 0.2 / 4, 0.2 / 17 + 0.2])


def test_referee_score_from_another_directory(spec_path: Path, tmp_path: Path) -> None:
    rows = tmp_path / "rollouts.jsonl"
    rows.write_text("".join(
        json.dumps({"id": str(i), "prompt": p, "completion": c, "reference": r}) + "\n"
        for i, (p, c, r) in enumerate(ROWS)
    ))  # fmt: skip
    out = tmp_path / "scored.jsonl"
    done = subprocess.run(
        [sys.executable, "-m", "referee.cli", "score", str(rows), "--spec", str(spec_path),
         "-o", str(out), "-q"],
        cwd=tmp_path, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    scored = [json.loads(line) for line in out.read_text().splitlines()]
    assert [row["reward"] for row in scored] == api_values(spec_path)
    assert scored[0]["components"]["brevity.chars"] == 1.0


def test_referee_serve_scores_it_and_a_request_cannot_choose_code(
    spec_path: Path, tmp_path: Path
) -> None:
    # A file that would say so if anything imported it.
    evil = tmp_path / "evil.py"
    marker = tmp_path / "evil-ran"
    evil.write_text(f"open({str(marker)!r}, 'w').close()\n\ndef boom(rollout):\n    return 1.0\n")
    chosen = {"type": "python", "function": f"{evil}:boom"}
    server = Server(spec_path)
    try:
        rollouts = [{"prompt": p, "completion": c, "reference": r} for p, c, r in ROWS]
        status, body = request(server.url + "/score", {"rollouts": rollouts})
        assert status == 200, body
        assert [s["reward"] for s in body["scores"]] == api_values(spec_path)
        # A body naming code, as a spec, a reward, an option: refused, never loaded.
        for key in ("spec", "reward", "function", "options"):
            status, body = request(server.url + "/score", {"rollouts": rollouts, key: chosen})
            assert status == 400 and "cannot choose" in body["error"]["message"], body
        # In a rollout, it is data: the reference is compared as text, not loaded.
        hostile = [{"completion": "4", "reference": chosen, "metadata": {"spec": chosen}}]
        status, body = request(server.url + "/score", {"rollouts": hostile})
        assert status == 200 and body["scores"][0]["components"]["match"] == 0.0, body
    finally:
        assert server.stop() == 0
    assert not marker.exists()


def test_trl_reward_function(spec_path: Path) -> None:
    pytest.importorskip("trl", reason="the trl extra is not installed")
    from referee.backends.trl import reward_funcs

    [fn] = reward_funcs(str(spec_path))
    values = fn(prompts=[p for p, _, _ in ROWS], completions=[c for _, c, _ in ROWS],
                completion_ids=None, reference=[r for *_, r in ROWS])  # fmt: skip
    if asyncio.iscoroutine(values):  # the spec has an async part: TRL awaits it
        values = asyncio.run(values)
    assert values == api_values(spec_path)
    assert fn.__name__ == "mine"


def test_verl_compute_score(spec_path: Path) -> None:
    from referee.backends import verl as rv

    got = [rv.compute_score("src", c, r, None, spec=str(spec_path))["score"] for _, c, r in ROWS]
    assert got == api_values(spec_path)
    one = rv.compute_score("src", "4", "4", None, spec=str(spec_path))
    assert one["referee/match"] == 1.0 and one["referee_failed"] == 0.0


def test_openrlhf_reward_func(spec_path: Path) -> None:
    from referee.backends.openrlhf import RewardFunc

    func = RewardFunc(str(spec_path))
    answer = func([p + c for p, c, _ in ROWS], [p for p, _, _ in ROWS], [r for *_, r in ROWS])
    assert answer["rewards"] == pytest.approx(api_values(spec_path))


@pytest.fixture(scope="module")
def ray_here() -> Iterator[None]:
    ray = pytest.importorskip("ray", reason="ray is not installed (pip install 'referee[ray]')")
    started = not ray.is_initialized()
    if started:
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield
    if started:
        ray.shutdown()


def test_ray_actors_load_the_file_where_they_run(spec_path: Path, ray_here: None) -> None:
    rollouts = [Rollout(prompt=p, completion=c, reference=r) for p, c, r in ROWS]
    local = referee.score(referee.load(spec_path), rollouts)
    remote = score_on_ray(referee.load(spec_path), rollouts, workers=2)
    assert [s.to_dict() for s in remote] == [s.to_dict() for s in local]


def test_no_entry_point_turns_a_failure_into_a_value(spec_path: Path, tmp_path: Path) -> None:
    """A component of yours that cannot score fails the total everywhere (on_failure: fail):
    None in Python, on the CLI and over HTTP; None to TRL (NaN, masked); verl's fixed
    failure value with referee_failed set; OpenRLHF's failure value. Never the other
    components' weighted sum, as if it were absent."""
    failing = spec_path.with_name("failing.yaml")
    failing.write_text(SPEC.replace("rewards.py:matches, options: {strip: true}",
                                    "rewards.py:nothing"))  # fmt: skip
    assert api_values(failing) == [None, None, None]
    rows = tmp_path / "rollouts.jsonl"
    rows.write_text(json.dumps({"completion": "4", "reference": "4"}) + "\n")
    done = subprocess.run(
        [sys.executable, "-m", "referee.cli", "score", str(rows), "--spec", str(failing), "-q"],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    # every row failed: the rows are written, and the exit status and stderr say so
    assert done.returncode == 1, done.stderr[-3000:]
    assert "every row failed (1)" in done.stderr and "no_score" in done.stderr, done.stderr
    row = json.loads(done.stdout)
    assert row["reward"] is None and row["failure"]["type"] == "no_score"
    assert "match" in row["failure"]["message"]
    pytest.importorskip("trl", reason="the trl extra is not installed")
    from referee.backends import verl as rv
    from referee.backends.openrlhf import RewardFunc
    from referee.backends.trl import reward_funcs

    [fn] = reward_funcs(str(failing))
    values = fn(prompts=["p"], completions=["4"], completion_ids=None, reference=["4"])
    values = asyncio.run(values) if asyncio.iscoroutine(values) else values
    assert values == [None]
    verl = rv.compute_score("src", "4", "4", None, spec=str(failing), failure_value=-1.0)
    assert verl["score"] == -1.0 and verl["referee_failed"] == 1.0
    answer = RewardFunc(str(failing), failure_value=-1.0)(["p4"], ["p"], ["4"])
    assert answer["rewards"] == [-1.0]
    server = Server(failing)
    try:
        status, body = request(
            server.url + "/score", {"rollouts": [{"completion": "4", "reference": "4"}]}
        )
    finally:
        assert server.stop() == 0
    assert status == 200 and body["scores"][0]["reward"] is None, body
