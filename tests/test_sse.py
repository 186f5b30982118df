"""The incremental SSE decoder: any chunking of the byte stream gives the same frames."""

from __future__ import annotations

from collections.abc import Iterable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gateway.formats.sse import SSEDecoder, SSEFrame, _read_block, encode
from tests.fixtures_util import chunked


def decode(chunks: Iterable[bytes]) -> list[SSEFrame]:
    decoder = SSEDecoder()
    frames: list[SSEFrame] = []
    for chunk in chunks:
        frames += decoder.feed(chunk)
    return frames + decoder.close()


def pairs(frames: list[SSEFrame]) -> list[tuple[str | None, bytes]]:
    return [(f.event, f.data) for f in frames]


def bytewise(body: bytes) -> list[bytes]:
    return [body[i : i + 1] for i in range(len(body))]


# A stream with every feature the decoder must handle, and what it must give.
MIXED = (
    b": keep-alive\n"
    b"event: message_start\r\n"
    b'data: {"a": "h\xc3\xa9llo \xe2\x9c\x93 \xf0\x9f\x98\x80"}\r\n'
    b"\r\n"
    b"id: 7\n"
    b"retry: 1000\n"
    b"data:no-space\n"
    b"\n"
    b"data: line one\r"
    b": a comment between data lines\r"
    b"data: line two\r"
    b"data:  two spaces keep one\r"
    b"\r"
    b"event: ping\n"
    b"\n"
    b"event: content_block_delta\n"
    b'data: {"t": "\xe4\xb8\xad\xe6\x96\x87"}\n'
    b"\n"
    b": trailing keep-alive\r\n"
    b"data: last without blank line"
)
MIXED_FRAMES = [
    ("message_start", '{"a": "héllo ✓ 😀"}'.encode()),
    (None, b"no-space"),
    (None, b"line one\nline two\n two spaces keep one"),
    ("content_block_delta", '{"t": "中文"}'.encode()),
    (None, b"last without blank line"),
]


def test_mixed_stream_whole():
    assert pairs(decode([MIXED])) == MIXED_FRAMES


def test_mixed_stream_byte_at_a_time_equals_whole():
    assert pairs(decode(bytewise(MIXED))) == pairs(decode([MIXED])) == MIXED_FRAMES


def test_mixed_stream_every_two_chunk_split():
    for i in range(len(MIXED) + 1):
        assert pairs(decode([MIXED[:i], MIXED[i:]])) == MIXED_FRAMES, i


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(min_value=0, max_value=len(MIXED)), max_size=40))
def test_mixed_stream_random_chunkings(points):
    assert pairs(decode(chunked(MIXED, points))) == MIXED_FRAMES


def test_split_inside_utf8_character():
    text = "héllo ✓ 😀 中"
    body = b"data: " + text.encode() + b"\n\n"
    for i in range(len(body) + 1):
        frames = decode([body[:i], body[i:]])
        assert pairs(frames) == [(None, text.encode())], i
        assert frames[0].data.decode("utf-8") == text


def test_split_inside_a_line():
    body = b'event: message_delta\ndata: {"x": 1}\n\n'
    assert pairs(
        decode([b"eve", b"nt: message_d", b"elta\nda", b'ta: {"x"', b": 1}\n", b"\n"])
    ) == [("message_delta", b'{"x": 1}')]
    assert pairs(decode([body])) == [("message_delta", b'{"x": 1}')]


def test_crlf_split_across_chunks_is_one_line_end():
    # Were the held \r and the next chunk's \n two line ends, the blank line between them would
    # dispatch "a" alone and "b" as a second event.
    frames = decode([b"data: a\r", b"\ndata: b\r\n\r\n"])
    assert pairs(frames) == [(None, b"a\nb")]


def test_crlf_split_at_the_blank_line():
    decoder = SSEDecoder()
    assert decoder.feed(b"data: a\r\n\r") == []
    assert pairs(decoder.feed(b"\ndata: b\r\n\r\n")) == [(None, b"a"), (None, b"b")]
    assert decoder.close() == []


