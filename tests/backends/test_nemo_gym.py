"""NeMo Gym's resources-server protocol, driven by NeMo Gym's own code: the reward its agent
gets from ``/verify`` is the number `referee score` gives for the same rollout.

Requests are built with NeMo Gym's pydantic models (``BaseVerifyRequest``, ``NeMoGymResponse``,
``ResourcesSeedSessionRequest``, ...), sent by its own HTTP client (``ServerClient`` over its
global aiohttp session, which encodes with orjson) to a real ``referee serve`` on loopback, and
the answers parsed with its response models. ``/aggregate_metrics`` is checked against NeMo
Gym's own ``compute_aggregate_metrics``.
"""

from __future__ import annotations

import asyncio
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

NEMO_GYM_PIP = (
    "pip install --no-deps --ignore-requires-python nemo-gym==0.7.0; pip install "
    "fastapi==0.165.0 starlette==1.10.0 itsdangerous==2.2.0 uvicorn==0.54.0 httptools==0.9.0 "
    "yappi==1.7.6 pydot==4.0.1 scipy==1.17.1"
)
pytest.importorskip(
    "aiohttp", reason="the serve extra is not installed (pip install 'referee[serve]')"
)
pytest.importorskip("nemo_gym.base_resources_server", reason=NEMO_GYM_PIP)

from nemo_gym.base_resources_server import (  # noqa: E402
    BaseMultiRewardVerifyResponse,
    BaseRunRequest,
    BaseVerifyResponse,
    ResourcesCloseSessionRequest,
    ResourcesCloseSessionResponse,
    ResourcesSeedSessionRequest,
    ResourcesSeedSessionResponse,
    ReverifyMode,
)
from nemo_gym.episode_types import EpisodeId, TaskId  # noqa: E402
from nemo_gym.failure_kinds import is_namespaced, is_registered  # noqa: E402
from nemo_gym.reward_profile import compute_aggregate_metrics  # noqa: E402

import referee  # noqa: E402
from referee import Rollout, Score  # noqa: E402
from referee.backends.nemo_gym import ResourcesServer, failure_kind, rollout_of  # noqa: E402
from referee.reward import GroupRewardBase  # noqa: E402
from referee.trajectory import trajectory  # noqa: E402
from tests.support.nemo_gym import (  # noqa: E402
    Client,
    call,
    output,
    params,
    response,
    run,
    session,
    verify_all,
    verify_request,
    wire,
)
from tests.support.serving import SPEC, Server, request, running  # noqa: E402

pytestmark = [  # NeMo Gym's profiler, on the few samples these tests give it
    pytest.mark.filterwarnings("ignore:Standard error is 0:UserWarning"),
    pytest.mark.filterwarnings("ignore:.*repeat.s. are missing rollouts:UserWarning"),
]

TOKEN = "nemo-gym-test-token-0123456789"
ANSWERS = ["\\boxed{4}", "It is \\boxed{5}, " + "x" * 40, "\\boxed{4} " + "y" * 30]


def scored(reward: referee.Reward, completion: Any, reference: Any = "4") -> Score:
    """What `referee score` gives the rollout NeMo Gym's request describes."""
    prompt = [referee.Message(role="user", content="2+2?")]
    return referee.score(
        reward, [Rollout(prompt=prompt, completion=completion, reference=reference)]
    )[0]


def serve(reward: referee.Reward, **options: Any) -> Any:
    mount_options = {k: options.pop(k) for k in ("reference_field", "group_size", "group_timeout")
                     if k in options}  # fmt: skip
    return running(reward, mounts=[ResourcesServer(reward, **mount_options)], **options)


# --- /verify: the same number ---------------------------------------------------------------


def test_a_single_reward_answers_its_score() -> None:
    reward = referee.load({"name": "boxed", "type": "math_answer"})
    with serve(reward) as url:
        answers = verify_all(url, [verify_request(a) for a in ANSWERS])
    for text, answer in zip(ANSWERS, answers, strict=True):
        parsed = BaseVerifyResponse.model_validate(answer)
        assert parsed.reward == scored(reward, text).value
        assert parsed.mask_sample is False and parsed.failure_kind is None
        assert "reward_components" not in answer  # one reward: a plain BaseVerifyResponse
        assert parsed.response.output[0].content[0].text == text  # the request, echoed
        assert answer["expected_answer"] == "4"


