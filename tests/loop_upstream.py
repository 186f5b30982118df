"""A scripted loopback upstream for agent loops, and the gateways in front of it.

Each test scripts a model name with a SEQUENCE of answers: the n-th request for that model gets
the n-th answer (the last one repeats), so a loop runs the same way every time and runaways,
stalls and cut responses happen on demand. Answers are wire-neutral (`Say`, `Fail`) and rendered
in the wire of the route the gateway took (`/v1/chat/completions` or `/v1/messages`), whole or
streamed as the gateway asked.

    async with LoopStack() as stack:
        model = stack.model_name("openai")            # an upstream speaking the OpenAI wire
        stack.upstream.script(model, Say(calls=[("get_weather", {"city": "Paris"})]), Say("ok"))
        client = stack.client("anthropic", "withhold", model)   # Anthropic client, gateway
        result = await AgentLoop(client, [weather]).run("Weather?")
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from gateway.app import build_app
from gateway.loop import (
    AnthropicMessagesClient,
    Hooks,
    HTTPModelClient,
    OpenAIChatClient,
    OpenAIResponsesClient,
    ToolCall,
    ToolResult,
)
from gateway.loop import Tool as LoopTool
from gateway.settings import parse_settings
from tests.conftest import free_port, stack_settings
from tests.scenarios import (
    Answer,
    Tool,
    anthropic_body,
    anthropic_events,
    openai_body,
    openai_chunks,
)
from tests.upstream import anthropic_sse, openai_sse

# The native stop value each wire sends for a wire-neutral ending.
NATIVE = {
    "openai": {
        "stop": "stop",
        "length": "length",
        "context_window": "model_length",
        "refused": "content_filter",
        "unknown": "some_future_reason",
        "error": "error",
    },
    "anthropic": {
        "stop": "end_turn",
        "length": "max_tokens",
        "context_window": "model_context_window_exceeded",
        "refused": "refusal",
        "unknown": "some_future_reason",
        "pause": "pause_turn",
        "stop_sequence": "stop_sequence",
    },
}
# (client format, upstream wire): same-format passthrough and both translations.
PAIRS = [
    ("openai", "openai"),
    ("anthropic", "anthropic"),
    ("openai", "anthropic"),
    ("anthropic", "openai"),
]
PAIR_IDS = [f"{client}>{wire}" for client, wire in PAIRS]
POLICIES = ("withhold", "pass")


@dataclass
class Say:
    """One model answer. `calls` are (name, arguments as a dict or raw JSON text). `stop`: None
    for the natural end (tool calls or end of turn), or a key of NATIVE. `broken`: a stream that
    just ends, without its terminator. `delay`: seconds before answering (released at exit)."""

    text: str = ""
    calls: list[tuple[str, Any]] = field(default_factory=list)
    stop: str | None = None
    broken: bool = False
    delay: float = 0.0
    thinking: str = ""  # a thinking block first, signed `sig_<n>` (Anthropic wire only)


@dataclass
class Fail:
    status: int = 500
    message: str = "upstream failure"


Reply = Say | Fail


def _answer(say: Say, wire: str, n: int) -> Answer:
    tools = [
        Tool(f"call_{n}_{k}", name, args if isinstance(args, str) else json.dumps(args))
        for k, (name, args) in enumerate(say.calls)
    ]
    native = NATIVE[wire][say.stop] if say.stop else None
    signature = f"sig_{n}" if say.thinking else None
    return Answer(
        text=say.text,
        tools=tools,
        native_stop=native,
        terminator=not say.broken,
        thinking=say.thinking,
        signature=signature,
    )


def _error_body(fail: Fail, wire: str) -> dict[str, Any]:
    if wire == "openai":
        return {"error": {"message": fail.message, "type": "server_error", "code": None}}
    return {"type": "error", "error": {"type": "api_error", "message": fail.message}}


class LoopUpstream:
    def __init__(self) -> None:
        self.scripts: dict[str, list[Reply]] = {}
        self.received: dict[str, list[dict[str, Any]]] = {}
        self.release = asyncio.Event()

    def script(self, model: str, *replies: Reply) -> None:
        self.scripts[model] = list(replies)
        self.received[model] = []

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_post("/v1/chat/completions", self.handle)
        app.router.add_post("/v1/messages", self.handle)
        return app

    async def handle(self, request: web.Request) -> web.StreamResponse:
        body = await request.json()
        model = body.get("model", "")
        replies = self.scripts.get(model)
        if not replies:
            return web.json_response({"error": {"message": f"unscripted {model}"}}, status=599)
        n = len(self.received[model])
        self.received[model].append(body)
        reply = replies[min(n, len(replies) - 1)]
        wire = "openai" if request.path.endswith("/chat/completions") else "anthropic"
        if isinstance(reply, Fail):
            return web.json_response(_error_body(reply, wire), status=reply.status)
        if reply.delay:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.release.wait(), reply.delay)
        answer = _answer(reply, wire, n)
        if not body.get("stream"):
            render = openai_body if wire == "openai" else anthropic_body
            return web.json_response(render(answer, model))
        if wire == "openai":
            frames = openai_sse(openai_chunks(answer, model), done=answer.terminator)
        else:
            cut_tool = reply.stop == "length" and bool(reply.calls)  # the block is left open
            frames = anthropic_sse(anthropic_events(answer, model, cut_tool))
        response = web.StreamResponse(headers={"content-type": "text/event-stream"})
        await response.prepare(request)
        for frame in frames:
            await response.write(frame)
        await response.write_eof()
        return response


class LoopStack:
    """The scripted upstream and two gateways in front of it (`withhold` and `pass`), on the
    test's own event loop. `client(fmt, "direct", model)` talks to the upstream itself."""

    def __init__(self) -> None:
        self.upstream = LoopUpstream()
        self.urls: dict[str, str] = {}
        self._runners: list[web.AppRunner] = []
        self._clients: list[HTTPModelClient] = []

    async def _serve(self, app: web.Application) -> str:
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        await web.TCPSite(runner, "127.0.0.1", 0).start()
        self._runners.append(runner)
        return f"http://127.0.0.1:{runner.addresses[0][1]}"

    async def __aenter__(self) -> LoopStack:
        self.urls["direct"] = await self._serve(self.upstream.app())
        dead = f"http://127.0.0.1:{free_port()}/v1"
        for policy in POLICIES:
            settings = parse_settings(stack_settings(self.urls["direct"], policy, dead))
            self.urls[policy] = await self._serve(build_app(settings, env={}))
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.upstream.release.set()
        for client in self._clients:
            await client.close()
        for runner in reversed(self._runners):
            await runner.cleanup()

    @staticmethod
    def model_name(wire: str) -> str:
        """A fresh model name that the gateways route to an upstream speaking `wire`."""
        return f"{'oa' if wire == 'openai' else 'an'}-{uuid.uuid4().hex[:10]}"

    def client(
        self, fmt: str, via: str, model: str, *, stream: bool = False, max_tokens: int = 256
    ) -> HTTPModelClient:
        """A loop client in format `fmt` through the gateway `via` ("withhold", "pass") or
        straight to the upstream ("direct")."""
        base = self.urls[via]
        client: HTTPModelClient
        if fmt == "openai":
            client = OpenAIChatClient(
                base + "/v1", "sk-test", model, max_tokens=max_tokens, stream=stream
            )
        elif fmt == "responses":
            client = OpenAIResponsesClient(
                base + "/v1", "sk-test", model, max_tokens=max_tokens, stream=stream
            )
        else:
            client = AnthropicMessagesClient(
                base, "sk-test", model, max_tokens=max_tokens, stream=stream
            )
        self._clients.append(client)
        return client

    def requests(self, model: str) -> list[dict[str, Any]]:
        return self.upstream.received[model]


