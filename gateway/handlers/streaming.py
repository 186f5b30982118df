"""A streamed answer: one attempt's upstream stream body into the client's stream.

    upstream bytes -> the wire's framing (SSE, AWS event stream) -> frames
      -> wire decoder -> events -> aggregator (order checked)
                                -> stream writer -> client bytes

The client's response is prepared on the first byte there is to send, so a failure before it
gets a real HTTP status in the client's error format; after it, the stream ends with the format's
error event. The first terminal event ends the relay: StreamEnd, a StreamError, a protocol error
the aggregator found, or a stop the upstream gave as an error (vLLM `abort`).

What the frames of one upstream read produce goes to the client in one write (a burst of twenty
frames is one system call, not twenty); bytes there are to send count as sent for the rules
above, so where a read happens to end never changes what the client gets.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import traceback
from collections.abc import Callable, Coroutine, Sequence
from typing import Any, cast

from aiohttp import web

from gateway.audit.record import AuditRecord
from gateway.client_formats import ClientFormat
from gateway.client_request import ClientRequest
from gateway.encode import Parsed, StreamWriter
from gateway.errors import (
    GatewayError,
    UpstreamError,
    UpstreamProtocolError,
    UpstreamStatusError,
    UpstreamTimeout,
)
from gateway.events import Event, Stop, StreamEnd, StreamError
from gateway.formats.registry import UNREADABLE, Framing, StreamDecoder
from gateway.formats.sse import SSEFrame
from gateway.handlers.attempt import BROKEN, Attempt, stopped, unreadable
from gateway.handlers.recovery import LENGTH, Recovery
from gateway.normalize.splice import OverlapTrimmer, SplicedDecoder
from providers.base import UpstreamReply

log = logging.getLogger("gateway.exchange")

STREAM_HEADERS = {"content-type": "text/event-stream", "cache-control": "no-cache"}
EARLY_ERROR_STATUS = {"overloaded_error": 529, "rate_limit_error": 429, "timeout_error": 504}
GATEWAY_FAILURE = "The gateway failed while relaying this stream"
STOPPED_MID_STREAM = "The gateway stopped this exchange before the answer was complete"
# What ends a relay: the stream's end or its error event, written (StreamRun.handle).
Ending = Coroutine[Any, Any, None]
# Events that may end the relay (a Stop only when the upstream stopped with an error).
TERMINAL = frozenset({StreamEnd, StreamError, Stop})


class StreamRun:
    """Drives one upstream stream into one client response."""

    def __init__(
        self,
        client: ClientFormat,
        attempt: Attempt,
        request: ClientRequest,
        record: AuditRecord,
        recovery: Recovery | None = None,
    ) -> None:
        self.attempt = attempt
        self.request = request
        self.record = record
        self.framing: Callable[[], Framing] = attempt.wire.framing
        self.decoder: StreamDecoder = attempt.wire.stream_decoder()
        self.writer: StreamWriter = client.stream_writer(attempt.wire.name, attempt.terms)
        self.response: web.StreamResponse | None = None
        self.early: StreamError | None = None  # the failure before anything reached the client
        self.over = False
        self._out: list[bytes] = []  # what this read's frames produced, not yet written
        self.recovery = recovery  # None: a cut is written as it comes (the default)
        # A cut the recovery may mend, its ending not written yet: (cut reason, the break; None
        # for an answer stopped at max tokens).
        self.pending: tuple[str, StreamError | None] | None = None

    def frame(self, frame: SSEFrame) -> Ending | None:
        try:
            obj, events = self.decoder.decode(frame)
        except UNREADABLE as exc:
            obj, events = None, [unreadable("an event", exc)]
        return self.handle(frame, obj, events)

    def handle(self, frame: SSEFrame | None, obj: Parsed, events: Sequence[Event]) -> Ending | None:
        """Per upstream frame: the events into the aggregator, then the live ones to the writer.
        The first terminal event ends the relay (events after it are not read): its ending is
        returned, for the caller to await. Most frames end nothing and are handled without a
        coroutine (two a frame before: ~1,200 instructions a frame, callgrind)."""
        agg = self.attempt.aggregator
        for position, event in enumerate(events):
            problem = agg.handle(event)
            cls = event.__class__
            if problem is None and cls not in TERMINAL:
                continue
            live = events[:position]
            if problem is not None:
                return self._fail(live, problem)
            if isinstance(event, StreamEnd):
                return self._end(frame, obj, live)
            if isinstance(event, StreamError):
                return self._fail(live, event)
            if isinstance(event, Stop) and event.reason in BROKEN:
                return self._fail(live, stopped(event.reason, event.native))
        out = self.writer.feed(frame, obj, events)
        if out:
            self._out.append(out)
        return None

    async def _end(self, frame: SSEFrame | None, obj: Parsed, live: Sequence[Event]) -> None:
        self.over = True
        agg = self.attempt.aggregator
        recovery = self.recovery
        out = self.writer.feed(frame, obj, live)
        if recovery is not None and recovery.mends_length(agg):
            self._out.append(out)
            self.pending = (LENGTH, None)
            return await self.flush()
        await self._ending(out, None)

    async def _ending(self, out: bytes, error: StreamError | None) -> None:
        """`out`, then the stream's end (`error` None) or its error event, written at once."""
        response = self.attempt.aggregator.final()
        verdict = self.attempt.verdict()
        if error is None:
            out += self.writer.end(verdict, response)
        else:
            out += self.writer.fail(error, verdict, response)
        self._out.append(out)
        await self.flush(end=True)

    async def _fail(self, live: Sequence[Event], error: StreamError) -> None:
        self.over = True
        if self.response is None and not self._out:
            self.early = error  # nothing reached the client: it gets a real HTTP status
            return
        if self.recovery is not None:
            cause = self.recovery.cause_of_break(self.attempt.aggregator, error)
            if cause is not None:
                if live:  # a relay writes no events of their own: the continuation's writer does
                    self.writer = self.writer.resume()
                    self._out.append(self.writer.feed(None, None, live))
                self.pending = (cause, error)
                return await self.flush()
        await self._ending(self.writer.feed(None, None, live), error)

    async def continued(self, cause: str, error: StreamError | None) -> UpstreamReply | None:
        """The reply that continues the cut answer, its decoder and writer in place; None when
        no target gave one, and the cut's ending is written as it would have been."""
        assert self.recovery is not None  # only a recovery leaves a cut pending
        agg = self.attempt.aggregator
        sent = agg.text_so_far()
        found = await self.recovery.continuer(sent, cause)
        if found is None:
            await self._ending(b"", error)
            return None
        self.recovery.splices.spliced_at(cause, len(sent), found.target)
        agg.resume()
        self.writer = self.writer.resume()
        self.framing = found.wire.framing
        trimmer = OverlapTrimmer(sent, found.blank_sent)
        self.decoder = SplicedDecoder(found.wire.stream_decoder(), trimmer)
        self.over = False
        return found.reply

    async def upstream_failed(self, error: StreamError, exc: UpstreamError) -> None:
        if self.response is None:
            self.attempt.aggregator.handle(error)
            raise exc
        ending = self.handle(None, None, [error])
        if ending is not None:
            await ending

    async def gateway_failed(self, exc: Exception) -> None:
        """A bug after the first byte: the stream still ends with the format's error event."""
        frames = "".join(traceback.format_tb(exc.__traceback__))
        log.error("unhandled %s while relaying a stream\n%s", type(exc).__name__, frames)
        self.record.error_class = type(exc).__name__
        error = StreamError("gateway", GATEWAY_FAILURE, "api_error")
        self.attempt.aggregator.handle(error)
        if self.over:
            return
        self.over = True
        try:
            response = self.attempt.aggregator.final()
            self._out.append(self.writer.fail(error, self.attempt.verdict(), response))
            await self.flush(end=True)
        except Exception as again:  # the writer itself is what failed: the stream just ends
            log.error("stream error event not written (%s)", type(again).__name__)

    async def cancelled(self) -> None:
        """The exchange was cancelled (the shutdown grace ran out, or the client left): a stream
        already started still ends with the format's error event, when the client is there."""
        error = StreamError("aborted", STOPPED_MID_STREAM, "api_error")
        agg = self.attempt.aggregator
        if agg.error is None:
            agg.handle(error)
        if self.response is None or self.over:
            return
        self.over = True
        transport = self.request.transport
        if transport is None or transport.is_closing():
            return
        try:
            async with asyncio.timeout(1.0):
                frame = self.writer.fail(error, self.attempt.verdict(), agg.final())
                await self.response.write_eof(frame)
        except Exception as exc:  # best effort: the exchange is being torn down
            log.info("stream error event not written (%s)", type(exc).__name__)

    async def flush(self, end: bool = False) -> None:
        """Write what the frames handled since the last flush produced, in one write; `end`:
        they are the stream's last, written with its end (one system call, not two)."""
        out = self._out
        if not out:
            return
        self._out = []
        await self.write(out[0] if len(out) == 1 else b"".join(out), end)

    async def write(self, data: bytes, end: bool = False) -> None:
        if not data:
            return
        if self.response is None:
            self.record.first_byte_at = time.time()
            headers = {**STREAM_HEADERS, "x-request-id": self.attempt.terms.request_id}
            self.response = EventStreamResponse(headers=headers)
            # What StreamResponse.prepare reads of a request, LeanRequest has (gateway.lean_http).
            await self.response.prepare(cast(web.BaseRequest, self.request))
            self.record.http_status = self.response.status  # kept if the exchange is cancelled
        if end:
            await self.response.write_eof(data)
        else:
            await self.response.write(data)


