"""NeMo Gym's side of its resources-server protocol, from its own code: its request models, its
HTTP client (`nemo_gym.server_utils.ServerClient` over its global aiohttp session), and the
answers parsed with its response models.

Import only where ``nemo_gym`` imports (``pytest.importorskip`` first): NeMo Gym 0.7 declares
Python 3.13, but these modules run on 3.11 (`NEMO_GYM_PIP` says how it is installed here).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any
from urllib.parse import urlsplit

import orjson
from nemo_gym import server_utils
from nemo_gym.base_resources_server import BaseVerifyRequest
from nemo_gym.config_types import BaseServerConfig
from nemo_gym.openai_utils import (
    NeMoGymEasyInputMessage,
    NeMoGymFunctionCallOutput,
    NeMoGymResponse,
    NeMoGymResponseCreateParamsNonStreaming,
    NeMoGymResponseFunctionToolCall,
    NeMoGymResponseOutputMessage,
    NeMoGymResponseOutputText,
)
from omegaconf import OmegaConf
from pydantic import ConfigDict

NAME = "referee"
"""The resources server's name in the NeMo Gym config the client is given."""


class MathVerifyRequest(BaseVerifyRequest):
    """A verify request with the task's fields, as NeMo Gym's math servers declare theirs
    (``LibraryJudgeMathVerifyRequest``: ``expected_answer``), and any others a dataset has."""

    model_config = ConfigDict(extra="allow", populate_by_name=True)

    expected_answer: str | None = None


def params(question: str, system: str | None = None) -> NeMoGymResponseCreateParamsNonStreaming:
    messages = [NeMoGymEasyInputMessage(role="user", content=question)]
    if system is not None:
        messages.insert(0, NeMoGymEasyInputMessage(role="system", content=system))
    return NeMoGymResponseCreateParamsNonStreaming(input=messages)


def response(*items: Any) -> NeMoGymResponse:
    """A model's Response with these output items (text: an assistant message)."""
    output = [
        NeMoGymResponseOutputMessage(
            id=f"msg_{i}", content=[NeMoGymResponseOutputText(annotations=[], text=item)]
        )
        if isinstance(item, str)
        else item
        for i, item in enumerate(items)
    ]
    return NeMoGymResponse(id="resp_1", created_at=1234.5, model="policy", object="response",
                           output=output, parallel_tool_calls=False, tool_choice="auto",
                           tools=[])  # fmt: skip


def call(name: str, arguments: str, call_id: str) -> NeMoGymResponseFunctionToolCall:
    return NeMoGymResponseFunctionToolCall(name=name, arguments=arguments, call_id=call_id)


def output(call_id: str, text: str) -> NeMoGymFunctionCallOutput:
    return NeMoGymFunctionCallOutput(call_id=call_id, output=text)


def verify_request(
    answer: Any, expected: str | None = "4", question: str = "2+2?", **fields: Any
) -> MathVerifyRequest:
    """What NeMo Gym's simple agent sends to ``/verify``: its run body and the response."""
    reply = answer if isinstance(answer, NeMoGymResponse) else response(answer)
    return MathVerifyRequest(responses_create_params=params(question), response=reply,
                             expected_answer=expected, **fields)  # fmt: skip


def wire(model: Any) -> dict[str, Any]:
    """A request model as the simple agent puts it on the wire (``body.model_dump()``)."""
    return dict(orjson.loads(orjson.dumps(model.model_dump(mode="json", by_alias=True))))


class Client:
    """NeMo Gym's `ServerClient`, its config naming referee's server at `url`."""

    def __init__(self, url: str, token: str | None = None, *, in_url: bool = False) -> None:
        parts = urlsplit(url)
        host = str(parts.hostname)
        if token is not None and in_url:  # the token where a NeMo Gym config can put it
            host = f"referee:{token}@{host}"
        server = {"host": host, "port": parts.port}
        config = OmegaConf.create({NAME: {"resources_servers": {NAME: server}}})
        head = BaseServerConfig(host="127.0.0.1", port=1)
        self.client = server_utils.ServerClient(head_server_config=head, global_config_dict=config)
        self.headers = {} if token is None or in_url else {"Authorization": f"Bearer {token}"}

    async def call(self, path: str, body: Any = None, *, method: str = "POST") -> tuple[int, Any]:
        kwargs: dict[str, Any] = {"headers": dict(self.headers)}
        if body is not None:
            kwargs["json"] = body if isinstance(body, (dict, list)) else wire(body)
        got = await self.client.request(server_name=NAME, url_path=path, method=method, **kwargs)
        return got.status, await server_utils.get_response_json(got)

    async def verify(self, body: Any) -> dict[str, Any]:
        status, answer = await self.call("/verify", body)
        assert status == 200, answer
        return dict(answer)


@asynccontextmanager
async def session() -> AsyncIterator[None]:
    """NeMo Gym's global aiohttp session, on this loop, closed and forgotten on leaving."""
    cfg = server_utils.GlobalAIOHTTPAsyncClientConfig()
    server_utils.set_global_aiohttp_client(cfg)
    try:
        yield
    finally:
        client = server_utils._GLOBAL_AIOHTTP_CLIENT
        server_utils._GLOBAL_AIOHTTP_CLIENT = None
        if client is not None:
            await client.close()


def run(url: str, *calls: tuple[str, Any], token: str | None = None) -> list[tuple[int, Any]]:
    """Each ``(path, body)`` sent at once by NeMo Gym's client; ``(status, answer)`` each."""

    async def main() -> list[tuple[int, Any]]:
        async with session():
            client = Client(url, token)
            return list(await asyncio.gather(*(client.call(p, b) for p, b in calls)))

    return asyncio.run(main())


def verify_all(url: str, bodies: Sequence[Any], **options: Any) -> list[dict[str, Any]]:
    """``/verify`` for each body, sent at once; the answers, each checked to be 200."""
    out = run(url, *(("/verify", b) for b in bodies), **options)
    assert all(status == 200 for status, _ in out), out
    return [answer for _, answer in out]
