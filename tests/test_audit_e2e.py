"""The audit trail end to end: N concurrent exchanges through a real gateway give exactly N records.

Each test builds its own gateway app (`build_app`) on its own store, serves it with aiohttp's
`AppRunner` on a loopback port in the test's own loop, in front of a loopback `FakeUpstream` (both
wires) and the offline mock provider. Clients are raw aiohttp (both client formats, streaming and
not) plus the async SDKs. Once the requests are done the runner is stopped, which flushes the
background writer, and the store is read back: every request id the clients got has exactly one
record, with the stop reason, cut, withheld tool calls, HTTP status and error class of its case.
Both stores run: SQLite in `tmp_path` and PostgreSQL in a fresh schema (tests/audit_util.py).

The helpers here (`Servers`, `gateway_settings`, `exchange_cases`, `send`) are shared with
tests/test_metrics.py and tests/test_audit_command_e2e.py.
"""

from __future__ import annotations

import asyncio
import inspect
from collections import Counter
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import aiohttp
import anthropic
import openai
import orjson
import pytest
from aiohttp import web

from gateway.app import GATEWAY, build_app
from gateway.audit.opening import open_store
from gateway.audit.postgres_store import PostgresStore
from gateway.audit.record import AuditRecord
from gateway.audit.sqlite_store import SQLiteStore
from gateway.settings import Settings, parse_settings
from tests.audit_util import BACKENDS, open_backend
from tests.scenarios import Answer, Tool, script_for
from tests.upstream import FakeUpstream, Script

PROMPT = [{"role": "user", "content": "What is the weather in Paris?"}]
OK_CALL = Tool("call_ok_1", "lookup", '{"city": "Paris", "unit": "celsius"}')
CUT_CALL = Tool("call_cut_2", "search", '{"query": "weather in Par')
ERROR_500 = orjson.dumps({"error": {"message": "The server had an error", "type": "server_error"}})
CLIENT_KEY = "sk-client-e2e"
PATHS = {"openai": "/v1/chat/completions", "anthropic": "/v1/messages"}
PREFIX = {"openai": "oa", "anthropic": "an", "mock": "mock"}
TIMEOUT = aiohttp.ClientTimeout(total=30)


# --- serving apps in the test's loop ------------------------------------------------------------


class Servers:
    """aiohttp apps served on loopback ports in the running loop; `close` stops what is left."""

    def __init__(self) -> None:
        self._runners: list[web.AppRunner] = []

    async def start(self, app: web.Application) -> tuple[web.AppRunner, str]:
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        self._runners.append(runner)
        return runner, f"http://127.0.0.1:{runner.addresses[0][1]}"

    async def stop(self, runner: web.AppRunner) -> None:
        """Stop one server: stop accepting, let handlers end, run the app's cleanup."""
        if runner in self._runners:
            self._runners.remove(runner)
            await runner.cleanup()

    async def close(self) -> None:
        for runner in reversed(self._runners):
            await runner.cleanup()
        self._runners.clear()


@pytest.fixture
async def servers() -> AsyncIterator[Servers]:
    s = Servers()
    yield s
    await s.close()


def gateway_settings(upstream_url: str, store: str, **audit: Any) -> Settings:
    """Three providers: `openai` and `anthropic` wires on the fake upstream, and the mock."""
    return parse_settings(
        {
            "providers": {
                "openai": {
                    "kind": "openai",
                    "base_url": f"{upstream_url}/v1",
                    "api_key": "sk-upstream-openai-e2e",
                    "timeout": 10,
                    "retry": {"attempts": 1},
                },
                "anthropic": {
                    "kind": "anthropic",
                    "base_url": upstream_url,
                    "api_key": "sk-upstream-anthropic-e2e",
                    "timeout": 10,
                    "retry": {"attempts": 1},
                },
                "mock": {"kind": "mock"},
            },
            "routes": [
                {"match": "oa-*", "provider": "openai"},
                {"match": "an-*", "provider": "anthropic"},
                {"match": "mock-*", "provider": "mock"},
            ],
            "audit": {"store": store, **audit},
            "circuit": {"failures": 0},
        }
    )


async def wait_idle(app: web.Application, timeout: float = 10.0) -> None:
    """Until no exchange is in flight (each one's record has gone to the observer)."""
    observer = app[GATEWAY].observer
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while observer.in_flight:
        assert loop.time() < deadline, f"{observer.in_flight} exchanges still in flight"
        await asyncio.sleep(0.02)


