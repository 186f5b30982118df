"""OpenTelemetry export against a real OTLP/HTTP receiver on loopback.

`Collector` is an aiohttp app taking `POST /v1/traces` with protobuf bodies, decoded with
opentelemetry-proto's `ExportTraceServiceRequest`. Real gateway apps (gateway.app.build_app)
export to it over the SDK's OTLP/HTTP exporter; a loopback `FakeUpstream` answers them; the
openai and anthropic SDKs are the clients. Every prompt carries `MARKER` (as do the upstream's
answers and tool arguments) and the gateway logs content (`log_content = true`): the marker must
never be in the exported bytes.

- a whole answer, an answer cut at max tokens (a tool call withheld), a streamed cut answer, an
  upstream error and a refusal: one span each, with the GenAI and gateway attributes, the
  exchange's times and an error status for failures;
- an incoming `traceparent` (and `tracestate`) is continued; a not-sampled one exports nothing;
- the collector down: the answers are those of a gateway without export, and /metrics counts the
  failed exports and the spans dropped;
- the collector stalled mid-export: exchanges still complete (export runs on the processor's
  thread), the bounded queue drops and counts what does not fit, and stopping the app returns;
  a batch still waiting when the app stops is flushed;
- with `gateway serve --workers 2`, every worker exports its own spans;
- without export, nothing of OpenTelemetry is imported.
"""

from __future__ import annotations

import ast
import asyncio
import signal
import sqlite3
import subprocess
import sys
import time
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anthropic
import openai
import orjson
import pytest
from aiohttp import web
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span, Status
from prometheus_client.parser import text_string_to_metric_families

from gateway.app import build_app
from gateway.settings import parse_settings
from tests.access_util import wait_for
from tests.conftest import free_port
from tests.mock_config import mock_config
from tests.scenarios import Answer, Tool, script_for
from tests.served import LoopServers
from tests.test_shutdown import GatewayProcess
from tests.upstream import FakeUpstream, Script

MARKER = "zq-marker-7d1f0c"  # never to be exported
WAIT = 15.0  # seconds a span gets to arrive
SERVICE = "gateway-under-test"


@dataclass
class Exported:
    resource: dict[str, Any]
    span: Span

    @property
    def attributes(self) -> dict[str, Any]:
        return attributes(self.span.attributes)


def attributes(pairs: Any) -> dict[str, Any]:
    return {pair.key: value(pair.value) for pair in pairs}


def value(v: AnyValue) -> Any:
    kind = v.WhichOneof("value")
    if kind == "array_value":
        return [value(item) for item in v.array_value.values]
    return getattr(v, kind)


class Collector:
    """An OTLP/HTTP trace receiver. `hold()`: exports wait (the request stays open) until
    `release()`."""

    def __init__(self) -> None:
        self.bodies: list[bytes] = []
        self.spans: list[Exported] = []
        self.holding = 0  # exports waiting for release()
        self._held: asyncio.Event | None = None

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_post("/v1/traces", self.handle)
        return app

    async def handle(self, request: web.Request) -> web.Response:
        body = await request.read()
        assert request.content_type == "application/x-protobuf"
        self.bodies.append(body)
        if self._held is not None:
            self.holding += 1
            await self._held.wait()
        message = ExportTraceServiceRequest.FromString(body)
        for resource_spans in message.resource_spans:
            resource = attributes(resource_spans.resource.attributes)
            for scope_spans in resource_spans.scope_spans:
                self.spans += [Exported(resource, span) for span in scope_spans.spans]
        reply = ExportTraceServiceResponse().SerializeToString()
        return web.Response(body=reply, content_type="application/x-protobuf")

    def hold(self) -> None:
        self._held = asyncio.Event()

    def release(self) -> None:
        assert self._held is not None
        self._held.set()

    def span_of(self, request_id: str) -> Exported:
        """The span of the exchange `request_id`, once it arrived (fails after WAIT)."""
        found = until(lambda: self._find(request_id), f"the span of {request_id}")
        assert isinstance(found, Exported)
        return found

    def _find(self, request_id: str) -> Exported | None:
        spans = [s for s in self.spans if s.attributes["gateway.request_id"] == request_id]
        assert len(spans) <= 1, spans
        return spans[0] if spans else None


def until(condition: Callable[[], Any], what: str, wait: float = WAIT) -> Any:
    found = wait_for(condition, wait)
    if not found:
        raise AssertionError(f"waited {wait}s for {what}")
    return found