def test_bare_cr_held_at_chunk_end_is_still_a_line_end():
    decoder = SSEDecoder()
    assert decoder.feed(b"data: a\r") == []
    # The next chunk starts a new line: the held \r was a line end of its own.
    assert pairs(decoder.feed(b"\rdata: b\r\r")) == [(None, b"a")]
    assert pairs(decoder.close()) == [(None, b"b")]


def test_crlf_and_bare_cr_line_ends():
    assert pairs(decode([b"data: x\r\ndata: y\r\n\r\n"])) == [(None, b"x\ny")]
    assert pairs(decode([b"event: e\rdata: x\rdata: y\r\r"])) == [("e", b"x\ny")]
    assert pairs(decode([b"data: a\r\rdata: b\n\ndata: c\r\n\r\n"])) == [
        (None, b"a"),
        (None, b"b"),
        (None, b"c"),
    ]


def test_comment_lines_are_ignored():
    body = b": keep-alive\n\n:\n\ndata: x\n: inside\ndata: y\n\n: tail\n\n"
    assert pairs(decode([body])) == [(None, b"x\ny")]
    assert decode([b": only comments\n\n: again\r\n\r\n"]) == []


def test_multi_line_data_is_joined_with_newline():
    assert pairs(decode([b'data: {\ndata: "a": 1\ndata: }\n\n'])) == [(None, b'{\n"a": 1\n}')]


def test_event_lines_name_the_frame_and_reset_after_dispatch():
    body = b"event: message_start\ndata: 1\n\ndata: 2\n\nevent: x\nevent: y\ndata: 3\n\n"
    assert pairs(decode([body])) == [("message_start", b"1"), (None, b"2"), ("y", b"3")]


def test_data_with_and_without_space_after_colon():
    body = b"data: a\n\ndata:b\n\ndata:  c\n\ndata:\n\n"
    assert pairs(decode([body])) == [(None, b"a"), (None, b"b"), (None, b" c"), (None, b"")]


def test_id_and_retry_are_ignored():
    body = b"id: 42\nretry: 3000\ndata: x\nid: 43\n\nunknown: field\ndata: y\n\n"
    assert pairs(decode([body])) == [(None, b"x"), (None, b"y")]
    assert decode([b"id: 1\nretry: 10\n\n"]) == []


def test_event_without_data_is_not_dispatched():
    body = b"event: ping\n\ndata: x\n\nevent: lonely\n\n"
    # The name of an event without data does not leak into the next event either.
    assert pairs(decode([body])) == [(None, b"x")]


def test_final_event_without_blank_line_is_delivered_by_close():
    decoder = SSEDecoder()
    assert decoder.feed(b'event: message_stop\ndata: {"type":"message_stop"}') == []
    assert pairs(decoder.close()) == [("message_stop", b'{"type":"message_stop"}')]
    for tail in (b"\n", b"\r\n", b"\r"):
        decoder = SSEDecoder()
        assert decoder.feed(b"data: last" + tail) == []
        assert pairs(decoder.close()) == [(None, b"last")], tail


def test_close_without_pending_event_gives_nothing():
    decoder = SSEDecoder()
    assert pairs(decoder.feed(b"data: x\n\n")) == [(None, b"x")]
    assert decoder.close() == []
    assert SSEDecoder().close() == []


def test_encode_round_trips():
    body = encode(b'{"a":1}') + encode(b'{"b":2}', "message_delta")
    assert body == b'data: {"a":1}\n\nevent: message_delta\ndata: {"b":2}\n\n'
    assert pairs(decode(bytewise(body))) == [(None, b'{"a":1}'), ("message_delta", b'{"b":2}')]


# --- model-based: random events, random line ends and comments, random chunking ---------------

LINE_ENDS = st.sampled_from(["\n", "\r\n", "\r"])
VALUE = st.text(
    st.characters(blacklist_categories=("Cs",), blacklist_characters="\r\n"), max_size=12
)
EVENT_NAME = st.from_regex(r"[a-z_]{1,12}", fullmatch=True)