def test_several_components_answer_a_multi_reward_response_with_the_score_numbers() -> None:
    reward = referee.load(SPEC)
    with serve(reward) as url:
        answers = verify_all(url, [verify_request(a) for a in ANSWERS])
        status, by_score = request(url + "/score", {"rollouts": [
            {"prompt": [{"role": "user", "content": "2+2?"}], "completion": a, "reference": "4"}
            for a in ANSWERS]})  # fmt: skip
    assert status == 200
    for text, answer, other in zip(ANSWERS, answers, by_score["scores"], strict=True):
        parsed = BaseMultiRewardVerifyResponse.model_validate(answer)
        want = scored(reward, text)
        assert parsed.reward == want.value == other["reward"]
        assert parsed.reward_components == dict(want.components) == other["components"]
        assert set(parsed.reward_components) == {"boxed", "short"}
        assert answer["referee/short"] == want.components["short"]  # top level, for metrics
    assert [a["reward"] for a in answers] == pytest.approx([0.8, -0.2, 0.6])


def test_a_failure_is_masked_with_its_kind_not_a_zero_that_trains() -> None:
    reward = referee.load(SPEC)  # no boxed answer: math_answer fails, and the spec with it
    with serve(reward) as url:
        (answer,) = verify_all(url, [verify_request("no idea")])
    parsed = BaseMultiRewardVerifyResponse.model_validate(answer)
    want = scored(reward, "no idea")
    assert want.value is None and want.failure is not None
    assert parsed.mask_sample is True and parsed.reward == 0.0  # what judge_failsafe sends
    assert parsed.failure_kind == f"referee:{want.failure.type}" == "referee:not_applicable"
    assert is_namespaced(parsed.failure_kind)
    assert parsed.failure_reason == want.reason
    assert parsed.reward_components == {}  # boxed failed, short was skipped: no NaN, no null
    assert "NaN" not in str(answer)


@pytest.mark.parametrize(
    ("failure", "kind"),
    [
        ("judge", "judge_failed"),  # NeMo Gym's own kinds where they fit
        ("sandbox", "provider_unavailable"),
        ("error", "verifier_error"),
        ("timeout", "referee:timeout"),  # namespaced otherwise
        ("budget", "referee:budget"),
    ],
)
def test_failure_kinds_are_nemo_gyms_where_one_fits(failure: Any, kind: str) -> None:
    got = failure_kind(Score.failed(failure, "x"))
    assert got == kind and (is_registered(got) or is_namespaced(got))
    assert failure_kind(Score(1.0)) is None


def test_a_missing_reference_field_is_masked_and_the_field_can_be_named() -> None:
    reward = referee.load({"name": "boxed", "type": "math_answer"})
    with serve(reward) as url:
        (answer,) = verify_all(url, [verify_request("\\boxed{4}", expected=None)])
    parsed = BaseVerifyResponse.model_validate(answer)
    assert parsed.mask_sample is True and parsed.failure_kind == "referee:missing_reference"
    assert "'expected_answer'" in str(parsed.failure_reason)
    with serve(reward, reference_field="gold") as url:
        (answer,) = verify_all(url, [verify_request("\\boxed{4}", expected=None, gold="4")])
    assert BaseVerifyResponse.model_validate(answer).reward == 1.0


def test_tool_calls_become_the_trajectory_referee_reads() -> None:
    reply = response(call("add", '{"a": 2, "b": 2}', "c1"), output("c1", "4"), "It is \\boxed{4}")
    body = wire(verify_request(reply))
    body["responses_create_params"]["tools"] = [
        {"type": "function", "name": "add", "parameters": {"type": "object"}, "strict": True}
    ]
    rollout = rollout_of(body)
    assert isinstance(rollout.completion, list)
    assert [m.role for m in rollout.completion] == ["assistant", "tool", "assistant"]
    steps = trajectory(rollout)
    assert [(c.name, c.arguments, c.result) for c in steps.calls] == [
        ("add", {"a": 2, "b": 2}, "4")
    ]
    assert steps.final_answer == "It is \\boxed{4}"
    assert steps.toolset.definitions.keys() == {"add"}
    reward = referee.load({"name": "boxed", "type": "math_answer"})
    with serve(reward) as url:
        (answer,) = verify_all(url, [body])
    assert answer["reward"] == referee.score(reward, [rollout])[0].value == 1.0


# --- the guard -------------------------------------------------------------------------------