# --- the cases ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Expect:
    """What the audit record of one case must say."""

    status: int
    stop_reason: str | None
    truncated: bool = False
    cut_reason: str | None = None
    withheld: tuple[str, ...] = ()  # withheld tool names, in call order
    withheld_ids: tuple[str, ...] | None = None  # when the ids are known in advance
    error_class: str | None = None
    terminator_seen: bool | None = None
    tool_calls: int = 0
    parse_failures: int = 0
    routed: bool = True  # a route matched: provider, route, upstream model are set


@dataclass(frozen=True)
class Case:
    name: str
    client: str  # client format: "openai" | "anthropic"
    upstream: str  # provider name: "openai" | "anthropic" | "mock" | "-" (never routed)
    stream: bool
    model: str
    expect: Expect
    script: Script | None = None  # what the fake upstream plays for `model`
    raw: bytes | None = None  # a body sent as is (invalid JSON)
    via: str = "aiohttp"  # or "sdk"
    extra: dict[str, Any] = field(default_factory=dict)  # more request fields


def _fake_case(wire: str, outcome: str, stream: bool, client: str) -> Case:
    model = f"{PREFIX[wire]}-{outcome}-{'stream' if stream else 'whole'}-{client}"
    term = True if stream else None
    cut_native = "length" if wire == "openai" else "max_tokens"
    if outcome == "stop":
        answer = Answer(text="It is sunny in Paris.")
        expect = Expect(200, "stop", terminator_seen=term)
    elif outcome == "tool_calls":
        answer = Answer(tools=[OK_CALL])
        expect = Expect(200, "tool_calls", terminator_seen=term, tool_calls=1)
    elif outcome == "length_cut_tool":
        answer = Answer(text="Let me check.", tools=[OK_CALL, CUT_CALL], native_stop=cut_native)
        expect = Expect(
            200,
            "length",
            truncated=True,
            cut_reason="length",
            withheld=(OK_CALL.name, CUT_CALL.name),
            withheld_ids=(OK_CALL.id, CUT_CALL.id),
            terminator_seen=term,
            tool_calls=2,
            # An Anthropic whole body carries tool input as an object: nothing left to parse.
            parse_failures=0 if wire == "anthropic" and not stream else 1,
        )
    elif outcome == "refusal":
        # The OpenAI wire has no refusal stop reason: its filter is content_filter.
        native = "content_filter" if wire == "openai" else "refusal"
        answer = Answer(text="I can't help.", native_stop=native)
        expect = Expect(200, native, terminator_seen=term)
    elif outcome == "no_terminator":
        assert stream
        answer = Answer(text="It is sunny in", terminator=False)
        expect = Expect(
            200,
            "error",
            truncated=True,
            cut_reason="missing_terminator",
            error_class="stream_truncated",
            terminator_seen=False,
        )
    else:
        assert outcome == "upstream_500"
        script = Script(status=500, body=ERROR_500)
        expect = Expect(500, None, error_class="UpstreamStatusError")
        return Case(model, client, wire, stream, model, expect, script)
    return Case(model, client, wire, stream, model, expect, script_for(wire, answer, model, stream))


def _mock_case(scenario: str, stream: bool, client: str) -> Case:
    model = f"mock-{scenario}"
    name = f"{model}-{'stream' if stream else 'whole'}-{client}"
    term = True if stream else None
    expects = {
        "text": Expect(200, "stop", terminator_seen=term),
        "tool": Expect(200, "tool_calls", terminator_seen=term, tool_calls=1),
        "tool-cut": Expect(
            200,
            "length",
            truncated=True,
            cut_reason="length",
            withheld=("get_weather",),
            terminator_seen=term,
            tool_calls=1,
            parse_failures=1 if stream else 0,  # the whole body folds the cut input to {}
        ),
        "refusal": Expect(200, "refusal", terminator_seen=term),
        "no-terminator": Expect(
            200,
            "error",
            truncated=True,
            cut_reason="missing_terminator",
            error_class="stream_truncated",
            terminator_seen=False,
        ),
    }
    if scenario == "error-mid-stream":
        if stream:  # the error event comes after text: the stream already started
            expect = Expect(
                200,
                "error",
                truncated=True,
                cut_reason="upstream_error",
                error_class="stream_upstream_error",
                terminator_seen=False,
            )
        else:  # a whole body: the upstream's overloaded error, 529 (503 for OpenAI clients)
            status = 503 if client == "openai" else 529
            expect = Expect(status, None, error_class="UpstreamStatusError")
    else:
        expect = expects[scenario]
    return Case(name, client, "mock", stream, model, expect)