@st.composite
def sse_streams(draw):
    """A body and the frames it must decode to."""
    parts: list[str] = []
    expected: list[tuple[str | None, bytes]] = []
    for _ in range(draw(st.integers(1, 6))):
        end = draw(LINE_ENDS)
        if draw(st.booleans()):
            parts.append(":" + draw(VALUE) + end)
        name = draw(st.none() | EVENT_NAME)
        if name is not None:
            parts.append(f"event: {name}{end}")
        values = draw(st.lists(VALUE, min_size=1, max_size=3))
        for n, value in enumerate(values):
            if draw(st.booleans()):
                parts.append(f"id: {n}{end}")
            spaced = value.startswith(" ") or draw(st.booleans())
            parts.append(("data: " if spaced else "data:") + value + end)
            if draw(st.booleans()):
                parts.append(": note" + end)
        parts.append(end)
        expected.append((name, "\n".join(values).encode()))
    return "".join(parts).encode(), expected


@settings(max_examples=100, deadline=None)
@given(sse_streams(), st.data())
def test_random_streams_under_random_chunkings(stream, data):
    body, expected = stream
    points = data.draw(st.lists(st.integers(0, len(body)), max_size=20))
    assert pairs(decode(chunked(body, points))) == expected
    assert pairs(decode(bytewise(body))) == expected


# --- the name-and-data pair run (SSEDecoder._pairs) ---------------------------------------------


def line_by_line(body: bytes) -> list[tuple[str | None, bytes]]:
    """What the specification's line-by-line reading gives, with no fast path."""
    frames: list[SSEFrame] = []
    _read_block(body.replace(b"\r\n", b"\n").replace(b"\r", b"\n"), frames)
    return pairs(frames)


PAIR_RUN = (
    b"event: response.created\ndata: {}\n\n"
    b"event: \ndata: \n\n"  # an empty name and empty data
    b"event: a:b\ndata: data: x\n\n"
    b"event: caf\xc3\xa9 \xff\ndata: event: y\n\n"
)


def test_a_run_of_pairs_is_one_match_per_event():
    decoder = SSEDecoder()
    got = pairs(decoder.feed(PAIR_RUN + b"event: partial\nda"))
    assert got == line_by_line(PAIR_RUN)
    assert got[1] == ("", b"") and got[3][0] == "café \ufffd"
    assert pairs(decoder.feed(b"ta: rest\n\n")) == [("partial", b"rest")]


@pytest.mark.parametrize(
    "odd",
    [
        b"event: x\nid: 1\ndata: y\n\n",  # a line between the name and the data
        b"event: x\ndata: y\ndata: z\n\n",  # data on two lines
        b"event:x\ndata: y\n\n",  # no space after the colon
        b"event: x\n\n",  # a name without data
        b"data: plain\n\n",
        b": keep-alive\n\n",
        b"\n",  # a longer run of line ends: the next block starts with one
        b"event: x\r\ndata: y\r\n\r\n",
    ],
)
@pytest.mark.parametrize("where", [0, 1, 4])
def test_any_other_event_among_pairs_reads_as_the_specification_does(odd, where):
    events = [PAIR_RUN[: PAIR_RUN.index(b"event: \n")], b"event: q\ndata: 1\n\n"] * 2
    body = b"".join(events[:where]) + odd + b"".join(events[where:])
    assert pairs(decode([body])) == line_by_line(body)
    assert pairs(decode(bytewise(body))) == line_by_line(body)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from([b"", b"a", b"ping", b"x:y", b"\xff", b"event: z", b" "]),
            st.sampled_from([b"", b"{}", b"data: x", b"\xc3", b":"]),
        ),
        max_size=8,
    ),
    st.data(),
)
def test_pair_runs_with_a_byte_changed_decode_as_line_by_line(events, data):
    body = b"".join(b"event: " + name + b"\ndata: " + value + b"\n\n" for name, value in events)
    if body and data.draw(st.booleans()):
        at = data.draw(st.integers(0, len(body) - 1))
        body = body[:at] + data.draw(st.sampled_from([b"\n", b"", b"x", b":"])) + body[at + 1 :]
    cut = data.draw(st.integers(0, len(body)))
    assert pairs(decode([body[:cut], body[cut:]])) == line_by_line(body)
