"""AWS's binary event stream (`application/vnd.amazon.eventstream`) as frames, at any chunking.

A message is a prelude (total length, headers length, prelude CRC32), typed headers, the
payload and a CRC32 of all before it. `botocore.eventstream.EventStreamBuffer` checks both CRCs
and reads the headers; it keeps its pending bytes as one `bytes` it grows per chunk and slices
per message, which costs the whole pending tail each time. So the bytes are collected here
(one bytearray, an offset, compacted once half of it is read) and the buffer is handed exactly
one whole message at a time: constant work per byte, whatever the chunking.

Each message becomes `SSEFrame(event, payload)`: the event is the `:event-type` header, or
`exception:<:exception-type>` for a `:message-type` of `exception` (an `error` message names
its `:error-code`, its `:error-message` becomes the payload `{"message": ...}`). A bad CRC, an
impossible length or a message cut by the end of the body is a protocol error of the upstream:
framing does not raise (the relay reads frames, not exceptions), it gives one last frame named
`FRAMING_ERROR` whose payload says what was wrong, and reads nothing after it.

    framing = EventStreamFraming()
    for chunk in body:
        for frame in framing.feed(chunk):
            handle(frame.event, frame.data)
    for frame in framing.close():
        handle(frame.event, frame.data)
"""

from __future__ import annotations

import binascii
from typing import Final

import orjson
from botocore.eventstream import EventStreamBuffer, ParserError

from gateway.formats.aws_frames import EXCEPTION_PREFIX, FRAMING_ERROR
from gateway.formats.sse import SSEFrame

PRELUDE: Final = 12  # total length, headers length, prelude CRC: three big-endian uint32
TRAILER: Final = 4  # the message CRC
# botocore's own limits (eventstream._MAX_HEADERS_LENGTH / _MAX_PAYLOAD_LENGTH)
MAX_HEADERS: Final = 128 * 1024
MAX_PAYLOAD: Final = 24 * 1024 * 1024
MAX_MESSAGE: Final = PRELUDE + MAX_HEADERS + MAX_PAYLOAD + TRAILER
__all__ = ("EXCEPTION_PREFIX", "FRAMING_ERROR", "EventStreamFraming")


class EventStreamFraming:
    """One stream body's framing state: `feed(chunk)` per chunk, `close()` at the end."""

    __slots__ = ("_broken", "_buffer", "_pending", "_start")

    def __init__(self) -> None:
        self._pending = bytearray()
        self._start = 0  # where the unread bytes begin in _pending
        self._broken = False

    def feed(self, chunk: bytes) -> list[SSEFrame]:
        if self._broken:
            return []
        self._pending += chunk
        frames: list[SSEFrame] = []
        pending = self._pending
        while True:
            start = self._start
            available = len(pending) - start
            if available < PRELUDE:
                break
            total = int.from_bytes(pending[start : start + 4], "big")
            if not PRELUDE + TRAILER <= total <= MAX_MESSAGE:
                frames.append(self._fail("a message length outside the protocol's bounds"))
                break
            # The prelude's own CRC, before waiting for a length that may be corrupt.
            prelude_crc = int.from_bytes(pending[start + 8 : start + PRELUDE], "big")
            if binascii.crc32(pending[start : start + 8]) != prelude_crc:
                frames.append(self._fail("a malformed message (ChecksumMismatch in its prelude)"))
                break
            if available < total:
                break
            frame = self._message(bytes(pending[start : start + total]))
            frames.append(frame)
            if self._broken:
                break
            self._start = start + total
        if self._start and self._start * 2 >= len(pending):
            del pending[: self._start]  # compact: each byte is moved at most once on average
            self._start = 0
        return frames

    def close(self) -> list[SSEFrame]:
        """The end of the body: bytes left over are a message the upstream did not finish."""
        if self._broken or len(self._pending) == self._start:
            return []
        return [self._fail("a message cut short by the end of the stream")]

    def _message(self, raw: bytes) -> SSEFrame:
        buffer = EventStreamBuffer()
        buffer.add_data(raw)
        try:
            message = buffer.next()
        except ParserError as exc:  # a CRC mismatch, headers or payload too long, a duplicate
            return self._fail(f"a malformed message ({type(exc).__name__})")
        except (ValueError, KeyError, IndexError) as exc:  # struct / header-type errors
            return self._fail(f"a malformed message ({type(exc).__name__})")
        except StopIteration:  # the message's own lengths disagree with its total
            return self._fail("a malformed message (inconsistent lengths)")
        headers = message.headers
        kind = headers.get(":message-type", "event")
        if kind == "event":
            event = headers.get(":event-type")
            return SSEFrame(event if isinstance(event, str) else None, message.payload)
        if kind == "exception":
            name = headers.get(":exception-type")
            return SSEFrame(EXCEPTION_PREFIX + str(name or "unknown"), message.payload)
        if kind == "error":
            code, text = headers.get(":error-code"), headers.get(":error-message")
            payload = orjson.dumps({"message": text if isinstance(text, str) else None})
            return SSEFrame(EXCEPTION_PREFIX + str(code or "unknown"), payload)
        return SSEFrame(None, message.payload)  # a message type not known yet: no event name

    def _fail(self, what: str) -> SSEFrame:
        self._broken = True
        self._pending = bytearray()
        self._start = 0
        return SSEFrame(FRAMING_ERROR, f"upstream event stream has {what}".encode())
