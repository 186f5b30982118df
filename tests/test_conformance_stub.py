"""`gateway conformance` against a deliberately lossy gateway: it must name each kind of loss.

`LossyStub` is a small same-format aiohttp proxy (an OpenAI client to the OpenAI wire, and so on)
in front of the conformance upstream, that breaks the contract in one way per mode: it maps
every stop value to the plain one, turns the context window into max_tokens, delivers a cut tool
call as a complete one, drops usage, swallows error events and broken streams (a clean close, or
a terminator added as if all were well), or answers HTTP 500 for an answer cut at max tokens.
Each test runs the cases its mode breaks and checks the verdict and the named loss, so a judge
that stopped seeing a loss fails here.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import aiohttp
import orjson
import pytest
from aiohttp import web

from gateway.conformance.cases import BY_ID, FORMATS
from gateway.conformance.client import Target
from gateway.conformance.run import Result, Selection, run_cases
from gateway.conformance.upstream import Background
from gateway.edge import make_runner

PATHS = {
    "openai": "/v1/chat/completions",
    "anthropic": "/v1/messages",
    "responses": "/v1/responses",
}
PLAIN = {"openai": "stop", "anthropic": "end_turn"}
TERMINATOR = {
    "openai": b"data: [DONE]\n\n",
    "anthropic": b'event: message_stop\ndata: {"type":"message_stop"}\n\n',
    "responses": b'event: response.completed\ndata: {"type":"response.completed","response":'
    b'{"id":"r","object":"response","status":"completed","output":[]}}\n\n',
}


# --- what each mode does to one JSON object of an answer ---------------------------------------


def stop_everything(obj: dict[str, Any], wire: str) -> None:
    """Every stop value becomes the plain one: a cut answer looks complete."""
    for choice in obj.get("choices") or []:
        if choice.get("finish_reason") is not None:
            choice["finish_reason"] = "stop"
    delta = obj.get("delta") if obj.get("type") == "message_delta" else None
    for holder in (delta, obj if obj.get("type") == "message" else None):
        if isinstance(holder, dict) and holder.get("stop_reason") is not None:
            holder["stop_reason"] = "end_turn"
    response = obj.get("response") if "response" in obj else obj
    if isinstance(response, dict) and response.get("status") == "incomplete":
        response["status"], response["incomplete_details"] = "completed", None
        if obj.get("type") == "response.incomplete":
            obj["type"] = "response.completed"


def context_as_max(obj: dict[str, Any], wire: str) -> None:
    for holder in (obj.get("delta"), obj):
        if (
            isinstance(holder, dict)
            and holder.get("stop_reason") == "model_context_window_exceeded"
        ):
            holder["stop_reason"] = "max_tokens"


def cut_tools_complete(obj: dict[str, Any], wire: str) -> None:
    """A tool call cut at max tokens delivered as a normal complete one."""
    for choice in obj.get("choices") or []:
        if choice.get("finish_reason") == "length":
            choice["finish_reason"] = "tool_calls"
    for holder in (obj.get("delta"), obj):
        if isinstance(holder, dict) and holder.get("stop_reason") == "max_tokens":
            holder["stop_reason"] = "tool_use"
    response = obj.get("response") if "response" in obj else obj
    if isinstance(response, dict) and response.get("status") == "incomplete":
        response["status"], response["incomplete_details"] = "completed", None
        if obj.get("type") == "response.incomplete":
            obj["type"] = "response.completed"
        for item in response.get("output") or []:
            item["status"] = "completed"


def drop_usage(obj: dict[str, Any], wire: str) -> None:
    obj.pop("usage", None)
    for holder in (obj.get("message"), obj.get("response")):
        if isinstance(holder, dict):
            holder.pop("usage", None)


MUTATE: dict[str, Callable[[dict[str, Any], str], None]] = {
    "stop-everything": stop_everything,
    "context-as-max": context_as_max,
    "cut-tools-complete": cut_tools_complete,
    "drop-usage": drop_usage,
}


def is_error_event(obj: dict[str, Any]) -> bool:
    return bool(obj.get("error")) or obj.get("type") in ("error", "response.failed")


def mutate_event(block: bytes, mode: str, wire: str) -> bytes | None:
    """One SSE event as the stub passes it on (None: dropped)."""
    lines = block.split(b"\n")
    data = b"\n".join(line[6:] for line in lines if line.startswith(b"data: "))
    try:
        obj = orjson.loads(data)
    except orjson.JSONDecodeError:
        return block + b"\n\n"
    if not isinstance(obj, dict):
        return block + b"\n\n"
    if mode in ("drop-errors", "add-terminator") and is_error_event(obj):
        return None
    if mode == "drop-usage" and obj.get("choices") == []:
        return None
    if mode in MUTATE:
        MUTATE[mode](obj, wire)
    head = [line for line in lines if line.startswith(b"event: ")]
    if obj.get("type") and head:
        head = [b"event: " + str(obj["type"]).encode()]
    return b"\n".join([*head, b"data: " + orjson.dumps(obj)]) + b"\n\n"


# --- the stub ----------------------------------------------------------------------------------


class LossyStub:
    def __init__(self, upstream: str, mode: str) -> None:
        self.upstream, self.mode = upstream, mode
        self.session: aiohttp.ClientSession | None = None

    def app(self) -> web.Application:
        app = web.Application()
        for wire, path in PATHS.items():
            app.router.add_post(path, self._handler(wire))
        app.router.add_get("/", self._root)
        return app

    async def _root(self, request: web.Request) -> web.Response:
        return web.Response(text="a lossy stub")

    def _handler(self, wire: str) -> Callable[[web.Request], Any]:
        async def handle(request: web.Request) -> web.StreamResponse:
            assert self.session is not None
            body = await request.read()
            async with self.session.post(self.upstream + PATHS[wire], data=body) as upstream:
                if "event-stream" not in upstream.headers.get("content-type", ""):
                    return await self._whole(upstream, wire)
                if self.mode == "error-500":
                    return await self._buffered(upstream, wire)
                return await self._stream(request, upstream, wire)

        return handle

    async def _whole(self, upstream: aiohttp.ClientResponse, wire: str) -> web.Response:
        try:
            raw = await upstream.read()
        except aiohttp.ClientError:
            return web.json_response({"error": {"message": "broken upstream"}}, status=502)
        try:
            obj = orjson.loads(raw)
        except orjson.JSONDecodeError:
            return web.Response(body=raw, status=upstream.status, content_type="application/json")
        if self.mode in MUTATE and isinstance(obj, dict):
            MUTATE[self.mode](obj, wire)
        if self.mode == "error-500" and cut(raw):
            return web.json_response(
                {"error": {"message": "cut", "type": "server_error"}}, status=500
            )
        return web.Response(
            body=orjson.dumps(obj), status=upstream.status, content_type="application/json"
        )

    async def _buffered(self, upstream: aiohttp.ClientResponse, wire: str) -> web.Response:
        raw = await upstream.read()
        if cut(raw):
            return web.json_response(
                {"error": {"message": "cut", "type": "server_error"}}, status=500
            )
        return web.Response(body=raw, content_type="text/event-stream")

    async def _stream(
        self, request: web.Request, upstream: aiohttp.ClientResponse, wire: str
    ) -> web.StreamResponse:
        response = web.StreamResponse(headers={"content-type": "text/event-stream"})
        await response.prepare(request)
        buffer, ended = b"", False
        try:
            async for data in upstream.content.iter_any():
                buffer += data.replace(b"\r\n", b"\n")
                while b"\n\n" in buffer:
                    block, buffer = buffer.split(b"\n\n", 1)
                    ended = ended or is_terminator(block)
                    out = mutate_event(block, self.mode, wire)
                    if out is not None:
                        await response.write(out)
        except aiohttp.ClientError:
            pass  # the upstream broke: every mode just goes on as if it had not
        if self.mode == "add-terminator" and not ended:
            await response.write(TERMINATOR[wire])
        await response.write_eof()
        return response


def cut(raw: bytes) -> bool:
    return any(word in raw for word in (b'"length"', b'"max_tokens"', b'"max_output_tokens"'))


def is_terminator(block: bytes) -> bool:
    return b"[DONE]" in block or b"message_stop" in block or b"response.completed" in block


# --- running it --------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def upstream() -> Iterator[str]:
    background = Background("127.0.0.1", 0)
    port = background.start()
    yield f"http://127.0.0.1:{port}"
    background.stop()


@pytest.fixture
async def scored(upstream: str) -> AsyncIterator[Callable[..., Any]]:
    """`await scored(mode, "max-tokens", ...)`: the results, by id, of running those cases
    same-format (client format = upstream wire) through a LossyStub in `mode`."""
    opened: list[tuple[web.AppRunner, aiohttp.ClientSession]] = []

    async def run(mode: str, *cases: str, stall: float = 0.5) -> dict[str, Result]:
        lossy = LossyStub(upstream, mode)
        lossy.session = aiohttp.ClientSession()
        runner = make_runner(lossy.app(), access_log=None)
        await runner.setup()
        await web.TCPSite(runner, "127.0.0.1", 0).start()
        opened.append((runner, lossy.session))
        url = f"http://127.0.0.1:{runner.addresses[0][1]}"
        found: dict[str, Result] = {}
        for wire in FORMATS:
            selection = Selection((wire,), (wire,), [BY_ID[name] for name in ("stop", *cases)])
            target = Target(url, "k", timeout=10, stall=stall, run=f"{mode}-{wire}")
            for result in await run_cases(target, selection, upstream):
                found[result.id] = result
        return found

    yield run
    for runner, session in opened:
        await session.close()
        await runner.cleanup()


def verdicts(results: dict[str, Result], case: str) -> dict[str, tuple[str, str]]:
    return {
        rid: (r.verdict, "; ".join(r.lost))
        for rid, r in results.items()
        if r.case == case and r.verdict != "skipped"
    }


async def test_a_stub_that_says_stop_for_everything_hides_every_cut(scored) -> None:
    results = await scored("stop-everything", "max-tokens", "context-window", "content-filter")
    for case in ("max-tokens", "context-window", "content-filter"):
        found = verdicts(results, case)
        assert found, case
        for rid, (verdict, lost) in found.items():
            assert verdict == "hidden", (rid, lost)
            assert "shown as " in lost, (rid, lost)
    for rid, (verdict, lost) in verdicts(results, "stop").items():
        assert verdict == "faithful", (rid, lost)


async def test_a_context_window_shown_as_max_tokens_is_lossy(scored) -> None:
    results = await scored("context-as-max", "context-window")
    found = verdicts(results, "context-window")
    assert set(found) == {
        "context-window/anthropic/anthropic/whole",
        "context-window/anthropic/anthropic/stream",
    }
    for verdict, lost in found.values():
        assert (verdict, lost) == ("lossy", "context window shown as max_tokens")


async def test_a_cut_tool_call_delivered_as_complete_is_hidden(scored) -> None:
    results = await scored("cut-tools-complete", "tool-cut")
    found = verdicts(results, "tool-cut")
    assert len(found) == 6
    for rid, (verdict, lost) in found.items():
        assert verdict == "hidden", (rid, lost)
        assert "the cut tool call delivered as a complete one" in lost, (rid, lost)


async def test_dropped_usage_is_named(scored) -> None:
    results = await scored("drop-usage", "usage")
    found = verdicts(results, "usage")
    assert len(found) == 6
    for rid, (verdict, lost) in found.items():
        assert (verdict, lost) == ("lossy", "usage dropped"), rid


async def test_an_http_500_for_a_max_tokens_answer_is_an_error(scored) -> None:
    results = await scored("error-500", "max-tokens")
    found = verdicts(results, "max-tokens")
    assert len(found) == 6
    for rid, (verdict, lost) in found.items():
        assert (verdict, lost) == ("error", "HTTP 500 for an answer cut at max tokens"), rid


async def test_swallowed_errors_and_breaks_are_lossy(scored) -> None:
    results = await scored("drop-errors", "error-event", "reset-text", "no-terminator", "stall")
    for case in ("error-event", "reset-text", "no-terminator", "stall"):
        streams = {k: v for k, v in verdicts(results, case).items() if k.endswith("/stream")}
        assert len(streams) == 3, case
        for rid, (verdict, lost) in streams.items():
            assert verdict == "lossy", (rid, lost)
            assert lost.startswith("stream ended without an error event"), (rid, lost)


async def test_a_terminator_after_a_break_is_hidden(scored) -> None:
    results = await scored("add-terminator", "error-event", "reset-text", "no-terminator")
    for case in ("error-event", "reset-text", "no-terminator"):
        streams = {k: v for k, v in verdicts(results, case).items() if k.endswith("/stream")}
        assert len(streams) == 3, case
        for rid, (verdict, lost) in streams.items():
            assert verdict == "hidden", (rid, lost)
            assert "a broken stream ended by" in lost, (rid, lost)
