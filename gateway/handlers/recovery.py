"""Honest recovery of a streamed answer cut after its first byte reached the client ([recovery]
of the route; off by default).

When the stream breaks during text (a reset, an idle timeout, an upstream error event, no
terminator), or, with `max_tokens = "continue"`, a text answer stops at max tokens, the relay
(gateway.handlers.streaming) does not write the ending: it asks the exchange's `Continuer` for a
continuation (gateway.handlers.continuation sends it to the route's next target, or the same
one). If one comes, its text streams on in the same client stream, less any overlap with what
was sent (gateway.normalize.splice); if none does, the ending is written as it would have been.

What is never continued: a tool call (the cut one is withheld as always), a refusal, an answer
cut while it was still thinking, a client that left, a failure of the gateway itself.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, Protocol

from gateway.events import StopReason, StreamError
from gateway.formats.registry import Wire
from gateway.normalize.aggregate import ChunkAggregator
from gateway.normalize.splice import Splices
from gateway.normalize.truncation import ERROR_CUT_REASONS
from gateway.settings import RecoverySettings
from providers.base import UpstreamReply

LENGTH: Final = "length"
# Breaks that are not the upstream's: the client left or the server stopped (aborted), or the
# gateway failed; never continued.
NOT_MENDED: Final = frozenset({"aborted", "gateway"})


@dataclass(frozen=True, slots=True)
class Continuation:
    """A continuation's reply, its headers read and its status 2xx."""

    reply: UpstreamReply
    wire: Wire  # the wire it answers on (the target's: not always the cut answer's)
    target: str  # the target's key ("provider/model")
    blank_sent: bool  # the text sent ends in whitespace its request left out (a prefill)


class Continuer(Protocol):
    async def __call__(self, sent: str, cause: str) -> Continuation | None:
        """A continuation of the answer whose text so far is `sent`, cut for `cause` (a
        cut_reason); None when no target gave one."""
        ...

    def discard(self) -> None:
        """The continuation last given could not be read (a whole body not of its wire)."""
        ...


@dataclass(frozen=True, slots=True)
class Recovery:
    splices: Splices
    continuer: Continuer

    def cause_of_break(self, agg: ChunkAggregator, error: StreamError) -> str | None:
        """The cut reason of a break this exchange may continue, else None."""
        if error.kind in NOT_MENDED:
            return None
        cause = ERROR_CUT_REASONS.get(error.kind, "upstream_error")
        return cause if self._mendable(agg, cause) else None

    def continues_length(self, agg: ChunkAggregator) -> bool:
        """Whether a text answer cut at max tokens may be continued."""
        return bool(agg.text_so_far()) and self._mendable(agg, LENGTH)

    def mends_length(self, agg: ChunkAggregator) -> bool:
        """The answer stopped at max tokens, and may be continued."""
        return agg.stop[0] is StopReason.LENGTH and self.continues_length(agg)

    def _mendable(self, agg: ChunkAggregator, cause: str) -> bool:
        if agg.tool_calls or agg.streamed_refusal:
            return False
        if agg.streamed_thinking and not agg.text_so_far():
            return False  # cut while thinking: its reasoning cannot be continued
        return self.splices.may_continue(cause)


def splices_for(settings: RecoverySettings, stream: bool) -> Splices | None:
    """What a route's [recovery] lets an answer have continued; None: nothing. A whole answer
    is never broken mid-way: it may only be continued at max tokens."""
    mid_stream = settings.max_recoveries if settings.mid_stream == "continue" and stream else 0
    max_tokens = settings.max_continuations if settings.max_tokens == "continue" else 0
    return Splices(mid_stream, max_tokens) if mid_stream or max_tokens else None