FAKE_OUTCOMES = (
    "stop",
    "tool_calls",
    "length_cut_tool",
    "refusal",
    "no_terminator",
    "upstream_500",
)
MOCK_SCENARIOS = ("text", "tool", "tool-cut", "refusal", "no-terminator", "error-mid-stream")


def exchange_cases(sdk: bool = True, invalid: bool = True) -> list[Case]:
    """Every (client format, upstream, stream, outcome) combination, with deterministic models;
    optionally the SDK clients and the requests no route or parser accepts."""
    cases: list[Case] = []
    for client in ("openai", "anthropic"):
        for stream in (False, True):
            for wire in ("openai", "anthropic"):
                for outcome in FAKE_OUTCOMES:
                    if outcome == "no_terminator" and not stream:
                        continue  # a whole body has no stream terminator to miss
                    cases.append(_fake_case(wire, outcome, stream, client))
            for scenario in MOCK_SCENARIOS:
                if scenario == "no-terminator" and not stream:
                    continue
                cases.append(_mock_case(scenario, stream, client))
    if sdk:
        for client in ("openai", "anthropic"):
            for stream in (False, True):
                kind = "stream" if stream else "whole"
                base = _fake_case("anthropic", "length_cut_tool", stream, client)
                model = f"an-sdk-cut-{kind}-{client}"
                script = script_for(
                    "anthropic",
                    Answer(
                        text="Let me check.", tools=[OK_CALL, CUT_CALL], native_stop="max_tokens"
                    ),
                    model,
                    stream,
                )
                cases.append(
                    Case(
                        f"sdk-{model}",
                        client,
                        "anthropic",
                        stream,
                        model,
                        base.expect,
                        script,
                        via="sdk",
                    )
                )
    if invalid:
        for client in ("openai", "anthropic"):
            cases.append(
                Case(
                    f"invalid-json-{client}",
                    client,
                    "-",
                    False,
                    "",
                    Expect(400, None, error_class="InvalidJSON", routed=False),
                    raw=b'{"model": "oa-stop", "messages": [',
                )
            )
            cases.append(
                Case(
                    f"unknown-model-{client}",
                    client,
                    "-",
                    False,
                    f"nobody-serves-this-{client}",
                    Expect(404, None, error_class="ModelNotFound", routed=False),
                )
            )
    return cases


def script_all(upstream: FakeUpstream, cases: list[Case]) -> None:
    for case in cases:
        if case.script is not None:
            upstream.script(case.model, case.script)


# --- clients ------------------------------------------------------------------------------------


@dataclass
class Sent:
    case: Case
    request_id: str
    status: int
    body: bytes


def request_body(case: Case) -> dict[str, Any]:
    body: dict[str, Any] = {"model": case.model, "messages": PROMPT, "stream": case.stream}
    if case.client == "anthropic":
        body["max_tokens"] = 256
    elif case.stream:
        body["stream_options"] = {"include_usage": True}
    return {**body, **case.extra}


def client_headers(fmt: str) -> dict[str, str]:
    if fmt == "anthropic":
        return {"x-api-key": CLIENT_KEY, "anthropic-version": "2023-06-01"}
    return {"authorization": f"Bearer {CLIENT_KEY}"}


async def send(session: aiohttp.ClientSession, base: str, case: Case) -> Sent:
    """One exchange; returns once the client has the whole response."""
    if case.via == "sdk":
        return await _send_sdk(base, case)
    url = base + PATHS[case.client]
    headers = {"content-type": "application/json", **client_headers(case.client)}
    data = case.raw if case.raw is not None else orjson.dumps(request_body(case))
    async with session.post(url, data=data, headers=headers, timeout=TIMEOUT) as resp:
        body = await resp.read()
        return Sent(case, resp.headers["x-request-id"], resp.status, body)


async def _parsed(raw: Any) -> Any:
    """A raw SDK response's parsed value (a coroutine in some SDK versions, not others)."""
    parsed = raw.parse()
    return await parsed if inspect.isawaitable(parsed) else parsed