# --- a tool and hooks that count what reaches them -----------------------------------------------


class Counting:
    """A tool that records every call it runs, and hooks that record every call they see. The
    tool raises when `fail` is True or names the call's path; the permission check refuses the
    paths in `deny`."""

    def __init__(self, fail: bool | tuple[str, ...] = False, deny: tuple[str, ...] = ()) -> None:
        self.fail = fail
        self.deny = deny
        self.runs: list[dict[str, Any]] = []
        self.permission: list[str] = []
        self.before: list[str] = []
        self.after: list[tuple[str, bool]] = []
        self.on_run: Callable[[], None] | None = None

    async def _run(self, args: dict[str, Any]) -> str:
        self.runs.append(args)
        if self.on_run is not None:
            self.on_run()
        if self.fail is True or (self.fail and args.get("path") in self.fail):
            raise OSError("disk on fire")
        return f"contents of {args.get('path')}"

    def tool(self, name: str = "read_file") -> LoopTool:
        schema = {
            "type": "object",
            "properties": {"path": {"type": "string"}},
            "required": ["path"],
        }
        return LoopTool(name, "Read a file", schema, self._run)

    async def _permission(self, call: ToolCall) -> bool:
        self.permission.append(call.id)
        return not (call.parsed and call.parsed.get("path") in self.deny)

    async def _before(self, call: ToolCall) -> None:
        self.before.append(call.id)

    async def _after(self, call: ToolCall, result: ToolResult) -> None:
        self.after.append((call.id, result.is_error))

    def hooks(self) -> Hooks:
        return Hooks(self._permission, self._before, self._after)

    @property
    def reached(self) -> tuple[int, int, int, int]:
        """(tool runs, permission checks, before hooks, after hooks)."""
        return len(self.runs), len(self.permission), len(self.before), len(self.after)


def read(path: str = "a.py") -> tuple[str, dict[str, Any]]:
    return ("read_file", {"path": path})
