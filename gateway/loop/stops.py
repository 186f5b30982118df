"""Stop reasons: each wire's native values, and the gateway's `gateway` extension object.

Through the gateway a response carries `gateway.stop_reason` (already normalized, with the
upstream's own value in `native_stop_reason`); straight from a provider only the native value is
there, and these tables map it. An unknown value is UNKNOWN, never STOP.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from gateway.loop.turn import CUT_STOP_REASONS, StopReason, WithheldCall

S = StopReason

OPENAI_NATIVE: Mapping[str, StopReason] = {
    "stop": S.STOP,
    "length": S.LENGTH,
    "tool_calls": S.TOOL_CALLS,
    "function_call": S.TOOL_CALLS,
    "content_filter": S.CONTENT_FILTER,
}

ANTHROPIC_NATIVE: Mapping[str, StopReason] = {
    "end_turn": S.STOP,
    "tool_use": S.TOOL_CALLS,
    "max_tokens": S.LENGTH,
    "stop_sequence": S.STOP_SEQUENCE,
    "refusal": S.REFUSAL,
    "pause_turn": S.PAUSE,
    "model_context_window_exceeded": S.CONTEXT_WINDOW,
}


@dataclass(frozen=True, slots=True)
class Ending:
    stop_reason: StopReason
    native: str | None
    truncated: bool
    withheld: tuple[WithheldCall, ...] = ()


def ending(ext: Any, native: str | None, table: Mapping[str, StopReason]) -> Ending:
    """The ending of a response: from the `gateway` object when present, else the native table."""
    if isinstance(ext, dict) and isinstance(ext.get("stop_reason"), str):
        stop = StopReason.parse(ext["stop_reason"])
        ext_native = ext.get("native_stop_reason")
        truncated = ext.get("truncated")
        return Ending(
            stop,
            ext_native if isinstance(ext_native, str) else native,
            truncated if isinstance(truncated, bool) else stop in CUT_STOP_REASONS,
            withheld_calls(ext),
        )
    stop = table.get(native, S.UNKNOWN) if native else S.UNKNOWN
    return Ending(stop, native, stop in CUT_STOP_REASONS)


def withheld_calls(ext: Any) -> tuple[WithheldCall, ...]:
    if not isinstance(ext, dict):
        return ()
    calls = ext.get("withheld_tool_calls")
    if not isinstance(calls, list):
        return ()
    return tuple(
        WithheldCall(str(c.get("id") or ""), str(c.get("name") or ""))
        for c in calls
        if isinstance(c, dict)
    )