async def _send_sdk(base: str, case: Case) -> Sent:
    if case.client == "openai":
        oa = openai.AsyncOpenAI(base_url=f"{base}/v1", api_key=CLIENT_KEY, max_retries=0)
        async with oa:
            raw = await oa.chat.completions.with_raw_response.create(
                model=case.model, messages=PROMPT, stream=case.stream
            )
            parsed = await _parsed(raw)
            if case.stream:
                chunks = [chunk async for chunk in parsed]
                body = orjson.dumps([c.model_dump() for c in chunks])
            else:
                body = orjson.dumps(parsed.model_dump())
            return Sent(case, raw.headers["x-request-id"], raw.status_code, body)
    an = anthropic.AsyncAnthropic(base_url=base, api_key=CLIENT_KEY, max_retries=0)
    async with an:
        raw = await an.messages.with_raw_response.create(
            model=case.model, max_tokens=256, messages=PROMPT, stream=case.stream
        )
        parsed = await _parsed(raw)
        if case.stream:
            events = [event async for event in parsed]
            body = orjson.dumps([e.model_dump() for e in events])
        else:
            body = orjson.dumps(parsed.model_dump())
        return Sent(case, raw.headers["x-request-id"], raw.status_code, body)


async def send_all(base: str, cases: list[Case]) -> list[Sent]:
    async with aiohttp.ClientSession() as session:
        return list(await asyncio.gather(*(send(session, base, case) for case in cases)))


# --- checking records ---------------------------------------------------------------------------


def check_record(record: AuditRecord, sent: Sent) -> None:
    case, expect = sent.case, sent.case.expect
    where = f"{case.name}: {record}"
    assert record.id == sent.request_id, where
    assert sent.status == expect.status, (case.name, sent.status, sent.body[:300])
    assert record.http_status == expect.status, where
    assert record.client_format == case.client, where
    assert record.stream is case.stream, where
    assert record.model == case.model, where
    assert record.stop_reason == expect.stop_reason, where
    assert record.truncated is expect.truncated, where
    assert record.cut_reason == expect.cut_reason, where
    assert [c["name"] for c in record.withheld_tool_calls] == list(expect.withheld), where
    if expect.withheld_ids is not None:
        assert [c["id"] for c in record.withheld_tool_calls] == list(expect.withheld_ids), where
    assert record.error_class == expect.error_class, where
    assert record.terminator_seen == expect.terminator_seen, where
    assert record.tool_calls == expect.tool_calls, where
    assert len(record.parse_failures) == expect.parse_failures, where
    for failure in record.parse_failures:
        assert set(failure) == {"error_class", "offset", "length"}, where
    assert record.client_aborted is False, where
    assert record.content is None, where  # log_content is off
    if expect.routed:
        assert record.provider == case.upstream, where
        assert record.route == f"{PREFIX[case.upstream]}-*", where
        assert record.upstream_model == case.model, where
    else:
        assert (record.provider, record.route, record.upstream_model) == (None, None, None), where
    assert record.ended_at is not None and record.first_byte_at is not None, where
    assert record.started_at <= record.first_byte_at <= record.ended_at, where
    if expect.status == 200:
        # What the client saw names the same exchange: gateway.request_id in body or stream.
        assert f'"request_id":"{sent.request_id}"'.encode() in sent.body, case.name
        if not case.stream and case.via == "aiohttp":
            ext = orjson.loads(sent.body)["gateway"]
            assert ext["withheld_tool_calls"] == record.withheld_tool_calls, where
            assert ext["truncated"] is record.truncated, where


def check_all(records: list[AuditRecord], sent: list[Sent]) -> None:
    ids = [s.request_id for s in sent]
    assert len(set(ids)) == len(ids), "request ids must be unique"
    counts = Counter(r.id for r in records)
    assert [i for i, n in counts.items() if n > 1] == [], "duplicate records"
    assert sorted(counts) == sorted(ids), "exactly one record per request"
    by_id = {r.id: r for r in records}
    for s in sent:
        check_record(by_id[s.request_id], s)


# --- the tests ----------------------------------------------------------------------------------


@pytest.fixture
def slow_disk(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, int]]:
    """Every store write takes 0.1 s longer: records are still queued when the server stops,
    so only the flush at shutdown can bring them all to the store. Returns (store url, batch
    size) pairs: other gateways of the session (the shared stack) may write meanwhile."""
    batches: list[tuple[str, int]] = []
    for cls in (SQLiteStore, PostgresStore):
        original = cls.write

        async def slow_write(self: Any, records: Any, _original: Any = original) -> None:
            await asyncio.sleep(0.1)
            batches.append((self.url, len(records)))
            await _original(self, records)

        monkeypatch.setattr(cls, "write", slow_write)
    return batches


