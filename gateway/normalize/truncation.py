"""When a response counts as cut, and what becomes of its tool calls.

A response is cut when it stopped at LENGTH or CONTEXT_WINDOW, or the stream broke (ERROR,
ABORTED). Under the `withhold` policy a cut response's tool calls are never delivered, nor are the
calls of one the provider itself calls MALFORMED (Gemini's MALFORMED_FUNCTION_CALL, Bedrock's
malformed_tool_use): the provider says they are not runnable, so no client should run them as a
finished call. Under `pass` they are, with the faithful stop reason. Either way they are listed
for the record.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from gateway.events import CUT_STOP_REASONS, StopReason, StreamError

Policy = Literal["withhold", "pass"]

CUT_REASONS = {
    StopReason.LENGTH: "length",
    StopReason.CONTEXT_WINDOW: "context_window",
    StopReason.ABORTED: "aborted",
}
ERROR_CUT_REASONS = {
    "truncated": "missing_terminator",
    "connection_lost": "connection_lost",
    "aborted": "cancelled",
    "timeout": "upstream_timeout",
}


@dataclass(slots=True, frozen=True)
class Verdict:
    stop_reason: StopReason
    native_stop_reason: str | None
    truncated: bool
    cut_reason: str | None
    tool_calls: tuple[tuple[str, str], ...]  # (id, name) of every call the upstream sent
    deliver_tool_calls: bool

    @property
    def withheld(self) -> tuple[tuple[str, str], ...]:
        return () if self.deliver_tool_calls else self.tool_calls

    @property
    def delivered_tool_calls(self) -> bool:
        return self.deliver_tool_calls and bool(self.tool_calls)


def judge(
    stop_reason: StopReason,
    native: str | None,
    error: StreamError | None,
    tool_calls: Sequence[tuple[str, str]],
    policy: Policy,
) -> Verdict:
    truncated = stop_reason in CUT_STOP_REASONS
    cut_reason = None
    if truncated:
        if error is not None:
            cut_reason = ERROR_CUT_REASONS.get(error.kind, "upstream_error")
        else:
            cut_reason = CUT_REASONS.get(stop_reason, "upstream_error")
    unrunnable = truncated or stop_reason is StopReason.MALFORMED
    deliver = not (unrunnable and policy == "withhold")
    return Verdict(stop_reason, native, truncated, cut_reason, tuple(tool_calls), deliver)


def extension(verdict: Verdict, provider: str, request_id: str) -> dict[str, Any]:
    """The `gateway` object a client sees beside its own format's stop reason."""
    ext: dict[str, Any] = {
        "stop_reason": verdict.stop_reason.value,
        "native_stop_reason": verdict.native_stop_reason,
        "provider": provider,
        "request_id": request_id,
        "truncated": verdict.truncated,
        "withheld_tool_calls": [{"id": i, "name": n} for i, n in verdict.withheld],
    }
    if verdict.cut_reason:
        ext["cut_reason"] = verdict.cut_reason
    return ext