def settings(upstream: str, telemetry: dict[str, Any] | None, store: str) -> dict[str, Any]:
    config: dict[str, Any] = {
        "providers": {
            "oa": {"kind": "openai", "base_url": f"{upstream}/v1", "api_key": "sk-up"},
            "an": {"kind": "anthropic", "base_url": upstream, "api_key": "sk-up"},
        },
        "routes": [
            {"match": "renamed", "provider": "oa", "upstream_model": "renamed-upstream"},
            {"match": "oa-*", "provider": "oa"},
            {"match": "an-*", "provider": "an"},
        ],
        "audit": {"store": store, "log_content": True},
        "circuit": {"failures": 0},
    }
    if telemetry is not None:
        config["telemetry"] = telemetry
    for provider in config["providers"].values():
        provider["retry"] = {"attempts": 1}
    return config


class OtelStack(LoopServers):
    def __init__(self, directory: Path) -> None:
        super().__init__()
        self.directory = directory
        self.upstream = FakeUpstream()
        self.collector = Collector()
        self.runners: dict[str, web.AppRunner] = {}

    async def _start(self) -> None:
        self.upstream_url = await self._serve(self.upstream.app())
        self.collector_url = await self._serve(self.collector.app())

    def gateway(self, name: str, telemetry: dict[str, Any] | None) -> str:
        """A gateway app exporting as `telemetry` says (None: no export); its URL."""
        store = f"sqlite:///{self.directory / f'{name}.db'}"
        app = build_app(parse_settings(settings(self.upstream_url, telemetry, store), env={}))
        url = self.run(self._serve(app))
        self.runners[name] = self._runners[-1]
        return url

    def stop_gateway(self, name: str) -> None:
        runner = self.runners.pop(name)
        self._runners.remove(runner)
        self.run(runner.cleanup())

    def on_loop(self, call: Callable[[], None]) -> None:
        async def run() -> None:
            call()

        self.run(run())


def fast(endpoint: str, **more: Any) -> dict[str, Any]:
    return {
        "otlp_endpoint": endpoint,
        "service_name": SERVICE,
        "batch_delay": 0.05,
        "export_timeout": 0.5,
        **more,
    }


@pytest.fixture(scope="module")
def otel(tmp_path_factory: pytest.TempPathFactory) -> Iterator[OtelStack]:
    stack = OtelStack(tmp_path_factory.mktemp("otel"))
    stack.start()
    stack.url = stack.gateway("main", fast(stack.collector_url))  # type: ignore[attr-defined]
    yield stack
    stack.stop()


def oa(url: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{url}/v1", api_key="sk-client", max_retries=0)


def an(url: str) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=url, api_key="sk-client", max_retries=0)


def user(text: str = "") -> list[dict[str, Any]]:
    return [{"role": "user", "content": f"{text} {MARKER}"}]


