"""How a response ended, for the loop: the gateway's `gateway` object when present, else the
wire's own reading (`gateway.formats.stop_reasons`, the tables the gateway itself uses).

Through the gateway a response carries `gateway.stop_reason` (already normalized, with the
upstream's own value in `native_stop_reason`); straight from a provider only the native value is
there, and the wire's decoder has normalized it. An unknown value is UNKNOWN, never STOP.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gateway.loop.turn import CUT_STOP_REASONS, StopReason, WithheldCall


@dataclass(frozen=True, slots=True)
class Ending:
    stop_reason: StopReason
    native: str | None
    truncated: bool
    withheld: tuple[WithheldCall, ...] = ()


def ending(ext: Any, native: str | None, reason: StopReason) -> Ending:
    """`reason` is the wire decoder's normalization of `native`; the extension object wins."""
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
    return Ending(reason, native, reason in CUT_STOP_REASONS)


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
