"""A small encoder of AWS's binary event stream, for the fake Bedrock upstream.

Written from the protocol rather than taken from botocore, so that the gateway's decoder
(botocore's `EventStreamBuffer` behind `gateway.formats.aws_eventstream`) is checked against an
independent writer. A message is:

    prelude   total length (uint32), headers length (uint32), CRC32 of those 8 bytes
    headers   per header: name length (uint8), name, value type (7: string),
              value length (uint16), value
    payload   the event's JSON
    trailer   CRC32 of everything before it

    event_message("contentBlockDelta", b'{"contentBlockIndex":0,"delta":{"text":"Hi"}}')
"""

from __future__ import annotations

import binascii
import struct
from typing import Final

STRING: Final = 7  # the header value type of a UTF-8 string


def header(name: str, value: str) -> bytes:
    raw_name, raw_value = name.encode(), value.encode()
    return (
        struct.pack(">B", len(raw_name))
        + raw_name
        + struct.pack(">BH", STRING, len(raw_value))
        + raw_value
    )


def message(headers: dict[str, str], payload: bytes) -> bytes:
    raw_headers = b"".join(header(name, value) for name, value in headers.items())
    total = 12 + len(raw_headers) + len(payload) + 4
    prelude = struct.pack(">II", total, len(raw_headers))
    prelude += struct.pack(">I", binascii.crc32(prelude))
    body = prelude + raw_headers + payload
    return body + struct.pack(">I", binascii.crc32(body))


def event_message(event: str, payload: bytes) -> bytes:
    """An event as Bedrock's ConverseStream sends it."""
    headers = {
        ":event-type": event,
        ":content-type": "application/json",
        ":message-type": "event",
    }
    return message(headers, payload)


def event_type_marker(event: str) -> bytes:
    """The bytes that say a message is of type `event`: what a reader looks for to know the
    stream's terminal event arrived without decoding the framing."""
    return header(":event-type", event)
