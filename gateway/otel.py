"""One OpenTelemetry span per exchange, sent over OTLP/HTTP by the official SDK. Imported only
when export is on (`[telemetry]` or OTEL_EXPORTER_OTLP_ENDPOINT: gateway.settings_telemetry):
otherwise nothing of OpenTelemetry is loaded, and an exchange pays one attribute check.

    app.cleanup_ctx.append(export_spans(settings, observer, metrics))

The span is made from the exchange's finished audit record (gateway.observer), so every
exchange has one, refusals and failures included: it starts and ends when the exchange did, its
attributes follow the GenAI semantic conventions (`gen_ai.*`) plus the gateway's (`gateway.*`),
its status is an error when the record has an error class, and it is the child of the client's
W3C `traceparent` (keeping its `tracestate`) when one came. A span never holds content (message
text, tool arguments), whatever `[audit] log_content` says: identities, counts and reasons only.
The span carries `gateway.request_id`, the audit record's id, so a trace finds its record.

Isolation from the request path: the record is complete when the span is made, so no live span
is started and ended: a `ReadableSpan` is built at once (~6 us of the loop's time; the SDK's
start_span and end cost ~35 us) and handed to a BatchSpanProcessor, whose own thread encodes
and sends each batch; the loop never waits on the collector. At most `queue_size` spans wait:
past it a new span is dropped and counted. A failed export (collector down, slower than
`export_timeout`, refusing) drops its batch and is counted; a warning says so at most once a
minute, naming no URL and no header. The SDK's own log lines are silenced: they repeat for every
batch and can quote a response.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from importlib import metadata
from typing import Any, Final

from aiohttp import web
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult
from opentelemetry.sdk.trace.id_generator import RandomIdGenerator
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import (
    SpanContext,
    SpanKind,
    Status,
    StatusCode,
    TraceFlags,
    get_current_span,
)
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator
from prometheus_client import CollectorRegistry, Counter

from gateway.audit.record import AuditRecord
from gateway.client_request import ClientRequest
from gateway.events import StopReason
from gateway.metrics import GatewayMetrics
from gateway.normalize.aggregate import GATEWAY_NATIVE
from gateway.observer import ExchangeObserver
from gateway.settings import Settings
from gateway.settings_telemetry import OtlpTarget, TelemetrySettings

log = logging.getLogger("gateway.otel")

WARN_EVERY: Final = 60.0  # seconds between two warnings about spans not exported
MAX_BATCH: Final = 512  # spans per export request (the SDK's default)
SCOPE: Final = "gateway"

# gen_ai.operation.name per AuditRecord.operation (the semantic conventions' well-known values;
# a token count has none, so it keeps its own name).
OPERATIONS: Final[Mapping[str, str]] = {
    "generate": "chat",
    "embed": "embeddings",
    "count_tokens": "count_tokens",
}
# gen_ai.system / gen_ai.provider.name per provider kind (providers.registry.KINDS); a kind
# not listed is named as it is.
SYSTEMS: Final[Mapping[str, str]] = {
    "openai": "openai",
    "openai_responses": "openai",
    "azure_openai": "azure.ai.openai",
    "azure_openai_responses": "azure.ai.openai",
    "anthropic": "anthropic",
    "gemini": "gcp.gemini",
    "vertex": "gcp.vertex_ai",
    "bedrock": "aws.bedrock",
}
# Attributes set when the record has the value (OpenTelemetry takes no None).
_OPTIONAL: Final = (
    ("gen_ai.request.model", "model"),
    ("gen_ai.response.model", "upstream_model"),
    ("gen_ai.response.id", "response_id"),
    ("gen_ai.usage.input_tokens", "input_tokens"),
    ("gen_ai.usage.output_tokens", "output_tokens"),
    ("gen_ai.usage.cache_read.input_tokens", "cache_read_tokens"),
    ("gen_ai.usage.cache_creation.input_tokens", "cache_creation_tokens"),
    ("gateway.cost_usd", "cost_usd"),
    ("gateway.cost_source", "cost_source"),
    ("gateway.route", "route"),
    ("gateway.provider", "provider"),
    ("gateway.stop_reason", "stop_reason"),
    ("gateway.native_stop_reason", "native_stop_reason"),
    ("gateway.cut_reason", "cut_reason"),
    ("gateway.http_status", "http_status"),
    ("gateway.error_class", "error_class"),
    ("error.type", "error_class"),
    ("gateway.ended_by", "ended_by"),
    ("gateway.timeout", "timeout"),
    ("gateway.key_name", "key_name"),
    ("gateway.estimated_tokens", "estimated_tokens"),
)
# The stop reasons of an answer that broke. With an error class beside one, the record's native
# stop reason is the gateway's word for the break (`gateway:connection_lost`, an error event's
# type, `timeout_error`), not a finish reason the upstream sent.
_BROKEN: Final = frozenset({StopReason.ERROR.value, StopReason.ABORTED.value})
_UNSET: Final = Status(StatusCode.UNSET)
_SAMPLED: Final = TraceFlags(TraceFlags.SAMPLED)


def export_spans(
    settings: Settings, observer: ExchangeObserver, metrics: GatewayMetrics
) -> Callable[[web.Application], AsyncIterator[None]]:
    """The app's span export: started with the app, flushed (bounded) when it stops. Append it
    to `cleanup_ctx` before the audit writer's, so the exchanges the writer waits for at
    shutdown still get their spans."""
    telemetry = settings.telemetry
    target = telemetry.export
    assert target is not None  # build_app asks only when export is on
    kinds = {name: provider.kind for name, provider in settings.providers.items()}

    async def ctx(app: web.Application) -> AsyncIterator[None]:
        # Off the loop: building it reads the package's metadata and starts a thread.
        spans = await asyncio.to_thread(Spans, target, telemetry, metrics.registry, kinds)
        observer.spans = spans
        yield
        observer.spans = None
        await spans.close(telemetry.export_timeout + 1.0)

    return ctx


class ExportCounters:
    """What /metrics says about export; moved from the processor's thread and the loop's."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.exported = Counter(
            "gateway_otel_spans_exported",
            "Spans the OpenTelemetry collector accepted",
            registry=registry,
        )
        dropped = Counter(
            "gateway_otel_spans_dropped",
            "Spans not exported: the queue was full (queue_full) or their batch failed "
            "(export_failed)",
            ["reason"],
            registry=registry,
        )
        self.queue_full = dropped.labels("queue_full")
        self.export_failed = dropped.labels("export_failed")
        self.failures = Counter(
            "gateway_otel_export_failures",
            "Export requests that failed: collector unreachable, slower than export_timeout, "
            "or refusing",
            registry=registry,
        )


