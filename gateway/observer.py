"""Where a finished exchange goes: metrics, its span (when spans are exported), one structured log
line, the audit writer."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Protocol

from gateway import logs
from gateway.audit.record import AuditRecord
from gateway.audit.writer import AuditWriter
from gateway.client_request import ClientRequest
from gateway.metrics import GatewayMetrics, is_upstream_error

log = logging.getLogger("gateway.exchange")


class SpanSink(Protocol):
    """Where finished exchanges become spans: `gateway.otel.Spans`, which sets itself here
    while export runs. Declared here so this module never imports gateway.otel (which loads
    OpenTelemetry, and imports this module)."""

    def add(self, record: AuditRecord, request: ClientRequest | None) -> None:
        """Queue the exchange's span; never raises, never waits."""
        ...


class ExchangeObserver:
    def __init__(self, metrics: GatewayMetrics) -> None:
        self.metrics = metrics
        self.writer: AuditWriter | None = None  # set once the store is open
        # Called first with each finished record (gateway.access: releases what the exchange
        # held, counts its tokens); None when no access checks are configured.
        self.settle: Callable[[AuditRecord], Awaitable[None]] | None = None
        self.spans: SpanSink | None = None  # set while OpenTelemetry export runs (gateway.otel)
        self.in_flight = 0  # exchanges started whose record is not yet handed to the writer
        self._idle = asyncio.Event()
        self._idle.set()
        self._finishing: set[asyncio.Task[None]] = set()  # finish_soon's rare awaited ones

    def started(self) -> None:
        self.in_flight += 1
        self._idle.clear()
        self.metrics.in_flight.set(self.in_flight)

    async def wait_idle(self, timeout: float) -> bool:
        """Until every started exchange handed its record over (True), or `timeout` passed.

        The writer closes only after this, so an exchange cancelled at the end of the
        shutdown grace still lands in the trail."""
        try:
            await asyncio.wait_for(self._idle.wait(), timeout)
        except TimeoutError:
            return False
        return True

    @property
    def must_wait(self) -> bool:
        """Handing a record over now would wait: access checks to settle, or no room in the
        audit queue (the exchange then waits for it before its answer goes: backpressure)."""
        writer = self.writer
        return self.settle is not None or (writer is not None and writer.full)

    async def hand_over(self, record: AuditRecord, request: ClientRequest | None = None) -> None:
        """The exchange's end: wait for what `must_wait` (shielded: a cancelled exchange still
        hands its record over), else `finish_soon`."""
        if self.must_wait:
            await asyncio.shield(self.finished(record, request))
        else:
            self.finish_soon(record, request)

    def finish_soon(self, record: AuditRecord, request: ClientRequest | None = None) -> None:
        """Hand the record over in the event loop's next turn, when nothing `must_wait`: the
        answer the handler returns is written first, and the client does not wait for the
        metrics, the log line and the audit queue (about 50 us of a whole answer). Should the
        queue have filled meanwhile, a task waits for room (at most one per exchange)."""
        asyncio.get_running_loop().call_soon(self._finish_soon, record, request)

    def _finish_soon(self, record: AuditRecord, request: ClientRequest | None) -> None:
        """Most exchanges end here: no task, no await. `request`: the client's, read only for its
        trace context when spans are exported."""
        if self.must_wait:  # the queue filled since the exchange looked
            task = asyncio.ensure_future(self.finished(record, request))
            self._finishing.add(task)
            task.add_done_callback(self._finishing.discard)
            return
        writer = self.writer
        try:
            self._report(record, request)
            if writer is not None:
                writer.submit_nowait(record)
        finally:
            self._ended()

    async def finished(self, record: AuditRecord, request: ClientRequest | None = None) -> None:
        try:
            if self.settle is not None:
                await self._settle(record, self.settle)
            self._report(record, request)
            if self.writer is not None:
                await self.writer.submit(record)
        finally:
            self._ended()

    def _ended(self) -> None:
        self.in_flight -= 1
        self.metrics.in_flight.set(self.in_flight)
        if self.in_flight == 0:
            self._idle.set()

    async def _settle(
        self, record: AuditRecord, settle: Callable[[AuditRecord], Awaitable[None]]
    ) -> None:
        try:
            await settle(record)
        except Exception as exc:  # a bug there must not cost the exchange its record
            log.error("settling the exchange's limits failed (%s)", type(exc).__name__)

    def _report(self, record: AuditRecord, request: ClientRequest | None) -> None:
        """Metrics, the span and the exchange's log line."""
        self.metrics.observe(record)
        spans = self.spans
        if spans is not None:
            spans.add(record, request)
        if is_upstream_error(record.error_class):
            log.warning(
                "upstream error: %s (HTTP %s)",
                record.error_class,
                record.http_status,
                extra={
                    "request_id": record.id,
                    "provider": record.provider,
                    "error_class": record.error_class,
                    "http_status": record.http_status,
                },
            )
        if log.isEnabledFor(logging.INFO):
            logs.info_fields(log, "exchange", record.log_json())
