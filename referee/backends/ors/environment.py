"""`OpenRewardEnvironment`: a task file and a reward as an ORS environment, mounted on
referee's HTTP service (`referee.backends.service.Mount`). The package docstring says what it
answers and why."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import os
import re
import uuid
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

from referee.backends._guard import BadRequest
from referee.backends.contract import Door, refuse_unfit
from referee.backends.ors import wire
from referee.backends.ors.sessions import (
    DEFAULT_MAX_SESSIONS,
    DEFAULT_SESSION_TIMEOUT,
    Session,
    Sessions,
    session_id,
)
from referee.backends.ors.tasks import Task, TaskSet

if TYPE_CHECKING:
    from aiohttp import web

    from referee.backends.service import Service

__all__ = ["OpenRewardEnvironment", "environment_name"]

DOOR = Door(
    "an ORS session (it submits one answer, as text)",
    instead={
        "group": "/score, or NeMo Gym's /verify with --group-size",
        "messages": "/score, or NeMo Gym's /verify, which carry a trajectory",
        "tokens": "unit: words or unit: chars in the spec (a session gives no token count)",
    },
)
"""What an ORS session gives a reward; `refuse_unfit` refuses the rest when it mounts."""

logger = logging.getLogger("referee.serve")

PING_INTERVAL = 10.0
"""Seconds between keep-alive comments while a call is scored (the SDK gives up on a stream
silent for 30, and the reference server pings every 10)."""
ENV_ROUTES = ("splits", "tasks", "num_tasks", "task", "task_range", "tools", "prompt",
              "messages", "task_tools", "call")  # fmt: skip
"""The routes under ``/{env}/``; the default environment's are served at the root too."""
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")

Handler = Callable[["web.Request"], Awaitable["web.StreamResponse"]]


def environment_name(name: str) -> str:
    """An environment name from a reward's: lower case (ORS matches names case-blind), what a
    URL path segment takes safely, or ``referee``."""
    slug = re.sub(r"[^a-z0-9_.-]+", "-", name.lower()).strip("-._")[:64]
    return slug or "referee"


def _shown(value: Any) -> str:
    """A value from a request, for an error message: its repr, cut short."""
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _int_or_none(body: Mapping[str, Any], key: str) -> int | None:
    value = body.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise BadRequest(400, "invalid_body", f"{key!r} must be an integer, not {_shown(value)}")
    return value