@pytest.mark.parametrize("kind", BACKENDS)
async def test_concurrent_exchanges_give_exactly_n_records(kind, tmp_path, servers, slow_disk):
    cases = exchange_cases()
    n = len(cases)
    assert n >= 60
    async with open_backend(kind, tmp_path) as backend:
        upstream = FakeUpstream()
        script_all(upstream, cases)
        _, upstream_url = await servers.start(upstream.app())
        app = build_app(gateway_settings(upstream_url, backend.url), env={})
        runner, base = await servers.start(app)

        sent = await send_all(base, cases)

        await servers.stop(runner)  # stops accepting, ends handlers, flushes the audit writer
        records = await backend.store().fetch()
        assert len(records) == n
        assert await backend.count() == n
        ours = open_store(backend.url).url
        assert sum(size for url, size in slow_disk if url == ours) == n  # once each, batched
        check_all(records, sent)
        # Every kind of outcome really happened, on both stores alike.
        stops = Counter(r.stop_reason for r in records)
        for reason in ("stop", "tool_calls", "length", "refusal", "content_filter", "error"):
            assert stops[reason] > 0, stops
        assert {r.cut_reason for r in records} >= {"length", "missing_terminator", "upstream_error"}


@pytest.mark.parametrize("kind", BACKENDS)
async def test_abandoned_exchanges_are_recorded_as_such(kind, tmp_path, servers):
    """A client that closes its connection after the first chunk of a slow stream, and one that
    gives up waiting for a whole answer, each leave a record saying so."""
    long = Answer(text="word " * 60)  # 60+ frames at 0.05 s: seconds, unless abandoned
    slow = {
        "oa-slow-stream": ("openai", "openai"),
        "an-slow-stream": ("anthropic", "anthropic"),
        "an-slow-cross": ("openai", "anthropic"),  # an OpenAI client on the Anthropic wire
    }
    async with open_backend(kind, tmp_path) as backend:
        upstream = FakeUpstream()
        for model, (_, wire) in slow.items():
            upstream.script(model, script_for(wire, long, model, stream=True, delay=0.05))
        stall = "oa-slow-whole"
        upstream.script(stall, script_for("openai", long, stall, stream=False, stall=0.5))
        _, upstream_url = await servers.start(upstream.app())
        app = build_app(gateway_settings(upstream_url, backend.url), env={})
        runner, base = await servers.start(app)

        abandoned: dict[str, str] = {}
        async with aiohttp.ClientSession() as session:
            for model, (client, _) in slow.items():
                case = Case(model, client, "-", True, model, Expect(200, None))
                resp = await session.post(
                    base + PATHS[client],
                    data=orjson.dumps(request_body(case)),
                    headers={"content-type": "application/json", **client_headers(client)},
                )
                assert resp.status == 200
                first = await resp.content.readany()
                assert first  # the stream had started for this client
                abandoned[resp.headers["x-request-id"]] = model
                resp.close()  # drop the connection mid-stream
            # A whole answer: the client gives up once the upstream is working on it.
            case = Case(stall, "openai", "-", False, stall, Expect(200, None))
            waiting = asyncio.create_task(
                session.post(
                    base + PATHS["openai"],
                    data=orjson.dumps(request_body(case)),
                    headers={"content-type": "application/json"},
                )
            )
            loop = asyncio.get_running_loop()
            deadline = loop.time() + 10
            while not upstream.received[stall]:
                assert loop.time() < deadline and not waiting.done()
                await asyncio.sleep(0.01)
            waiting.cancel()  # closes the connection before the answer
            with pytest.raises(asyncio.CancelledError):
                await waiting
        await wait_idle(app)
        await servers.stop(runner)
        records = await backend.store().fetch()

    assert len(records) == len(slow) + 1
    by_model = {r.model: r for r in records}
    for request_id, model in abandoned.items():
        record = by_model[model]
        assert record.id == request_id
        assert (record.client_aborted, record.ended_by) == (True, "client"), record
        assert record.truncated is True, record
        assert record.cut_reason == "cancelled", record
        assert record.stop_reason == "aborted", record
        assert record.error_class == "stream_aborted", record
        assert record.terminator_seen is False, record
        assert record.http_status == 200, record  # the stream had started
        assert record.provider == slow[model][1]
    whole = by_model[stall]
    assert (whole.client_aborted, whole.ended_by) == (True, "client"), whole
    assert whole.provider == "openai" and whole.stream is False