class _Warnings:
    """A warning at most once per WARN_EVERY seconds, saying how many spans were lost since.
    Both the loop and the processor's thread call it: a race costs one extra line at most."""

    def __init__(self) -> None:
        self._next = 0.0
        self._lost = 0

    def lost(self, count: int, why: str) -> None:
        self._lost += count
        now = time.monotonic()
        if now < self._next:
            return
        self._next = now + WARN_EVERY
        lost, self._lost = self._lost, 0
        log.warning(
            "OpenTelemetry: %d spans not exported since the last warning (latest: %s); "
            "counted in gateway_otel_spans_dropped, said at most once a minute",
            lost,
            why,
        )


class _Counted(SpanExporter):
    """The OTLP exporter, counted: runs on the processor's thread only."""

    def __init__(self, inner: SpanExporter, counters: ExportCounters, warnings: _Warnings) -> None:
        self._inner = inner
        self._counters = counters
        self._warnings = warnings
        self.taken = 0  # spans handed to export so far; written by this thread only

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        count = len(spans)
        self.taken += count  # the processor took them off its queue: room for as many
        try:
            result = self._inner.export(spans)
        except Exception:  # the SDK's exporter returns FAILURE; anything else counts the same
            result = SpanExportResult.FAILURE
        if result is SpanExportResult.SUCCESS:
            self._counters.exported.inc(count)
        else:
            self._counters.failures.inc()
            self._counters.export_failed.inc(count)
            self._warnings.lost(count, "the collector did not take them")
        return result

    def shutdown(self) -> None:
        self._inner.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True


_LOW_64: Final = (1 << 64) - 1