class OpenRewardEnvironment:
    """A task file and the service's reward as an Open Reward Standard environment.

    Args:
        tasks: The tasks: a JSON Lines file (`referee.backends.ors.tasks`), rows given in
            code, or a `TaskSet`. Read and checked here, before anything is served.
        env_name: The environment's name (letters, digits, ``_.-``; served in lower case, as
            ORS matches names case-blind); None: the reward's name, made so
            (`environment_name`).
        session_timeout: Seconds a session may go without a request before the reaper closes
            it (the SDK pings every 10).
        max_sessions: The most sessions open at once; past it ``/create`` is answered 503.
        ping_interval: Seconds between keep-alive comments on a call's event stream.

    Raises:
        RolloutError: The task file cannot be served (file and line).
        ValueError: A bad name, timeout or cap.
    """

    def __init__(
        self,
        tasks: str | os.PathLike[str] | Iterable[Mapping[str, Any]] | TaskSet,
        *,
        env_name: str | None = None,
        session_timeout: float = DEFAULT_SESSION_TIMEOUT,
        max_sessions: int = DEFAULT_MAX_SESSIONS,
        ping_interval: float = PING_INTERVAL,
    ) -> None:
        if isinstance(tasks, TaskSet):
            self.tasks = tasks
        elif isinstance(tasks, (str, os.PathLike)):
            self.tasks = TaskSet.read(tasks)
        else:
            self.tasks = TaskSet.of(tasks)
        if env_name is not None and not _NAME.fullmatch(env_name):
            raise ValueError(
                f"OpenRewardEnvironment: env_name {env_name!r} is not a name ORS clients can "
                f"use in a path: 1-64 letters, digits, '_', '.' or '-', such as "
                f"{environment_name(env_name)!r}"
            )
        for what, value in (("session_timeout", session_timeout),
                            ("ping_interval", ping_interval)):  # fmt: skip
            if not (isinstance(value, (int, float)) and 0 < value < math.inf):
                raise ValueError(f"OpenRewardEnvironment: {what} must be a positive number, "
                                 f"not {value!r}")  # fmt: skip
        if isinstance(max_sessions, bool) or not (
            isinstance(max_sessions, int) and max_sessions > 0
        ):
            raise ValueError(f"OpenRewardEnvironment: max_sessions must be a positive integer, "
                             f"not {max_sessions!r}")  # fmt: skip
        self.env_name = None if env_name is None else env_name.lower()  # ORS: case-blind
        self.sessions = Sessions(session_timeout, max_sessions)
        self.ping_interval = float(ping_interval)
        self.name = env_name or "referee"
        self._service: Service | None = None
        self._reaper: asyncio.Task[None] | None = None
        self._calls: set[asyncio.Future[str]] = set()  # running calls, held till done

    # --- mounting ---------------------------------------------------------------------------

    def mount(self, service: Service, app: web.Application) -> None:
        """Add the environment's routes (under ``/{env}/`` and at the root), and its reaper.

        Raises:
            SpecError: The service's reward needs what an ORS session cannot give (`DOOR`):
                a group (a session submits one answer), a trajectory, a token count.
        """
        refuse_unfit(service.reward, DOOR)
        self._service = service
        self.name = self.env_name or environment_name(service.reward.name)
        routes: list[tuple[str, str, Handler]] = [
            ("GET", "/list_environments", self._list_environments),
            ("POST", "/create_session", self._create_session),
            ("POST", "/delete_session", self._delete_session),
            ("POST", "/create", self._create),
            ("POST", "/ping", self._ping),
            ("POST", "/delete", self._delete),
            ("GET", "/{env}/splits", self._splits),
            ("POST", "/{env}/tasks", self._list_tasks),
            ("POST", "/{env}/num_tasks", self._num_tasks),
            ("POST", "/{env}/task", self._task),
            ("POST", "/{env}/task_range", self._task_range),
            ("GET", "/{env}/tools", self._tools),
            ("GET", "/{env}/prompt", self._prompt),
            ("GET", "/{env}/messages", self._messages),
            ("GET", "/{env}/task_tools", self._task_tools),
            ("POST", "/{env}/call", self._call),
        ]
        for method, path, handler in routes:
            app.router.add_route(method, path, handler)
        for route in ENV_ROUTES:
            app.router.add_route("*", f"/{route}", self._to_default)
        app.on_startup.append(self._start)
        app.on_cleanup.append(self._stop)

    async def _start(self, app: web.Application) -> None:
        self._reaper = asyncio.ensure_future(self._reap())

    async def _stop(self, app: web.Application) -> None:
        if self._reaper is not None:
            self._reaper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._reaper
        for call in list(self._calls):
            call.cancel()
        self.sessions.clear()

    async def _reap(self) -> None:
        interval = min(5.0, self.sessions.timeout / 4)
        while True:
            await asyncio.sleep(interval)
            gone = self.sessions.reap()
            if gone:
                logger.info("referee serve: ORS: closed %d idle session(s)", len(gone))

    # --- helpers ----------------------------------------------------------------------------

    @property
    def service(self) -> Service:
        if self._service is None:
            raise RuntimeError("OpenRewardEnvironment: not mounted on a service")
        return self._service

    def _json(self, body: Any, status: int = 200) -> web.Response:
        from aiohttp import web

        return web.json_response(body, status=status, dumps=wire.dumps)

    def _env(self, request: web.Request) -> str:
        name = request.match_info["env"]
        if name.lower() != self.name:
            raise BadRequest(
                404, "unknown_environment",
                f"unknown environment {_shown(name)}; this server serves {self.name!r} "
                f"(GET /list_environments)",
            )  # fmt: skip
        return self.name

    async def _body(self, request: web.Request, keys: tuple[str, ...]) -> Mapping[str, Any]:
        body = await self.service.read_body(request)
        self.service.check_keys(body, keys)
        return body

    def _split(self, body: Mapping[str, Any]) -> list[Task]:
        split = body.get("split")
        if not isinstance(split, str):
            raise BadRequest(400, "invalid_body", f"'split' must be a string, not {_shown(split)}")
        tasks = self.tasks.splits.get(split)
        if tasks is None:
            known = ", ".join(map(repr, self.tasks.splits))
            raise BadRequest(
                400, "invalid_split", f"Invalid split {_shown(split)}; the splits are {known}"
            )
        return tasks

    @staticmethod
    def _index(tasks: list[Task], index: Any) -> Task:
        # Python's indexing, as the reference server's: -1 is the last task.
        if isinstance(index, bool) or not isinstance(index, int):
            raise BadRequest(
                400, "invalid_body", f"'index' must be an integer, not {_shown(index)}"
            )
        if not -len(tasks) <= index < len(tasks):
            raise BadRequest(
                400, "invalid_index",
                f"Invalid index {_shown(index)}: the split has {len(tasks)} tasks",
            )  # fmt: skip
        return tasks[index]

    def _session(self, request: web.Request) -> Session:
        return self.sessions.get(session_id(request.headers.get("X-Session-ID")))

    # --- the environment: no session --------------------------------------------------------

    async def _list_environments(self, request: web.Request) -> web.Response:
        return self._json([self.name])

    async def _splits(self, request: web.Request) -> web.Response:
        self._env(request)
        types = ("train", "validation", "test")
        return self._json([{"name": name, "type": name if name in types else "validation"}
                           for name in self.tasks.splits])  # fmt: skip

    async def _list_tasks(self, request: web.Request) -> web.Response:
        env = self._env(request)
        tasks = self._split(await self._body(request, ("split",)))
        return self._json({"tasks": [t.spec() for t in tasks], "env_name": env})

    async def _num_tasks(self, request: web.Request) -> web.Response:
        self._env(request)
        return self._json({"num_tasks": len(self._split(await self._body(request, ("split",))))})

    async def _task(self, request: web.Request) -> web.Response:
        env = self._env(request)
        body = await self._body(request, ("split", "index"))
        task = self._index(self._split(body), body.get("index"))
        return self._json({"task": task.spec(), "env_name": env})

    async def _task_range(self, request: web.Request) -> web.Response:
        # Python's slicing, as the reference server's: negative bounds count from the end,
        # bounds past it are clamped, and an empty range is an empty list.
        env = self._env(request)
        body = await self._body(request, ("split", "start", "stop"))
        tasks = self._split(body)
        start, stop = _int_or_none(body, "start"), _int_or_none(body, "stop")
        return self._json({"tasks": [t.spec() for t in tasks[start:stop]], "env_name": env})

    async def _tools(self, request: web.Request) -> web.Response:
        self._env(request)
        return self._json(wire.tool_list())

    async def _to_default(self, request: web.Request) -> web.Response:
        from aiohttp import web

        # The SDK's local use calls the default environment at the root; the reference
        # server redirects there (308: the method and body are kept).
        # raw_path is the path and query as sent (encoded; the HTTP parser let no CR or LF in).
        return web.Response(status=308, headers={"Location": f"/{self.name}{request.raw_path}"})

    # --- sessions ---------------------------------------------------------------------------

    async def _create_session(self, request: web.Request) -> web.StreamResponse:
        # A new id, as an event stream; nothing is held until /create names a task with it.
        from aiohttp import web

        sid = str(uuid.uuid4())
        text = wire.sse("task_id", sid) + wire.sse("end", "")
        return web.Response(body=text, content_type="text/event-stream",
                            headers={"Cache-Control": "no-cache"})  # fmt: skip

    async def _delete_session(self, request: web.Request) -> web.Response:
        return self._json({"sid": session_id(request.headers.get("X-Session-ID"))})

    async def _create(self, request: web.Request) -> web.Response:
        sid = session_id(request.headers.get("X-Session-ID"))
        body = await self._body(request, ("env_name", "task_spec", "split", "index",
                                          "toolset_name"))  # fmt: skip
        env_name = body.get("env_name")
        if env_name is not None and (
            not isinstance(env_name, str) or env_name.lower() != self.name
        ):
            raise BadRequest(
                404, "unknown_environment",
                f"unknown environment {_shown(env_name)}; this server serves {self.name!r}",
            )  # fmt: skip
        if body.get("toolset_name") is not None:
            raise BadRequest(400, "invalid_body",
                             f"unknown toolset {_shown(body['toolset_name'])}: this environment "
                             f"has none")  # fmt: skip
        task = self._task_of(body)
        self.sessions.open(sid, task)
        return self._json({"sid": sid})

    def _task_of(self, body: Mapping[str, Any]) -> Task:
        spec, split, index = body.get("task_spec"), body.get("split"), body.get("index")
        has_index = split is not None and index is not None
        if (spec is not None) == has_index or (split is None) != (index is None):
            raise BadRequest(
                400, "invalid_body",
                "Provide either task_spec or both split and index, not both/neither",
            )  # fmt: skip
        if spec is None:
            return self._index(self._split(body), index)
        # A task spec names one of the server's tasks, as /tasks lists it: the tasks (and
        # their references) are the server's, never the request's.
        ident = spec.get("id") if isinstance(spec, dict) else None
        if not isinstance(spec, dict) or set(spec) != {"id"} or not isinstance(ident, (str, int)):
            raise BadRequest(400, "invalid_task_spec",
                             f"task_spec must be a task as /tasks lists it, {{\"id\": ...}}; "
                             f"not {_shown(spec)}")  # fmt: skip
        task = self.tasks.by_id.get(str(ident))
        if task is None or isinstance(ident, bool):
            raise BadRequest(400, "invalid_task_spec", f"no task has the id {_shown(ident)}")
        return task

    async def _ping(self, request: web.Request) -> web.Response:
        self._session(request)
        return self._json({"status": "ok"})

    async def _delete(self, request: web.Request) -> web.Response:
        sid = session_id(request.headers.get("X-Session-ID"))
        self.sessions.close(sid)
        return self._json({"sid": sid})

    async def _prompt(self, request: web.Request) -> web.Response:
        self._env(request)
        return self._json(wire.prompt_blocks(self._session(request).task))

    async def _messages(self, request: web.Request) -> web.Response:
        self._env(request)
        return self._json(wire.prompt_messages(self._session(request).task))

    async def _task_tools(self, request: web.Request) -> web.Response:
        self._env(request)
        self._session(request)
        return self._json(wire.tool_list())

    # --- the tool ---------------------------------------------------------------------------

    async def _call(self, request: web.Request) -> web.StreamResponse:
        self._env(request)
        session = self._session(request)
        body = await self._body(request, ("name", "input", "task_id"))
        name, arguments, task_id = body.get("name"), body.get("input"), body.get("task_id")
        if not isinstance(name, str):
            raise BadRequest(400, "invalid_body", f"'name' must be a string, not {_shown(name)}")
        if not isinstance(arguments, dict):
            raise BadRequest(400, "invalid_body",
                             f"'input' must be a JSON object, not {_shown(arguments)}")  # fmt: skip
        if task_id is not None and not isinstance(task_id, str):
            raise BadRequest(400, "invalid_body",
                             f"'task_id' must be a string, not {_shown(task_id)}")  # fmt: skip
        if task_id is not None:  # the client resumes a stream it lost
            if task_id != session.call_id or session.call is None:
                return await self._stream(request, None, None)
            return await self._stream(request, task_id, session.call)
        if self.service.closing:
            raise BadRequest(503, "shutting_down", "the server is shutting down")
        call = asyncio.ensure_future(self._run(session, name, arguments))
        self._calls.add(call)
        call.add_done_callback(self._done)
        session.call_id, session.call = uuid.uuid4().hex, call
        return await self._stream(request, session.call_id, call)

    async def _run(self, session: Session, name: str, arguments: Mapping[str, Any]) -> str:
        """The call's result (``RunToolOutput``), as JSON. Like the reference server's: an
        unknown tool or bad input is refused and the episode goes on; a call after the
        answer was scored (or queued behind the call that scored it) is refused."""
        if name != wire.TOOL_NAME:
            return wire.dumps(wire.tool_error(
                "not_found", f"{_shown(name)} is not a valid tool; the tool is "
                             f"{wire.TOOL_NAME!r}"))  # fmt: skip
        if session.finished:
            return wire.dumps(self._finished())
        answer = arguments.get(wire.ANSWER_ARG)
        if set(arguments) != {wire.ANSWER_ARG} or not isinstance(answer, str):
            return wire.dumps(wire.tool_error(
                "input_validation",
                f"Tool input validation error: {wire.TOOL_NAME} takes "
                f"{{{wire.ANSWER_ARG!r}: <string>}}, not {_shown(arguments)}"))  # fmt: skip
        async with session.lock:
            if session.finished:
                return wire.dumps(self._finished())
            (score,) = await self.service.score_batch([session.task.rollout(answer)])
            session.finished = True
        return wire.dumps(wire.tool_result(session.task, score))

    def _done(self, call: asyncio.Future[str]) -> None:
        self._calls.discard(call)
        if not call.cancelled():
            call.exception()  # its stream reports it; a call nobody streams is not an error

    @staticmethod
    def _finished() -> dict[str, Any]:
        return wire.tool_error(
            "episode_finished",
            f"{wire.TOOL_NAME!r} was not run: the episode has finished (an answer was "
            f"submitted and scored), so no further tool calls are accepted",
        )

    async def _stream(
        self, request: web.Request, call_id: str | None, call: asyncio.Future[str] | None
    ) -> web.StreamResponse:
        """The call's event stream, as the reference server's: ``task_id``, keep-alive
        comments while it runs, then its result in ``chunk``/``end`` events, or ``error``."""
        from aiohttp import web

        response = web.StreamResponse(headers={
            "Content-Type": "text/event-stream", "Cache-Control": "no-cache",
            "X-Accel-Buffering": "no",
        })  # fmt: skip
        await response.prepare(request)
        if call is None or call_id is None:
            await self._write(request, response, wire.sse("error", "unknown task_id"))
            return response
        if not await self._write(request, response, wire.sse("task_id", call_id)):
            return response
        while not call.done():
            # asyncio.wait leaves the call running if the client goes: a later request may
            # resume it by its task id.
            await asyncio.wait([call], timeout=self.ping_interval)
            if not call.done() and not await self._write(request, response, b": ping\r\n\r\n"):
                return response
        if call.cancelled():
            events = [wire.sse("error", "the call was cancelled: the server is stopping")]
        elif (exc := call.exception()) is not None:
            if not isinstance(exc, BadRequest):
                logger.error("referee serve: ORS call failed", exc_info=exc)
            events = [wire.sse("error", f"{type(exc).__name__}: {exc}")]
        else:
            events = list(wire.sse_result(call.result()))
        for event in events:
            if not await self._write(request, response, event):
                return response
        await response.write_eof()
        return response

    async def _write(self, request: web.Request, response: web.StreamResponse, data: bytes) -> bool:
        """Send `data` within the service's ``io_timeout``; False (the connection dropped) if
        the client is gone or does not take it."""
        transport = request.transport
        if transport is None or transport.is_closing():
            return False
        try:
            async with asyncio.timeout(self.service.io_timeout):
                await response.write(data)
        except TimeoutError:
            transport.abort()
            return False
        except ConnectionResetError:
            return False
        return True