def test_every_route_wants_the_token() -> None:
    reward = referee.load({"name": "boxed", "type": "math_answer"})
    calls = [("/verify", verify_request("\\boxed{4}")), ("/seed_session", {}),
             ("/close_session", {"resources_session_id": "s"}),
             ("/aggregate_metrics", {"verify_responses": []})]  # fmt: skip

    async def main(url: str) -> None:
        async with session():
            bare, held, in_url = Client(url), Client(url, TOKEN), Client(url, TOKEN, in_url=True)
            for path, body in calls:
                assert (await bare.call(path, body))[0] == 401, path
                assert (await held.call(path, body))[0] == 200, path
                assert (await in_url.call(path, body))[0] == 200, (
                    path
                )  # basic auth, from the config
            assert (await bare.call("/reverify_mode", method="GET"))[0] == 401
            assert (await held.call("/ng-rollout/r-1/verify", calls[0][1]))[0] == 200

    with serve(reward, token=TOKEN) as url:
        asyncio.run(main(url))


# --- groups ----------------------------------------------------------------------------------


@dataclass(kw_only=True)
class LengthRank(GroupRewardBase):
    """Each attempt's rank by length in its group: 0.0 the shortest, 1.0 the longest."""

    name: str = "length_rank"

    async def evaluate_group(self, rollouts: Sequence[Rollout]) -> list[Score]:
        n = len(rollouts)
        order = sorted(range(n), key=lambda i: len(rollouts[i].completion_text))
        return [Score(order.index(i) / (n - 1) if n > 1 else 0.5, reason=str(n)) for i in range(n)]


def test_a_group_reward_needs_a_group_size() -> None:
    with pytest.raises(ValueError, match="--group-size"):
        ResourcesServer(LengthRank())
    with pytest.raises(ValueError, match="positive integer"):
        ResourcesServer(LengthRank(), group_size=0)


def test_concurrent_verifies_of_one_prompt_score_as_a_group() -> None:
    reward = LengthRank()
    texts = ["bb", "a", "cccc"]
    other = ["zz", "z", "zzz"]
    bodies = [verify_request(t, _ng_task_index=0, _ng_rollout_index=i) for i, t in enumerate(texts)]
    bodies += [verify_request(t, question="3+3?", _ng_task_index=1) for t in other]
    with serve(reward, group_size=3, group_timeout=20) as url:
        answers = verify_all(url, bodies)
    group = [Rollout(prompt="2+2?", completion=t, group="g") for t in texts]
    want = [s.value for s in referee.score(reward, group)]
    assert (
        [BaseVerifyResponse.model_validate(a).reward for a in answers[:3]]
        == want
        == [0.5, 0.0, 1.0]
    )
    assert [a["reward"] for a in answers[3:]] == [0.5, 0.0, 1.0]  # its own group
    assert all(a["failure_kind"] is None and not a["mask_sample"] for a in answers)


def test_an_explicit_group_id_keys_the_group_and_a_short_group_is_scored_at_its_timeout() -> None:
    reward = LengthRank()
    # One group id across two prompts (the caller's group), and a group that never fills.
    bodies = [
        verify_request("aa", _ng_group_id="g1"),
        verify_request("a", question="x?", _ng_group_id="g1"),
        verify_request("bbb", _ng_group_id="g2"),
        verify_request("b", _ng_group_id="g2"),
    ]
    with serve(reward, group_size=2, group_timeout=0.5) as url:
        whole = verify_all(url, bodies[:2])
    assert [a["reward"] for a in whole] == [1.0, 0.0]
    with serve(reward, group_size=3, group_timeout=0.5) as url:
        short = verify_all(url, bodies[2:])
    assert [a["reward"] for a in short] == [1.0, 0.0]  # scored as a group of two
    for answer in short:
        parsed = BaseVerifyResponse.model_validate(answer)
        assert parsed.mask_sample is False and parsed.failure_kind == "cohort_incomplete"
        assert "2 of 3" in str(parsed.failure_reason)


# --- sessions, reverify mode, metrics --------------------------------------------------------


def test_seed_and_close_session_in_both_forms() -> None:
    seed = ResourcesSeedSessionRequest(
        resources_session_id="s-1", episode_id=EpisodeId(rollout_id="r1"),
        task_id=TaskId(taskset="math", task_id="t1"), task_data={"expected_answer": "4"},
    )  # fmt: skip
    close = ResourcesCloseSessionRequest(
        resources_session_id="s-1", episode_id=EpisodeId(rollout_id="r1")
    )
    agent = BaseRunRequest(responses_create_params=params("2+2?"))
    with serve(referee.load({"name": "boxed", "type": "math_answer"})) as url:
        legacy = wire(agent) | {"expected_answer": "4"}
        got = run(
            url, ("/seed_session", seed), ("/seed_session", legacy), ("/close_session", close)
        )
        status, mode = asyncio.run(_get(url, "/reverify_mode"))
    assert [s for s, _ in got] == [200, 200, 200]
    assert ResourcesSeedSessionResponse.model_validate(got[0][1]).resources_session_id == "s-1"
    assert got[1][1] == {}
    assert ResourcesCloseSessionResponse.model_validate(got[2][1]).resources_session_id == "s-1"
    assert status == 200 and ReverifyMode(mode) is ReverifyMode.STATELESS


