"""One attempt of an exchange: one provider, its wire, and what reading its answer produced.

The exchange keeps what belongs to the request (its id, the record, the client's format); an
attempt keeps what belongs to one try at one upstream, so another try starts from a clean one.

    attempt = Attempt(provider, wire_for(provider.wire_of(model)), terms)
    for event in wire_events: attempt.aggregator.handle(event)
    verdict = attempt.verdict()
"""

from __future__ import annotations

from gateway.encode import ReplyTerms
from gateway.events import StopReason, StreamError
from gateway.formats.registry import Wire
from gateway.normalize.aggregate import ChunkAggregator
from gateway.normalize.truncation import Verdict, judge
from providers.base import Provider

BROKEN = frozenset({StopReason.ERROR, StopReason.ABORTED})


class Attempt:
    __slots__ = ("_judged", "aggregator", "answered", "provider", "sent_bytes", "terms", "wire")

    def __init__(self, provider: Provider, wire: Wire, terms: ReplyTerms) -> None:
        self.provider = provider
        self.wire = wire
        self.terms = terms
        self.aggregator = ChunkAggregator()
        self.answered = False  # a 2xx reply whose body was read
        self.sent_bytes = 0  # the request body sent upstream, for a usage estimate
        self._judged: tuple[StreamError | None, Verdict] | None = None  # (error, verdict)

    def verdict(self) -> Verdict:
        """Judged once the answer is final and kept (the writer and the record both ask), until
        an error from outside (a client that left) changes it."""
        agg = self.aggregator
        judged = self._judged
        if judged is not None and judged[0] is agg.error:
            return judged[1]
        reason, native = agg.stop
        calls = [(call.id, call.name) for call in agg.tool_calls]
        verdict = judge(reason, native, agg.error, calls, self.terms.policy)
        if agg.final_done:
            self._judged = (agg.error, verdict)
        return verdict

    def broke(self, error: StreamError) -> None:
        """The answer broke outside the wire (a cancellation, a client that left)."""
        self.aggregator.handle(error)


def unreadable(what: str, exc: BaseException) -> StreamError:
    return StreamError(
        "protocol", f"upstream sent {what} that is not its wire's ({type(exc).__name__})"
    )


def stopped(reason: StopReason, native: str | None) -> StreamError:
    """The in-stream error for an upstream that ended the generation itself with an error
    (vLLM `abort`, `error`): the stream did not complete, whatever its terminator says."""
    kind = "aborted" if reason is StopReason.ABORTED else "upstream_error"
    return StreamError(kind, f"upstream stopped the generation (finish_reason: {native})")