def model(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def audit_row(db: Path, request_id: str) -> dict[str, Any]:
    def read() -> dict[str, Any] | None:
        with sqlite3.connect(db) as conn:
            conn.row_factory = sqlite3.Row
            row = conn.execute("SELECT * FROM audit_records WHERE id = ?", (request_id,)).fetchone()
        return dict(row) if row else None

    found = until(read, f"the audit record {request_id}")
    assert isinstance(found, dict)
    return found


def assert_no_content(collector: Collector) -> None:
    exported = b"".join(collector.bodies)
    assert exported, "nothing was exported"
    assert MARKER.encode() not in exported


def test_a_whole_answer_is_one_span_with_the_gen_ai_attributes(otel):
    otel.upstream.script(
        "renamed-upstream", script_for("openai", Answer(text=f"fine {MARKER}"), "x", False)
    )
    raw = oa(otel.url).chat.completions.with_raw_response.create(
        model="renamed", messages=user("hello")
    )
    assert raw.parse().choices[0].finish_reason == "stop"
    request_id = raw.headers["x-request-id"]
    exported = otel.collector.span_of(request_id)
    span, a = exported.span, exported.attributes
    a.pop("gateway.cost_usd", None)  # the price table may or may not know the model
    a.pop("gateway.cost_source", None)
    assert span.name == "chat renamed"
    assert span.kind == Span.SPAN_KIND_SERVER
    assert span.status.code == Status.STATUS_CODE_UNSET
    assert not span.parent_span_id
    assert exported.resource["service.name"] == SERVICE
    assert a == {
        "gen_ai.operation.name": "chat",
        "gen_ai.system": "openai",
        "gen_ai.provider.name": "openai",
        "gen_ai.request.model": "renamed",
        "gen_ai.response.model": "renamed-upstream",
        "gen_ai.response.finish_reasons": ["stop"],
        "gen_ai.usage.input_tokens": 12,
        "gen_ai.usage.output_tokens": 34,
        "gateway.request_id": request_id,
        "gateway.client_format": "openai",
        "gateway.stream": False,
        "gateway.route": "renamed",
        "gateway.provider": "oa",
        "gateway.stop_reason": "stop",
        "gateway.native_stop_reason": "stop",
        "gateway.truncated": False,
        "gateway.tool_calls": 0,
        "gateway.withheld_tool_calls": 0,
        "gateway.attempts": 1,
        "gateway.http_status": 200,
    }
    row = audit_row(otel.directory / "main.db", request_id)
    assert span.start_time_unix_nano == int(row["started_at"] * 1e9)
    assert span.end_time_unix_nano == int(row["ended_at"] * 1e9)
    assert span.end_time_unix_nano > span.start_time_unix_nano
    assert_no_content(otel.collector)


def test_an_answer_cut_at_max_tokens_says_truncated_why_and_what_was_withheld(otel):
    name = model("an")
    tool = Tool("toolu_cut", "write_file", f'{{"path": "{MARKER}", "text": "abc')
    answer = Answer(text=f"partial {MARKER}", tools=[tool], native_stop="max_tokens")
    otel.upstream.script(name, script_for("anthropic", answer, name, False))
    raw = an(otel.url).messages.with_raw_response.create(
        model=name, max_tokens=16, messages=user("write it")
    )
    assert raw.parse().stop_reason == "max_tokens"
    exported = otel.collector.span_of(raw.headers["x-request-id"])
    a = exported.attributes
    assert exported.span.name == f"chat {name}"
    assert a["gen_ai.system"] == "anthropic"
    assert a["gateway.client_format"] == "anthropic"
    assert a["gen_ai.response.finish_reasons"] == ["max_tokens"]
    assert a["gateway.native_stop_reason"] == "max_tokens"
    assert a["gateway.stop_reason"] == "length"
    assert a["gateway.truncated"] is True
    assert a["gateway.cut_reason"] == "length"
    assert a["gateway.tool_calls"] == 1
    assert a["gateway.withheld_tool_calls"] == 1
    assert exported.span.status.code == Status.STATUS_CODE_UNSET  # cut, not failed
    assert_no_content(otel.collector)


def test_a_streamed_answer_cut_at_length(otel):
    name = model("oa")
    answer = Answer(text=f"streamed {MARKER} " * 3, native_stop="length")
    otel.upstream.script(name, script_for("openai", answer, name, True))
    raw = oa(otel.url).chat.completions.with_raw_response.create(
        model=name, messages=user("stream"), stream=True
    )
    reasons = [c.choices[0].finish_reason for c in raw.parse() if c.choices]
    assert reasons[-1] == "length"
    a = otel.collector.span_of(raw.headers["x-request-id"]).attributes
    assert a["gateway.stream"] is True
    assert a["gen_ai.response.finish_reasons"] == ["length"]
    assert a["gateway.truncated"] is True
    assert a["gateway.cut_reason"] == "length"
    assert a["gateway.http_status"] == 200
    assert_no_content(otel.collector)


# A stream that broke: how (the upstream's script), and what the gateway's own attributes say.
BROKEN_STREAMS = {
    "connection-lost": (
        dict(drop_after=3),
        Answer(text=f"cut {MARKER} " * 4),
        ("connection_lost", "stream_connection_lost", "gateway:connection_lost"),
    ),
    "no-terminator": (
        {},
        Answer(text=f"cut {MARKER} " * 4, terminator=False),
        ("missing_terminator", "stream_truncated", "gateway:stream_truncated"),
    ),
}


@pytest.mark.parametrize("wire", ["openai", "anthropic"])
@pytest.mark.parametrize("how", list(BROKEN_STREAMS))
def test_a_broken_stream_has_no_finish_reason_of_the_gateways_making(otel, how, wire):
    """The upstream sent no stop value: `gen_ai.response.finish_reasons` is left out (never a
    verdict of the gateway's, such as `gateway:stream_truncated`), and the gateway's own
    attributes say why the answer is cut."""
    knobs, answer, (cut_reason, error_class, native) = BROKEN_STREAMS[how]
    name = model("oa" if wire == "openai" else "an")
    script = script_for(wire, answer, name, True)
    for knob, setting in knobs.items():
        setattr(script, knob, setting)
    otel.upstream.script(name, script)
    raw = oa(otel.url).chat.completions.with_raw_response.create(
        model=name, messages=user("stream"), stream=True
    )
    with pytest.raises(openai.APIError):
        for _ in raw.parse():
            pass
    exported = otel.collector.span_of(raw.headers["x-request-id"])
    a = exported.attributes
    assert "gen_ai.response.finish_reasons" not in a, a
    assert (a["gateway.cut_reason"], a["gateway.error_class"]) == (cut_reason, error_class)
    assert (a["gateway.stop_reason"], a["gateway.native_stop_reason"]) == ("error", native)
    assert a["error.type"] == error_class
    assert a["gateway.truncated"] is True
    assert exported.span.status.code == Status.STATUS_CODE_ERROR
    assert_no_content(otel.collector)


@pytest.mark.parametrize(
    ("stop", "native", "error_class", "finish"),
    [
        ("stop", "end_turn", None, "end_turn"),
        ("error", "abort", None, "abort"),  # vLLM's own stop value for a generation it aborted
        ("error", "overloaded_error", "stream_upstream_error", None),  # an error event's type
        ("error", "timeout_error", "stream_timeout", None),
        ("error", "gateway:connection_lost", "stream_connection_lost", None),
        ("aborted", "api_error", "stream_aborted", None),
        (None, None, "UpstreamStatusError", None),
    ],
)
def test_finish_reasons_are_only_what_the_upstream_sent(stop, native, error_class, finish):
    from gateway.audit.record import AuditRecord
    from gateway.otel import upstream_finish_reason

    record = AuditRecord("r", 0.0, "openai", True, stop_reason=stop, native_stop_reason=native)
    record.error_class = error_class
    assert upstream_finish_reason(record) == finish


def test_an_upstream_error_is_an_error_span(otel):
    name = model("oa")
    error = {"error": {"message": f"boom {MARKER}", "type": "server_error"}}
    otel.upstream.script(name, Script(status=500, body=orjson.dumps(error)))
    with pytest.raises(openai.APIStatusError) as caught:
        oa(otel.url).chat.completions.create(model=name, messages=user("fail"))
    response = caught.value.response
    exported = otel.collector.span_of(response.headers["x-request-id"])
    a = exported.attributes
    assert exported.span.status.code == Status.STATUS_CODE_ERROR
    assert exported.span.status.message == "UpstreamStatusError"
    assert a["error.type"] == a["gateway.error_class"] == "UpstreamStatusError"
    assert a["gateway.http_status"] == response.status_code
    assert a["gateway.attempts"] == 1
    assert a["gateway.truncated"] is False
    assert "gen_ai.response.finish_reasons" not in a
    assert "gateway.stop_reason" not in a
    assert_no_content(otel.collector)


def test_a_refusal_before_routing_still_has_its_span(otel):
    with pytest.raises(openai.NotFoundError) as caught:
        oa(otel.url).chat.completions.create(model="nowhere", messages=user())
    exported = otel.collector.span_of(caught.value.response.headers["x-request-id"])
    a = exported.attributes
    assert exported.span.status.code == Status.STATUS_CODE_ERROR
    assert a["error.type"] == "ModelNotFound"
    assert a["gateway.http_status"] == 404
    assert "gen_ai.system" not in a and "gateway.provider" not in a


def test_an_incoming_traceparent_is_continued(otel):
    name = model("oa")
    otel.upstream.script(name, script_for("openai", Answer(text="ok"), name, False))
    trace_id, parent_id = uuid.uuid4().hex, uuid.uuid4().hex[:16]
    headers = {"traceparent": f"00-{trace_id}-{parent_id}-01", "tracestate": "vendor=abc"}
    raw = oa(otel.url).chat.completions.with_raw_response.create(
        model=name, messages=user(), extra_headers=headers
    )
    span = otel.collector.span_of(raw.headers["x-request-id"]).span
    assert span.trace_id.hex() == trace_id
    assert span.parent_span_id.hex() == parent_id
    assert span.span_id.hex() != parent_id
    assert span.trace_state == "vendor=abc"


def test_a_trace_the_caller_does_not_sample_exports_nothing(otel):
    name = model("oa")
    otel.upstream.script(name, script_for("openai", Answer(text="ok"), name, False))
    client = oa(otel.url).chat.completions.with_raw_response
    unsampled = f"00-{uuid.uuid4().hex}-{uuid.uuid4().hex[:16]}-00"
    skipped = client.create(model=name, messages=user(), extra_headers={"traceparent": unsampled})
    after = client.create(model=name, messages=user())
    otel.collector.span_of(after.headers["x-request-id"])  # exported after the skipped one
    assert otel.collector._find(skipped.headers["x-request-id"]) is None


def test_sampling_exports_a_share_of_new_traces_and_follows_the_callers(otel):
    """`sample_ratio = 0`: no new trace is exported, while a caller's sampled traceparent still
    has its span (parent-based, as OpenTelemetry's parentbased_traceidratio)."""
    url = otel.gateway("unsampled", fast(otel.collector_url, sample_ratio=0.0))
    name = model("oa")
    otel.upstream.script(name, script_for("openai", Answer(text="ok"), name, False))
    client = oa(url).chat.completions.with_raw_response
    new = [client.create(model=name, messages=user()) for _ in range(5)]
    sampled = f"00-{uuid.uuid4().hex}-{uuid.uuid4().hex[:16]}-01"
    followed = client.create(model=name, messages=user(), extra_headers={"traceparent": sampled})
    otel.collector.span_of(followed.headers["x-request-id"])  # exported after the others
    for reply in new:
        assert otel.collector._find(reply.headers["x-request-id"]) is None
    otel.stop_gateway("unsampled")


def metrics(url: str) -> dict[str, float]:
    """Sample name (with labels) -> value, from /metrics."""
    with urllib.request.urlopen(f"{url}/metrics", timeout=10) as response:
        text = response.read().decode()
    samples = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            labels = ",".join(f"{k}={v}" for k, v in sorted(sample.labels.items()))
            samples[f"{sample.name}{{{labels}}}" if labels else sample.name] = sample.value
    return samples


def comparable(body: Any) -> Any:
    """An answer without what differs between two gateways: ids and times."""
    if isinstance(body, dict):
        return {
            k: comparable(v) for k, v in body.items() if k not in ("id", "request_id", "created")
        }
    if isinstance(body, list):
        return [comparable(item) for item in body]
    return body


def test_with_the_collector_down_answers_are_unchanged_and_failures_counted(otel):
    down = otel.gateway("down", fast(f"http://127.0.0.1:{free_port()}"))
    off = otel.gateway("off", None)
    whole, streamed, failing = model("oa"), model("an"), model("oa")
    tool = Tool("toolu_1", "read", '{"path": "a')
    otel.upstream.script(whole, script_for("openai", Answer(text="same answer"), whole, False))
    cut = Answer(text="part", tools=[tool], native_stop="max_tokens")
    otel.upstream.script(streamed, script_for("anthropic", cut, streamed, True))
    otel.upstream.script(failing, Script(status=503, body=b'{"error": {"message": "x"}}'))
    answers = {}
    for url in (down, off):
        chat = oa(url).chat.completions.with_raw_response.create(model=whole, messages=user())
        stream = an(url).messages.with_raw_response.create(
            model=streamed, max_tokens=16, messages=user(), stream=True
        )
        events = [event.model_dump() for event in stream.parse()]
        with pytest.raises(openai.APIStatusError) as caught:
            oa(url).chat.completions.create(model=failing, messages=user())
        error = caught.value.response
        answers[url] = (
            (chat.status_code, comparable(orjson.loads(chat.content))),
            (stream.status_code, comparable(events)),
            (error.status_code, comparable(error.json())),
        )
    assert answers[down] == answers[off]

    def failed() -> dict[str, float] | None:
        samples = metrics(down)
        return samples if samples["gateway_otel_export_failures_total"] >= 1 else None

    samples = until(failed, "a failed export in /metrics")
    assert samples["gateway_otel_spans_dropped_total{reason=export_failed}"] >= 1
    assert samples["gateway_otel_spans_exported_total"] == 0
    assert not [name for name in metrics(off) if "otel" in name]


def test_a_stalled_collector_holds_no_exchange_and_the_queue_is_bounded(otel, tmp_path):
    stalled = OtelStack(tmp_path)
    stalled.start()
    try:
        stalled.on_loop(stalled.collector.hold)
        # export_timeout: the held export must outlast the next two exchanges
        telemetry = fast(stalled.collector_url, queue_size=1, export_timeout=2)
        url = stalled.gateway("stalled", telemetry)
        name = model("oa")
        stalled.upstream.script(name, script_for("openai", Answer(text="ok"), name, False))
        chat = oa(url).chat.completions.with_raw_response
        first = chat.create(model=name, messages=user())
        until(lambda: stalled.collector.holding == 1, "the first export to be held")
        # The export of the first span is held open by the collector: exchanges go on.
        second = chat.create(model=name, messages=user())  # queued: the queue's one place
        third = chat.create(model=name, messages=user())  # no room: dropped, counted
        assert {first.status_code, second.status_code, third.status_code} == {200}
        assert stalled.collector.holding >= 1 and not stalled.collector.spans
        samples = metrics(url)
        assert samples["gateway_otel_spans_dropped_total{reason=queue_full}"] == 1
        stalled.on_loop(stalled.collector.release)
        stalled.collector.span_of(first.headers["x-request-id"])
        stalled.collector.span_of(second.headers["x-request-id"])
        assert stalled.collector._find(third.headers["x-request-id"]) is None

        # Held again, with a span waiting: stopping the app returns all the same (bounded).
        # (Counted from here: the SDK may have sent the first batch again after its timeout.)
        held = stalled.collector.holding
        stalled.on_loop(stalled.collector.hold)
        chat.create(model=name, messages=user())
        until(lambda: stalled.collector.holding > held, "the next export to be held")
        stalled.stop_gateway("stalled")
    finally:
        stalled.on_loop(stalled.collector.release)
        stalled.stop()


def test_a_span_waiting_for_its_batch_is_flushed_when_the_app_stops(otel):
    url = otel.gateway("flush", fast(otel.collector_url, batch_delay=3600))
    name = model("oa")
    otel.upstream.script(name, script_for("openai", Answer(text="ok"), name, False))
    raw = oa(url).chat.completions.with_raw_response.create(model=name, messages=user())
    request_id = raw.headers["x-request-id"]
    assert otel.collector._find(request_id) is None  # an hour before its batch goes
    otel.stop_gateway("flush")
    assert otel.collector._find(request_id) is not None


async def test_every_worker_exports_its_spans(tmp_path):
    collector = Collector()
    runner = web.AppRunner(collector.app())
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    endpoint = f"http://127.0.0.1:{runner.addresses[0][1]}"
    config = tmp_path / "gateway.toml"
    telemetry = f'\n[telemetry]\notlp_endpoint = "{endpoint}"\nbatch_delay = "0.05s"\n'
    config.write_text(mock_config(tmp_path / "trail.db", tail=telemetry))
    gateway = GatewayProcess(config, tmp_path, "--workers", "2")
    try:
        base = await gateway.ready()
        ids = set()
        for _ in range(8):
            async with openai.AsyncOpenAI(
                base_url=f"{base}/v1", api_key="k", max_retries=0
            ) as client:  # a new connection each: the kernel spreads them over the workers
                raw = await client.chat.completions.with_raw_response.create(
                    model="mock-text", messages=user()
                )
            ids.add(raw.headers["x-request-id"])
        deadline = time.monotonic() + WAIT
        while {s.attributes["gateway.request_id"] for s in collector.spans} != ids:
            assert time.monotonic() < deadline, "not every exchange's span arrived"
            await asyncio.sleep(0.05)
        instances = {s.resource["service.instance.id"] for s in collector.spans}
        assert 1 <= len(instances) <= 2  # one resource per worker process
        assert any("OpenTelemetry: spans" in line for line in gateway.lines)
        gateway.signal(signal.SIGTERM)
        assert await gateway.wait(15) == 0
    finally:
        gateway.kill()
        await runner.cleanup()


IMPORTED = """
import sys
from gateway.app import build_app
from gateway.settings import parse_settings
config = {{
    "providers": {{"mock": {{"kind": "mock"}}}},
    "routes": [{{"match": "*", "provider": "mock"}}],
    "audit": {{"store": "sqlite:///:memory:"}},
}}
build_app(parse_settings(config, env={env}))
print(sorted(name for name in sys.modules if name.startswith("opentelemetry")))
"""


@pytest.mark.parametrize("exporting", [False, True])
def test_without_export_nothing_of_opentelemetry_is_imported(exporting):
    env = {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9"} if exporting else {}
    code = IMPORTED.format(env=env)
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, env={}
    )
    assert result.returncode == 0, result.stderr
    modules = ast.literal_eval(result.stdout)
    # build_app imports the exporter only when export is on (its thread starts with the app)
    assert bool(modules) is exporting