async def _get(url: str, path: str) -> tuple[int, Any]:
    async with session():
        return await Client(url).call(path, method="GET")


def test_aggregate_metrics_are_nemo_gyms_with_masked_samples_left_out() -> None:
    reward = referee.load(SPEC)
    plan = [(0, "\\boxed{4}"), (0, "\\boxed{5}"), (0, "no idea"), (1, "\\boxed{4} " + "y" * 30),
            (1, "\\boxed{4}"), (2, "no idea")]  # fmt: skip
    bodies = [verify_request(t, _ng_task_index=task, _ng_rollout_index=i % 3)
              for i, (task, t) in enumerate(plan)]  # fmt: skip
    with serve(reward) as url:
        answers = verify_all(url, bodies)
        for answer in answers:  # NeMo Gym's collection strips the big fields before it sends
            del answer["response"], answer["responses_create_params"]
        ((status, ours),) = run(url, ("/aggregate_metrics", {"verify_responses": answers}))
    assert status == 200
    assert sum(a["mask_sample"] for a in answers) == 2
    theirs = compute_aggregate_metrics(answers).model_dump()
    assert ours["key_metrics"] == theirs["key_metrics"]
    assert ours["key_metrics"]["coverage/masked_rollouts"] == 2
    assert ours["key_metrics"]["coverage/fully_masked_tasks"] == 1
    values = [scored(reward, t).value for _, t in plan]
    measured = [v for v in values if v is not None]
    assert ours["key_metrics"]["mean/reward"] == pytest.approx(sum(measured) / len(measured))
    assert ours["group_level_metrics"] == theirs["group_level_metrics"]
    # NeMo Gym's across-repeat statistics are not computed (the module docstring says so).
    assert ours["agent_metrics"] == {k: v for k, v in theirs["agent_metrics"].items()
                                     if "_across_repeats/" not in k}  # fmt: skip


@pytest.mark.parametrize(
    "responses",
    [
        [],  # nothing sent
        [{"_ng_task_index": 0, "reward": 0.0, "mask_sample": True}],  # every sample masked
        [{"_ng_task_index": 3, "reward": 1.0, "flag": True, "n": 2}],  # one sample: std 0.0
    ],
)
def test_aggregate_metrics_edges_match_nemo_gym(responses: list[dict[str, Any]]) -> None:
    from referee.backends.nemo_gym import aggregate_metrics

    theirs = compute_aggregate_metrics(responses).model_dump()
    ours = aggregate_metrics(responses)
    assert {k: v for k, v in ours.items() if k != "agent_metrics"} == {
        k: v for k, v in theirs.items() if k != "agent_metrics"}  # fmt: skip
    assert ours["agent_metrics"] == {k: v for k, v in theirs["agent_metrics"].items()
                                     if "_across_repeats/" not in k}  # fmt: skip


# --- hostile bodies --------------------------------------------------------------------------


def _good() -> dict[str, Any]:
    return wire(verify_request("\\boxed{4}"))


def _with(path: Sequence[Any], value: Any) -> dict[str, Any]:
    body = _good()
    target: Any = body
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    return body


@pytest.mark.parametrize(
    ("route", "body", "status", "names"),
    [
        ("/verify", [1, 2], 400, "JSON object"),  # not an object
        ("/verify", {"response": {}}, 422, "responses_create_params"),  # a field missing
        ("/verify", _with(["response"], "text"), 422, "response"),
        ("/verify", _with(["response", "output"], {"a": 1}), 422, "response.output"),
        ("/verify", _with(["response", "output", 0], 7), 422, "response.output[0]"),
        (
            "/verify",
            _with(["response", "output", 0, "content"], 5),
            422,
            "response.output[0].content",
        ),
        (
            "/verify",
            _with(["response", "output"], [{"type": "function_call", "name": 3}]),
            422,
            "response.output[0].name",
        ),
        (
            "/verify",
            _with(["responses_create_params", "input"], 12),
            422,
            "responses_create_params.input",
        ),
        (
            "/verify",
            _with(["responses_create_params", "input", 0, "role"], "root"),
            422,
            "responses_create_params.input[0].role",
        ),
        (
            "/verify",
            _with(["response", "usage"], {"output_tokens": "many"}),
            422,
            "response.usage.output_tokens",
        ),
        ("/verify", _with(["expected_answer"], math.nan), 400, "NaN"),  # no JSON: not echoed
        ("/seed_session", {"resources_session_id": 5}, 422, "resources_session_id"),
        ("/close_session", {}, 422, "resources_session_id"),
        ("/aggregate_metrics", {"verify_responses": "all"}, 400, "verify_responses"),
        ("/aggregate_metrics", {"verify_responses": [3]}, 422, "verify_responses[0]"),
        (
            "/aggregate_metrics",
            {"verify_responses": [{"_ng_task_index": "a"}]},
            422,
            "verify_responses[0]._ng_task_index",
        ),
    ],
)
def test_a_hostile_body_is_a_json_error_naming_the_field(
    route: str, body: Any, status: int, names: str
) -> None:
    with serve(referee.load({"name": "boxed", "type": "math_answer"})) as url:
        got, answer = request(url + route, body)
    assert got == status, answer
    assert names in answer["error"]["message"]


