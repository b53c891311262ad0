"""The Open Reward Standard, driven by the ``openreward`` SDK's own client: the reward an ORS
trainer reads from ``submit_answer`` is the number ``POST /score`` gives the same rollout.

The SDK's environment client (``EnvironmentsAPI``, as its local use and TRL's OpenReward
integration call it) talks to a real `referee serve` on loopback with an
`OpenRewardEnvironment` mounted; what the SDK cannot send (hostile bodies, unknown sessions,
requests without the token) goes as raw HTTP.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip(
    "aiohttp", reason="the serve extra is not installed (pip install 'referee[serve]')"
)

import referee
from referee import CheckReward, Rollout, Score
from referee.backends.contract import WITHHELD
from referee.backends.ors import OpenRewardEnvironment, TaskSet, environment_name
from referee.backends.ors.wire import _pieces, dumps, tool_result
from referee.backends.service import Service
from referee.errors import RolloutError, SpecError
from referee.reward import GroupRewardBase
from tests.support.ors import TASKS, events, http, sdk
from tests.support.serving import SPEC, Server, post, running

TOKEN = "ors-test-token-0123456789"
SID = {"X-Session-ID": "s-1"}


@dataclass(kw_only=True)
class Slow(CheckReward):
    """1.0 for the answer "yes", else 0.0, after `delay` seconds; its reason `reason_chars`
    long, and `parts` components (a long result, to cross the SSE chunks)."""

    delay: float = 0.0
    reason_chars: int = 10
    parts: int = 0
    name: str = "slow"
    run_in = "inline"

    def check(self, rollout: Rollout) -> Score:
        time.sleep(self.delay)
        reason = ("ok " * self.reason_chars)[: self.reason_chars]
        parts = {f"part {i:05d}": 0.5 for i in range(self.parts)}
        return Score(value=float(rollout.completion_text == "yes"), reason=reason,
                     components=parts)  # fmt: skip


@pytest.fixture(scope="module")
def client() -> Any:
    return sdk()


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    with running(referee.load(SPEC), mounts=[OpenRewardEnvironment(TASKS)]) as url:
        yield url


@pytest.fixture(scope="module")
def api(client: Any, server: str) -> Iterator[Any]:
    environments = client.EnvironmentsAPI(base_url=server, api_key="")
    yield environments
    environments.close()


@pytest.fixture(scope="module")
def env(api: Any, server: str) -> Any:
    # The SDK's local use: a name and the server's URL, no variant, so the default
    # environment's root paths (/splits, /tasks, ...) and the reference server's redirects.
    return api.get("answer", base_url=server)


# --- listing ----------------------------------------------------------------------------------


def test_the_sdk_lists_splits_tasks_and_tools(env: Any, server: str) -> None:
    assert env.list_splits() == ["train", "test"]

    def ids(tasks: list[Any]) -> list[str]:
        return [t.task_spec["id"] for t in tasks]

    assert ids(env.list_tasks("train")) == ["add", "mul", "7"]  # an integer id reads as text
    assert ids(env.list_tasks("test")) == ["t1"]
    assert env.num_tasks("train") == 3
    assert env.get_task("train", 0).task_spec == {"id": "add"}
    assert env.get_task("train", -1).task_spec == {"id": "7"}  # Python's indexing
    assert env.get_task("train", 0).environment_name == "answer"
    assert ids(env.get_task_range("train", 1)) == ["mul", "7"]
    assert ids(env.get_task_range("train", -2, None)) == ["mul", "7"]
    assert ids(env.get_task_range("train", 5, 2)) == []  # clamped, empty
    assert ids(env.get_task_range("train", -100, 100)) == ["add", "mul", "7"]
    (tool,) = env.list_tools()
    assert tool.name == "submit_answer"
    assert tool.input_schema["required"] == ["answer"]
    assert env.terminal_tool() is None and env.supports_score_group() is False
    status, _, body = http(server, "GET", "/list_environments")
    assert (status, json.loads(body)) == (200, ["answer"])
    status, _, body = http(server, "GET", "/answer/splits")
    assert json.loads(body) == [
        {"name": "train", "type": "train"},
        {"name": "test", "type": "test"},
    ]


def test_an_explicit_variant_and_the_root_paths_answer_alike(api: Any, server: str) -> None:
    named = api.get("answer", variant="answer", base_url=server)  # /answer/tasks, no redirect
    assert [t.task_spec for t in named.list_tasks("test")] == [{"id": "t1"}]
    # The root paths redirect as the reference server's do (308 keeps the method and body).
    status, headers, _ = http(server, "POST", "/tasks?x=1", {"split": "test"})
    assert (status, headers["Location"]) == (308, "/answer/tasks?x=1")
    status, headers, _ = http(server, "GET", "/prompt")
    assert (status, headers["Location"]) == (308, "/answer/prompt")
    # Names are matched case-blind, as ORS does; another name is a 404, not a redirect.
    assert http(server, "POST", "/ANSWER/num_tasks", {"split": "train"})[0] == 200
    status, _, body = http(server, "POST", "/other/tasks", {"split": "train"})
    assert status == 404 and "unknown environment 'other'" in body.decode()
    with pytest.raises(Exception, match="404"):
        api.get("other", variant="other", base_url=server).list_tasks("train")


# --- sessions and the tool --------------------------------------------------------------------

ANSWERS = [
    pytest.param("add", "\\boxed{4}", id="right"),
    pytest.param("add", "It is \\boxed{5}, " + "x" * 40, id="wrong-and-long"),
    pytest.param("mul", "\\boxed{9}", id="chat-prompt"),
    pytest.param("7", "\\boxed{7}", id="integer-id"),
    pytest.param("add", "no idea", id="unscorable"),  # no boxed answer: a failure, not a 0
]


@pytest.mark.parametrize(("task_id", "answer"), ANSWERS)
def test_the_reward_is_the_number_score_gives(
    env: Any, server: str, task_id: str, answer: str
) -> None:
    (task,) = [t for t in env.list_tasks("train") if t.task_spec["id"] == task_id]
    with env.session(task=task) as session:
        (prompt_block,) = session.get_prompt()[-1:]
        tools = session.list_tools(format="openai")
        assert [t["name"] for t in tools] == ["submit_answer"]
        out = session.call_tool("submit_answer", {"answer": answer})
    row = next(r for r in TASKS if str(r["id"]) == task_id)
    rollout = {"id": task_id, "prompt": row["prompt"], "completion": answer,
               "reference": row["reference"]}  # fmt: skip
    (want,) = post(f"{server}/score", {"rollouts": [rollout]})["scores"]
    assert out.finished is True
    assert out.reward == want["reward"]  # the same number, or the same null
    # The whole score: components, failure kind and blame; its texts withheld (they can quote
    # the task's reference, the server's secret: issue 44).
    assert out.metadata == withheld_view(want)
    assert [b.text for b in out.blocks] == ["Your answer was submitted."]
    if task_id == "mul":
        assert prompt_block.text == "What is 3*3?"
    if answer == "no idea":
        assert out.reward is None and out.metadata["failure"]["type"] == "not_applicable"


def withheld_view(item: dict[str, Any]) -> dict[str, Any]:
    """`/score`'s item as ORS's metadata shows it: reason and failure message withheld."""
    out = dict(item)
    if out.get("reason"):
        out["reason"] = WITHHELD
    if out.get("failure"):
        out["failure"] = {**out["failure"], "message": WITHHELD}
    return out


SECRET_TASKS = [{"id": "s", "prompt": "The code?", "reference": "SECRET-7731-ALPHA"}]


def test_no_text_that_quotes_the_secret_reference_leaves_the_server(
    caplog: pytest.LogCaptureFixture,
) -> None:
    environment = OpenRewardEnvironment(SECRET_TASKS, env_name="code")
    spec = referee.load({"type": "exact_match"})
    with (
        caplog.at_level("INFO", logger="referee.server"),
        running(spec, mounts=[environment]) as url,
    ):
        http(url, "POST", "/create", {"split": "train", "index": 0}, headers=SID)
        body = {"name": "submit_answer", "input": {"answer": "no idea"}}
        stream = http(url, "POST", "/code/call", body, headers=SID)[2]
    data = "".join(d for e, d in events(stream) if e in ("chunk", "end"))
    assert "SECRET-7731" not in data  # it was in the reason: "'no idea' != 'SECRET-...'"
    result = json.loads(data)["output"]
    assert result["reward"] == 0.0 and result["metadata"]["reason"] == WITHHELD
    assert "SECRET-7731-ALPHA" in caplog.text  # the server's own log keeps the whole reason


def test_a_session_by_split_and_index_reads_its_prompt_as_messages(env: Any) -> None:
    with env.session(split="train", index=1) as session:
        messages = session.get_messages()
        assert [(m.role, m.blocks[0].text) for m in messages] == [
            ("system", "Be brief."), ("user", "What is 3*3?")
        ]  # fmt: skip
        blocks = [b.text for b in session.get_prompt()]
        assert blocks == ["[system]", "Be brief.", "[user]", "What is 3*3?"]
        assert session.call_tool("submit_answer", {"answer": "\\boxed{9}"}).reward == 0.8


def test_refused_calls_then_one_answer_then_the_episode_is_over(client: Any, env: Any) -> None:
    with env.session(split="train", index=0) as session:
        # An unknown tool or bad input is refused, and the episode goes on.
        with pytest.raises(client.ToolCallError) as unknown:
            session.call_tool("shell", {"cmd": "ls"})
        assert unknown.value.reason == "not_found"
        for bad in ({}, {"answer": 4}, {"answer": "4", "extra": 1}):
            with pytest.raises(client.ToolCallError) as invalid:
                session.call_tool("submit_answer", bad)
            assert invalid.value.reason == "input_validation"
        assert session.call_tool("submit_answer", {"answer": "\\boxed{4}"}).reward == 0.8
        with pytest.raises(client.ToolCallError) as again:
            session.call_tool("submit_answer", {"answer": "\\boxed{4}"})
        assert again.value.reason == "episode_finished"


def test_concurrent_calls_score_once() -> None:
    environment = OpenRewardEnvironment(TASKS, env_name="answer")
    with running(Slow(delay=0.3), mounts=[environment]) as url:
        assert http(url, "POST", "/create", {"split": "train", "index": 0}, headers=SID)[0] == 200
        results: list[list[tuple[str, str]]] = []

        def call() -> None:
            body = {"name": "submit_answer", "input": {"answer": "yes"}}
            results.append(events(http(url, "POST", "/answer/call", body, headers=SID)[2]))

        threads = [threading.Thread(target=call) for _ in range(3)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    outputs = [json.loads(stream[-1][1]) for stream in results]
    assert sorted(o["ok"] for o in outputs) == [False, False, True]
    assert {o["reason"] for o in outputs if not o["ok"]} == {"episode_finished"}
    assert [o["output"]["reward"] for o in outputs if o["ok"]] == [1.0]


def test_a_lost_stream_is_resumed_by_its_task_id_and_long_results_come_in_chunks() -> None:
    environment = OpenRewardEnvironment(TASKS, env_name="answer", ping_interval=0.05)
    with running(Slow(delay=0.3, parts=2_000), mounts=[environment]) as url:
        http(url, "POST", "/create", {"split": "train", "index": 0}, headers=SID)
        body = {"name": "submit_answer", "input": {"answer": "yes"}}
        stream = http(url, "POST", "/answer/call", body, headers=SID)[2]
        assert b": ping" in stream  # keep-alive comments while it is scored
        got = events(stream)
        assert got[0][0] == "task_id" and got[-1][0] == "end" and len(got) > 3
        first = json.loads("".join(data for kind, data in got[1:]))
        assert len(first["output"]["metadata"]["components"]) == 2_000
        # The client lost it: posting its task id streams the same result, not a new call.
        again = events(http(url, "POST", "/answer/call", {**body, "task_id": got[0][1]},
                            headers=SID)[2])  # fmt: skip
        assert json.loads("".join(data for _, data in again[1:])) == first
        unknown = events(http(url, "POST", "/answer/call", {**body, "task_id": "nope"},
                              headers=SID)[2])  # fmt: skip
        assert unknown == [("error", "unknown task_id")]


def test_sessions_are_closed_and_then_unknown(client: Any, env: Any, server: str) -> None:
    with env.session(split="test", index=0) as session:
        sid = session.sid
        assert http(server, "POST", "/ping", headers={"X-Session-ID": sid})[0] == 200
    # The context manager deleted it: the server holds nothing for it.
    status, _, body = http(server, "POST", "/ping", headers={"X-Session-ID": sid})
    assert status == 404 and b"unknown_session" in body
    status, _, body = http(server, "GET", "/answer/prompt", headers={"X-Session-ID": sid})
    assert status == 404


def test_the_reaper_closes_idle_sessions() -> None:
    environment = OpenRewardEnvironment(TASKS, env_name="answer", session_timeout=0.4)
    with running(Slow(), mounts=[environment]) as url:
        for sid in ("idle", "kept"):
            create = {"split": "train", "index": 0}
            assert http(url, "POST", "/create", create, headers={"X-Session-ID": sid})[0] == 200
        deadline = time.monotonic() + 1.5
        while time.monotonic() < deadline:  # one is pinged, as the SDK does; one is not
            assert http(url, "POST", "/ping", headers={"X-Session-ID": "kept"})[0] == 200
            time.sleep(0.1)
        assert http(url, "POST", "/ping", headers={"X-Session-ID": "idle"})[0] == 404
        assert http(url, "GET", "/answer/task_tools", headers={"X-Session-ID": "kept"})[0] == 200
        assert len(environment.sessions) == 1


def test_past_the_cap_a_session_is_refused_until_one_closes() -> None:
    environment = OpenRewardEnvironment(TASKS, env_name="answer", max_sessions=2)
    create = {"split": "train", "index": 0}
    with running(Slow(), mounts=[environment]) as url:
        for sid in ("a", "b"):
            assert http(url, "POST", "/create", create, headers={"X-Session-ID": sid})[0] == 200
        status, headers, body = http(url, "POST", "/create", create, headers={"X-Session-ID": "c"})
        assert (status, headers["Retry-After"]) == (503, "1")
        assert "max_sessions" in json.loads(body)["error"]["message"]
        assert http(url, "POST", "/delete", headers={"X-Session-ID": "a"})[0] == 200
        assert http(url, "POST", "/create", create, headers={"X-Session-ID": "c"})[0] == 200
        # /create_session holds nothing: the cap counts sessions with a task.
        for _ in range(5):
            assert http(url, "POST", "/create_session")[0] == 200
        assert len(environment.sessions) == 2


def test_every_route_needs_the_token_and_the_sdk_sends_it_in_its_url(client: Any) -> None:
    environment = OpenRewardEnvironment(TASKS, env_name="answer")
    with running(Slow(), token=TOKEN, mounts=[environment]) as url:
        routes = [("GET", "/list_environments"), ("POST", "/create_session"),
                  ("POST", "/create"), ("POST", "/ping"), ("POST", "/delete"),
                  ("GET", "/answer/splits"), ("POST", "/answer/tasks"), ("POST", "/tasks"),
                  ("GET", "/answer/prompt"), ("GET", "/answer/tools"),
                  ("POST", "/answer/call")]  # fmt: skip
        for method, path in routes:
            status, _, body = http(url, method, path, {"split": "train"}, headers=SID)
            assert (status, json.loads(body)["error"]["type"]) == (401, "unauthorized"), path
        # The SDK sends a URL's credentials as basic authentication: the token is the password.
        authed = url.replace("http://", f"http://ors:{TOKEN}@")
        environments = client.EnvironmentsAPI(base_url=authed, api_key="")
        try:
            env = environments.get("answer", base_url=authed)
            with env.session(task=env.list_tasks("train")[0]) as session:
                assert session.call_tool("submit_answer", {"answer": "yes"}).reward == 1.0
        finally:
            environments.close()
        # Or given as the SDK's api_key, which it sends as X-API-Key; a wrong one is refused.
        for key, want in ((TOKEN, 1.0), ("x" * len(TOKEN), None)):
            environments = client.EnvironmentsAPI(base_url=url, api_key=key)
            try:
                env = environments.get("answer", base_url=url)
                if want is None:
                    with pytest.raises(Exception, match=r"401|nauthori"):
                        env.list_tasks("train")
                    continue
                with env.session(task=env.list_tasks("train")[0]) as session:
                    assert session.call_tool("submit_answer", {"answer": "yes"}).reward == want
            finally:
                environments.close()


# --- hostile bodies ---------------------------------------------------------------------------

HUGE = "x" * 1_000_000
HOSTILE: list[tuple[Any, ...]] = [
    # (method, path, headers, body, status, error type)
    ("POST", "/answer/tasks", {}, {"split": 1}, 400, "invalid_body"),  # wrong type
    ("POST", "/answer/tasks", {}, {"split": HUGE}, 400, "invalid_split"),  # huge, unknown
    ("POST", "/answer/tasks", {}, {"split": "train", "spec": "x"}, 400, "invalid_body"),
    ("POST", "/answer/tasks", {}, [1, 2], 400, "invalid_body"),  # not an object
    ("POST", "/answer/task", {}, {"split": "train", "index": "0"}, 400, "invalid_body"),
    ("POST", "/answer/task", {}, {"split": "train", "index": True}, 400, "invalid_body"),
    ("POST", "/answer/task", {}, {"split": "train", "index": 3}, 400, "invalid_index"),
    ("POST", "/answer/task", {}, {"split": "train", "index": -4}, 400, "invalid_index"),
    ("POST", "/answer/task", {}, {"split": "train", "index": 10**40}, 400, "invalid_index"),
    ("POST", "/answer/task_range", {}, {"split": "train", "start": 1.5}, 400, "invalid_body"),
    ("POST", "/create", {}, {"split": "train", "index": 0}, 400, "missing_session"),
    ("POST", "/create", {"X-Session-ID": "s" * 300}, {"split": "train", "index": 0}, 400,
     "invalid_session"),
    ("POST", "/create", SID, {"split": "train"}, 400, "invalid_body"),  # index missing
    ("POST", "/create", SID, {"split": "train", "index": 0, "task_spec": {"id": "add"}}, 400,
     "invalid_body"),  # both
    ("POST", "/create", SID, {"task_spec": {"id": "nope"}}, 400, "invalid_task_spec"),
    ("POST", "/create", SID, {"task_spec": {"id": True}}, 400, "invalid_task_spec"),
    # A client cannot bring its own reference: a task spec names one of the server's tasks.
    ("POST", "/create", SID, {"task_spec": {"id": "add", "reference": "5"}}, 400,
     "invalid_task_spec"),
    ("POST", "/create", SID, {"task_spec": "add"}, 400, "invalid_task_spec"),
    ("POST", "/create", SID, {"env_name": "other", "split": "train", "index": 0}, 404,
     "unknown_environment"),
    ("POST", "/create", SID, {"toolset_name": "codex", "split": "train", "index": 0}, 400,
     "invalid_body"),
    ("POST", "/create", SID, {"split": "train", "index": 0, "reward": "x"}, 400, "invalid_body"),
    ("POST", "/ping", {"X-Session-ID": "never"}, None, 404, "unknown_session"),
    ("GET", "/answer/prompt", {"X-Session-ID": "never"}, None, 404, "unknown_session"),
    ("GET", "/answer/task_tools", {}, None, 400, "missing_session"),
    ("POST", "/answer/call", {"X-Session-ID": "never"},
     {"name": "submit_answer", "input": {"answer": "4"}}, 404, "unknown_session"),
    ("GET", "/nope/tools", {}, None, 404, "unknown_environment"),
]  # fmt: skip


@pytest.mark.parametrize(("method", "path", "headers", "body", "status", "kind"), HOSTILE)
def test_hostile_requests_are_refused_with_a_reason(
    server: str, method: str, path: str, headers: dict[str, str], body: Any, status: int,
    kind: str,
) -> None:  # fmt: skip
    got, _, answer = http(server, method, path, body, headers=headers)
    error = json.loads(answer)["error"]
    assert (got, error["type"]) == (status, kind), error
    assert len(error["message"]) < 1000  # a huge value is not echoed back


def test_hostile_call_bodies_in_an_open_session(server: str) -> None:
    headers = {"X-Session-ID": "hostile-call"}
    assert (
        http(server, "POST", "/create", {"split": "train", "index": 0}, headers=headers)[0] == 200
    )
    for body in ({"name": 1, "input": {}}, {"name": "submit_answer", "input": "4"},
                 {"name": "submit_answer", "input": {}, "task_id": 3},
                 {"name": "submit_answer", "input": {}, "secret": 1}):  # fmt: skip
        status, _, answer = http(server, "POST", "/answer/call", body, headers=headers)
        assert (status, json.loads(answer)["error"]["type"]) == (400, "invalid_body"), body
    status, _, _ = http(server, "POST", "/answer/call", raw=b"{not json", headers=headers)
    assert status == 400
    # A huge answer is scored like any other (within the body limit): no box, no number.
    huge = {"name": "submit_answer", "input": {"answer": HUGE}}
    output = json.loads(
        events(http(server, "POST", "/answer/call", huge, headers=headers)[2])[-1][1]
    )
    assert output["output"]["reward"] is None and output["output"]["finished"] is True


# --- task files -------------------------------------------------------------------------------

BAD_FILES = [
    # (lines, the line named, what the message says)
    (['{"id": "a", "prompt": "p"}', "{not json"], 2, "not valid JSON"),
    (['{"prompt": "p", "reference": 1}'], 1, "no 'id'"),
    (['{"id": "a", "reference": 1}'], 1, "no 'prompt'"),
    (['{"id": "a", "prompt": "p"}', "", '{"id": "a", "prompt": "q"}'], 3,
     "duplicate id 'a' (first at line 1)"),
    (['{"id": 1, "prompt": "p"}', '{"id": "1", "prompt": "q"}'], 2, "duplicate id '1'"),
    (['{"id": "a", "prompt": "p", "answer": "4"}'], 1, "unknown key 'answer'"),
    (['{"id": "a", "prompt": 5}'], 1, "field prompt"),
    (['{"id": "a", "prompt": [{"role": "robot", "content": "hi"}]}'], 1, "field prompt"),
    (['{"id": true, "prompt": "p"}'], 1, "'id' must be a string or an integer"),
    (['{"id": "a", "prompt": "p", "split": ""}'], 1, "'split' must be a non-empty string"),
    (['["a", "p"]'], 1, "must be a JSON object"),
]  # fmt: skip


@pytest.mark.parametrize(("lines", "line", "says"), BAD_FILES)
def test_a_bad_task_file_is_refused_naming_its_line(
    tmp_path: Path, lines: list[str], line: int, says: str
) -> None:
    path = tmp_path / "tasks.jsonl"
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(RolloutError) as error:
        OpenRewardEnvironment(path)
    assert str(error.value).startswith(f"{path}:{line}: ")
    assert says in str(error.value)


def test_an_empty_or_missing_task_file_is_refused(tmp_path: Path) -> None:
    (tmp_path / "empty.jsonl").write_text("\n\n")
    with pytest.raises(RolloutError, match="no tasks"):
        OpenRewardEnvironment(tmp_path / "empty.jsonl")
    with pytest.raises(RolloutError, match="cannot read the task file"):
        OpenRewardEnvironment(str(tmp_path / "missing.jsonl"))


def test_a_task_file_reads_as_rows_do(tmp_path: Path) -> None:
    path = tmp_path / "tasks.jsonl"
    path.write_text("\n".join(json.dumps(row) for row in TASKS))
    from_file, from_rows = TaskSet.read(path), TaskSet.of(TASKS)
    assert from_file.splits == from_rows.splits and list(from_file.splits) == ["train", "test"]


@pytest.mark.parametrize(
    "options",
    [
        {"env_name": "Has Spaces"},  # not a path segment
        {"env_name": ""},
        {"session_timeout": 0},
        {"session_timeout": math.nan},
        {"max_sessions": 0},
        {"max_sessions": True},
    ],
)
def test_bad_options_are_refused_at_construction(options: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match="OpenRewardEnvironment"):
        OpenRewardEnvironment(TASKS, **options)


def test_the_default_name_is_the_rewards_made_safe() -> None:
    assert environment_name("answer") == "answer"
    assert environment_name("My Reward / v2") == "my-reward-v2"
    assert environment_name("???") == "referee"
    assert OpenRewardEnvironment(TASKS, env_name="MyEnv").env_name == "myenv"  # case-blind


# --- the wire ---------------------------------------------------------------------------------


def test_no_nan_reaches_the_wire() -> None:
    task = TaskSet.of(TASKS).by_id["add"]
    score = Score(value=math.nan, components={"a": math.inf, "b": None, "c": 0.5})
    result = tool_result(task, score)
    assert result["output"]["reward"] is None
    assert json.loads(dumps(result))["output"]["metadata"]["components"] == {
        "a": None, "b": None, "c": 0.5
    }  # fmt: skip


@pytest.mark.parametrize(
    "text", ["", "a" * 9000, ("word " * 3000), " " * 5000 + "x", "x" + " " * 9000 + "y"]
)
def test_sse_pieces_join_back_and_none_starts_with_whitespace(text: str) -> None:
    # The SDK strips the whitespace an event's data starts with.
    pieces = _pieces(text)
    assert "".join(pieces) == text
    assert all(not p[:1].isspace() for p in pieces[1:])


# --- the command ------------------------------------------------------------------------------


def test_referee_serve_tasks_is_an_ors_environment(client: Any, tmp_path: Path) -> None:
    spec = tmp_path / "spec.yaml"
    spec.write_text(json.dumps(SPEC))
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text("".join(json.dumps(t) + "\n" for t in TASKS))
    server = Server(spec, "--tasks", str(tasks), "--env-name", "maths")
    try:
        environments = client.EnvironmentsAPI(base_url=server.url, api_key="")
        try:
            env = environments.get("maths", base_url=server.url)
            task = env.list_tasks("train")[0]
            with env.session(task=task) as session:
                result = session.call_tool("submit_answer", {"answer": "\\boxed{4}"})
        finally:
            environments.close()
        rollout = {"prompt": TASKS[0]["prompt"], "completion": "\\boxed{4}", "reference": "4"}
        [want] = post(server.url + "/score", {"rollouts": [rollout]})["scores"]
        assert result.reward == want["reward"] and want["reward"] > 0.5 and result.finished
    finally:
        assert server.stop() == 0


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--tasks", "{tasks}"], "tasks.jsonl:2"),
        (["--env-name", "maths"], "--env-name names the ORS environment of --tasks"),
    ],
)
def test_referee_serve_refuses_a_bad_task_file_or_a_name_without_one(
    tmp_path: Path, args: list[str], message: str
) -> None:
    spec = tmp_path / "spec.yaml"
    spec.write_text(json.dumps(SPEC))
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text(json.dumps(TASKS[0]) + "\n{not json\n")
    command = [sys.executable, "-m", "referee.cli", "serve", "--spec", str(spec), "--port", "0"]
    done = subprocess.run(
        [*command, *(a.format(tasks=tasks) for a in args)],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 2 and message in done.stderr, done.stderr


def test_a_group_reward_is_not_served_as_an_ors_environment() -> None:
    @dataclass(kw_only=True)
    class Rank(GroupRewardBase):
        name: str = "rank"

        async def evaluate_group(self, rollouts: Sequence[Rollout]) -> list[Score]:
            return [Score(0.5) for _ in rollouts]

    service = Service(Rank(), mounts=[OpenRewardEnvironment(TASKS)])
    with pytest.raises(SpecError, match="compares the attempts at one prompt"):
        service.app()


@pytest.mark.parametrize(
    ("spec", "says"),
    [
        ({"type": "tool_use"}, "chat messages"),
        ({"type": "length", "max_length": 100}, "token"),
    ],
)
def test_a_spec_an_ors_session_cannot_feed_is_refused_when_it_mounts(
    spec: dict[str, Any], says: str
) -> None:
    # A session submits one answer as text: a trajectory reward would see no calls, and a
    # token count never arrives; each would score every task wrong.
    service = Service(referee.load(spec), mounts=[OpenRewardEnvironment(TASKS)])
    with pytest.raises(SpecError, match=says) as refused:
        service.app()
    assert "ORS session" in str(refused.value)


def test_length_in_words_is_served_as_an_ors_environment() -> None:
    spec = {"type": "length", "max_length": 100, "unit": "words"}
    assert Service(referee.load(spec), mounts=[OpenRewardEnvironment(TASKS)]).app() is not None


def test_a_task_without_a_reference_is_not_paid_by_the_rest_of_the_spec() -> None:
    # SPEC pays 0.2 for a short answer beside math_answer's 0.8: with no reference, math_answer
    # cannot score, and the length part must not be paid alone.
    environment = OpenRewardEnvironment([{"id": "bare", "prompt": "What is 2+2?"}], env_name="e")
    with running(referee.load(SPEC), mounts=[environment]) as url:
        assert http(url, "POST", "/create", {"split": "train", "index": 0}, headers=SID)[0] == 200
        call = {"name": "submit_answer", "input": {"answer": "\\boxed{4}"}}
        status, _, stream = http(url, "POST", "/e/call", call, headers=SID)
    assert status == 200
    result = json.loads("".join(d for e, d in events(stream) if e in ("chunk", "end")))
    assert result["output"]["reward"] is None and result["output"]["finished"] is True
    assert result["output"]["metadata"]["failure"] is not None
