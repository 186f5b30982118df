"""The bench's own AWS event-stream encoder, read back by botocore's `EventStreamBuffer`: the
decoder that checks both CRCs and the header encoding, independently of our writer."""

from __future__ import annotations

import orjson
import pytest
from botocore.eventstream import ChecksumMismatch, EventStreamBuffer

from gateway_bench.answers_cloud import bedrock_stream
from gateway_bench.eventstream import event_message, event_type_marker, message
from gateway_bench.scenario import Scenario


def decoded(data: bytes, split: int | None = None) -> list[tuple[dict[str, object], bytes]]:
    buffer = EventStreamBuffer()
    pieces = [data] if split is None else [data[:split], data[split:]]
    out = []
    for piece in pieces:
        buffer.add_data(piece)
        out += [(m.headers, m.payload) for m in buffer]
    return out


def test_one_message_reads_back_with_its_headers_and_payload():
    raw = message({":event-type": "messageStart", "x-custom": "é∂"}, b'{"role":"assistant"}')
    ((headers, payload),) = decoded(raw)
    assert headers == {":event-type": "messageStart", "x-custom": "é∂"}
    assert payload == b'{"role":"assistant"}'


def test_an_empty_payload_and_no_headers_are_valid():
    ((headers, payload),) = decoded(message({}, b""))
    assert headers == {} and payload == b""


@pytest.mark.parametrize("split", [None, 1, 11, 12, 40, -4, -1])
def test_a_whole_converse_stream_reads_back_at_any_split(split):
    raw = b"".join(bedrock_stream("bbench", Scenario(3)))
    messages = decoded(raw, split)
    names = [headers[":event-type"] for headers, _ in messages]
    assert names == [
        "messageStart",
        "contentBlockDelta",
        "contentBlockDelta",
        "contentBlockDelta",
        "contentBlockStop",
        "messageStop",
        "metadata",
    ]
    assert all(h[":message-type"] == "event" for h, _ in messages)
    texts = [orjson.loads(p)["delta"]["text"] for h, p in messages if "Delta" in h[":event-type"]]
    assert texts == ["Hello", " w1", " w2"]


def test_a_corrupted_byte_fails_the_crc():
    raw = bytearray(event_message("metadata", b'{"usage":{}}'))
    raw[-6] ^= 0x01  # a payload byte: the message CRC no longer matches
    with pytest.raises(ChecksumMismatch):
        decoded(bytes(raw))


def test_the_terminal_marker_is_the_event_type_header():
    raw = event_message("messageStop", b"{}")
    assert event_type_marker("messageStop") in raw
    assert event_type_marker("messageStop") not in event_message("messageStart", b"{}")