class EventStreamResponse(web.StreamResponse):
    """A stream whose head goes out with its first bytes, in one write: the gateway prepares
    it when it has bytes to send (aiohttp's StreamResponse sends the head alone first)."""

    _send_headers_immediately = False


async def stream_reply(
    client: ClientFormat,
    attempt: Attempt,
    reply: UpstreamReply,
    request: ClientRequest,
    record: AuditRecord,
    recovery: Recovery | None = None,
) -> web.StreamResponse:
    run = StreamRun(client, attempt, request, record, recovery)
    try:
        await _relay_upstream(run, reply)
        while run.pending is not None:  # a cut the recovery may mend
            cause, error = run.pending
            run.pending = None
            continuation = await run.continued(cause, error)
            if continuation is None:
                break
            try:
                await _relay_upstream(run, continuation)
            finally:
                continuation.release()
    except ConnectionError:
        attempt.broke(StreamError("aborted", "the client disconnected"))
        log.info("client disconnected", extra={"request_id": attempt.terms.request_id})
    except asyncio.CancelledError:
        await run.cancelled()
        raise
    except Exception as exc:
        if run.response is None:
            raise  # nothing sent yet: the app answers in the client's format
        await run.gateway_failed(exc)
    finally:
        attempt.aggregator.final()  # joins the record and reports argument parse failures
    if run.response is None:
        raise early_failure(run.early)  # nothing reached the client: another attempt may follow
    try:
        await run.response.write_eof()
    except ConnectionError:
        attempt.broke(StreamError("aborted", "the client disconnected"))
    return run.response


