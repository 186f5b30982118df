"""SSE frames as the scripted upstream writes them, and the parts every wire's stream has.

    frame({"type": "ping"}, event="ping")   # b'event: ping\\ndata: {"type":"ping"}\\n\\n'
    frame(obj, multiline=True)               # one event, its JSON over several data: lines

A multi-line event is legal SSE: a reader joins the data lines with a newline, which JSON reads
as whitespace, so the event is exactly the one-line one.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

import orjson

from gateway.conformance.cases import USAGE

GARBAGE: Final = b'data: {"choices": [{"delta": oops this is not json\n\n'
JSON_TYPE: Final = "application/json"
SSE_TYPE: Final = "text/event-stream"


def frame(obj: Mapping[str, Any] | str, event: str | None = None, multiline: bool = False) -> bytes:
    data = obj if isinstance(obj, str) else orjson.dumps(obj).decode()
    lines = [f"event: {event}"] if event is not None else []
    # A break after each comma between members (`,"` only occurs there: a quote inside a JSON
    # string is escaped).
    pieces = data.replace(',"', ',\n"').split("\n") if multiline else [data]
    lines += [f"data: {piece}" for piece in pieces]
    return ("\n".join(lines) + "\n\n").encode()


@dataclass(frozen=True)
class Frames:
    """A stream cut into the parts the faults need: `head` (the stream's start), `content`
    (`mid` of them make the text's first two pieces), `stop` (the stop, usage and terminator)
    and `error` (the wire's error event, for ERROR_EVENT)."""

    head: list[bytes]
    content: list[bytes]
    mid: int
    stop: list[bytes]
    error: list[bytes]
    multiline: bytes  # content[mid - 1] as a multi-line event


def usage_pair(usage: bool, input_name: str, output_name: str) -> dict[str, int] | None:
    return {input_name: USAGE[0], output_name: USAGE[1]} if usage else None