class Spans:
    """Turns finished exchanges into spans for the batch processor (`add`, on the loop)."""

    def __init__(
        self,
        target: OtlpTarget,
        telemetry: TelemetrySettings,
        registry: CollectorRegistry,
        kinds: Mapping[str, str],
    ) -> None:
        # The SDK logs each failed batch (and each retry) itself, with the response's reason:
        # _Counted counts and warns instead.
        logging.getLogger("opentelemetry").setLevel(logging.CRITICAL + 1)
        version = _version()
        self._resource = Resource.create(
            {"service.name": target.service_name, "service.version": version}
        )
        self._scope = InstrumentationScope(SCOPE, version)
        self._systems = {name: SYSTEMS.get(kind, kind) for name, kind in kinds.items()}
        self._ids = RandomIdGenerator()
        self._propagator = TraceContextTextMapPropagator()
        self._counters = ExportCounters(registry)
        self._warnings = _Warnings()
        headers = {name: value.get_secret_value() for name, value in target.headers.items()}
        otlp = OTLPSpanExporter(
            endpoint=target.url, headers=headers, timeout=telemetry.export_timeout
        )
        self._exporter = _Counted(otlp, self._counters, self._warnings)
        self._capacity = telemetry.queue_size
        self._processor = BatchSpanProcessor(
            self._exporter,
            max_queue_size=self._capacity,
            schedule_delay_millis=telemetry.batch_delay * 1000,
            max_export_batch_size=min(MAX_BATCH, self._capacity),
            export_timeout_millis=telemetry.export_timeout * 1000,
        )
        self._added = 0  # spans handed to the processor; written on the loop only
        # TraceIdRatioBased's rule: a new trace is sampled when the low 64 bits of its id fall
        # below the bound, so every service sampling at the same ratio keeps the same traces.
        self._sample_below = round(telemetry.sample_ratio * (1 << 64))

    def add(self, record: AuditRecord, request: ClientRequest | None) -> None:
        """The exchange's span, queued for export; never raises, never waits."""
        # The processor's queue holds what was added and not yet taken by an export. Bounded
        # here rather than by the processor (which drops the oldest without telling): a span
        # past `queue_size` is dropped and counted.
        if self._added - self._exporter.taken >= self._capacity:
            self._counters.queue_full.inc()
            self._warnings.lost(1, "the export queue was full")
            return
        try:
            span = self._span(record, request)
        except Exception as exc:  # a bug here must not cost the exchange its answer
            log.error("OpenTelemetry: no span for an exchange (%s)", type(exc).__name__)
            return
        if span is None:
            return
        self._added += 1
        self._processor.on_end(span)

    def _span(self, record: AuditRecord, request: ClientRequest | None) -> ReadableSpan | None:
        parent = self._parent(request)
        if parent is None:
            trace_id, flags, state = self._ids.generate_trace_id(), _SAMPLED, None
            if trace_id & _LOW_64 >= self._sample_below:
                return None  # not in the sampled share of new traces
        elif not parent.trace_flags.sampled:
            return None  # the caller records no trace
        else:
            trace_id, flags, state = parent.trace_id, parent.trace_flags, parent.trace_state
        context = SpanContext(trace_id, self._ids.generate_span_id(), False, flags, state)
        operation = OPERATIONS.get(record.operation, record.operation)
        name = f"{operation} {record.model}" if record.model else operation
        error = record.error_class
        started = int(record.started_at * 1e9)
        ended = started if record.ended_at is None else int(record.ended_at * 1e9)
        return ReadableSpan(
            name,
            context=context,
            parent=parent,
            resource=self._resource,
            attributes=self.attributes(record, operation),
            kind=SpanKind.SERVER,
            status=_UNSET if error is None else Status(StatusCode.ERROR, error),
            start_time=started,
            end_time=ended,
            instrumentation_scope=self._scope,
        )

    def _parent(self, request: ClientRequest | None) -> SpanContext | None:
        """The client's span, from its `traceparent` (and `tracestate`); None: a new trace."""
        if request is None or "traceparent" not in request.headers:
            return None
        context = get_current_span(self._propagator.extract(request.headers))
        parent = context.get_span_context()
        return parent if parent.is_valid else None

    def attributes(self, record: AuditRecord, operation: str) -> dict[str, Any]:
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": operation,
            "gateway.request_id": record.id,
            "gateway.client_format": record.client_format,
            "gateway.stream": record.stream,
            "gateway.truncated": record.truncated,
            "gateway.tool_calls": record.tool_calls,
            "gateway.withheld_tool_calls": len(record.withheld_tool_calls),
            "gateway.attempts": len(record.attempts),
        }
        system = self._systems.get(record.provider) if record.provider else None
        if system is not None:
            attributes["gen_ai.system"] = system
            attributes["gen_ai.provider.name"] = system
        finish = upstream_finish_reason(record)
        if finish is not None:
            attributes["gen_ai.response.finish_reasons"] = (finish,)
        if record.parse_failures:
            attributes["gateway.parse_failures"] = len(record.parse_failures)
        for key, field in _OPTIONAL:
            value = getattr(record, field)
            if value is not None and value != "":
                attributes[key] = value
        return attributes

    async def close(self, timeout: float) -> None:
        """Send what waits and stop the processor's thread, waiting `timeout` seconds at most:
        a collector that is down must not hold the shutdown (the thread is a daemon)."""
        loop = asyncio.get_running_loop()
        done: asyncio.Future[None] = loop.create_future()

        def shut_down() -> None:
            with contextlib.suppress(Exception):  # counted already; nothing left to do
                self._processor.shutdown()  # type: ignore[no-untyped-call]
            with contextlib.suppress(RuntimeError):  # the loop closed: nobody waits
                loop.call_soon_threadsafe(_settle, done)

        threading.Thread(target=shut_down, name="otel-shutdown", daemon=True).start()
        try:
            await asyncio.wait_for(done, timeout)
        except TimeoutError:
            log.warning("OpenTelemetry: spans unsent %.1f s into the shutdown dropped", timeout)


def upstream_finish_reason(record: AuditRecord) -> str | None:
    """The stop value the upstream itself sent, for `gen_ai.response.finish_reasons`; None
    when it sent none (the stream broke first, or no answer came). The gateway's verdicts stay
    in its own attributes (`gateway.stop_reason`, `gateway.native_stop_reason`,
    `gateway.cut_reason`, `gateway.error_class`)."""
    native = record.native_stop_reason
    if native is None or native.startswith(GATEWAY_NATIVE):
        return None
    if record.error_class is not None and record.stop_reason in _BROKEN:
        return None
    return native


def _settle(done: asyncio.Future[None]) -> None:
    if not done.done():
        done.set_result(None)


def _version() -> str:
    try:
        return metadata.version("llm-gateway")
    except metadata.PackageNotFoundError:
        return "0"