async def _relay_upstream(run: StreamRun, reply: UpstreamReply) -> None:
    """One upstream reply into the client's stream; a failure of the upstream is the stream's."""
    try:
        await _relay(run, reply)
    except UpstreamTimeout as exc:
        run.record.timeout = exc.which
        await run.upstream_failed(StreamError("timeout", exc.message, "timeout_error"), exc)
    except UpstreamError as exc:  # the transport's: reset or closed before the body's end
        await run.upstream_failed(StreamError("connection_lost", exc.message), exc)


async def _relay(run: StreamRun, reply: UpstreamReply) -> None:
    framing = run.framing()
    # Closed here when the relay ends before the body does (a stream's end event comes before
    # its last bytes): left to the collector, an unfinished async generator is closed by a task
    # the loop is woken for from "another thread" (an eventfd write and read per stream).
    async with contextlib.aclosing(reply.iter_chunks()) as chunks:
        async for chunk in chunks:
            for frame in framing.feed(chunk):
                ending = run.frame(frame)
                if ending is not None:
                    return await ending
            await run.flush()
    for frame in framing.close():
        ending = run.frame(frame)
        if ending is not None:
            return await ending
    ending = run.handle(None, None, run.decoder.eof())
    if ending is not None:
        return await ending
    await run.flush()


def early_failure(error: StreamError | None) -> GatewayError:
    """The HTTP error for a stream that failed before its first byte reached the client."""
    if error is None:
        return UpstreamProtocolError("The upstream stream ended before sending anything")
    if error.kind in ("protocol", "truncated"):  # not the wire's, or ended before an event:
        return UpstreamProtocolError(error.message)  # as a whole body, not an error status
    status = error.status if error.status and error.status >= 400 else 502
    status = EARLY_ERROR_STATUS.get(error.error_type or "", status)
    return UpstreamStatusError(status, error.message, error.error_type)