def test_a_body_that_cannot_be_echoed_is_refused_before_it_is_scored() -> None:
    @dataclass(kw_only=True)
    class Counted(referee.CheckReward):
        calls: list[str]
        name: str = "counted"
        run_in = "inline"

        def check(self, rollout: Rollout) -> Score:
            self.calls.append(rollout.completion_text)
            return Score(1.0)

    reward = Counted(calls=[])
    with serve(reward) as url:
        got, answer = request(url + "/verify", _good() | {"note": math.inf})
        assert got == 400 and "cannot be echoed" in answer["error"]["message"]
        assert reward.calls == []
        assert request(url + "/verify", _good())[0] == 200 and len(reward.calls) == 1


def test_a_hostile_group_field_is_refused_and_unknown_fields_are_data() -> None:
    body = _good() | {"_ng_group_attempt": -1}
    with serve(LengthRank(), group_size=2, group_timeout=5) as url:
        got, answer = request(url + "/verify", body)
    assert got == 422 and "_ng_group_attempt" in answer["error"]["message"]
    reward = referee.load({"name": "boxed", "type": "math_answer"})
    odd = _good() | {
        "spec": "other.yaml",
        "reward": 5,
        "mask_sample": True,
        "x" * 100: [None] * 1000,
    }
    with serve(reward) as url:
        got, answer = request(url + "/verify", odd)
    assert got == 200 and answer["reward"] == 1.0 and answer["mask_sample"] is False
    assert answer["spec"] == "other.yaml"  # echoed, never read


# --- the command ------------------------------------------------------------------------------

RANK_FILE = """
from dataclasses import dataclass

from referee import Score
from referee.reward import GroupRewardBase


@dataclass(kw_only=True)
class LengthRank(GroupRewardBase):
    name: str = "length_rank"

    async def evaluate_group(self, rollouts):
        order = sorted(range(len(rollouts)), key=lambda i: len(rollouts[i].completion_text))
        n = len(rollouts)
        return [Score(order.index(i) / (n - 1) if n > 1 else 0.5) for i in range(n)]
"""


def test_referee_serve_verifies_a_group_with_group_size_and_says_so_without(
    tmp_path: Path,
) -> None:
    (tmp_path / "rank.py").write_text(RANK_FILE)
    spec = tmp_path / "spec.yaml"
    spec.write_text("type: python\nfunction: rank.py:LengthRank\n")
    server = Server(spec)
    try:
        assert server.proc.stderr is not None
        note = server.proc.stderr.readline()
        assert "/verify is not served" in note and "--group-size" in note, note
        assert request(server.url + "/verify", wire(verify_request("a")))[0] == 404
    finally:
        assert server.stop() == 0
    server = Server(spec, "--group-size", "2", "--group-timeout", "30", "--reference-field", "x")
    try:
        answers = verify_all(server.url, [verify_request("aaa"), verify_request("a")])
        assert [a["reward"] for a in answers] == [1.0, 0.0]
    finally:
        assert server.stop() == 0


def test_referee_serve_reads_the_reference_from_the_field_it_is_told(tmp_path: Path) -> None:
    spec = tmp_path / "spec.yaml"
    spec.write_text(json.dumps(SPEC))
    server = Server(spec, "--reference-field", "gold")
    try:
        [told] = verify_all(server.url, [verify_request("\\boxed{4}", expected=None, gold="4")])
        [missing] = verify_all(server.url, [verify_request("\\boxed{4}", expected="4")])
    finally:
        assert server.stop() == 0
    assert told["reward"] > 0.5 and not told["mask_sample"]
    assert missing["mask_sample"] and missing["failure_kind"] == "referee:missing_reference"
