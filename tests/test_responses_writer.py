"""The Responses stream writer on its own: the byte templates of the opening events, the
text-delta hot path and the end write exactly what the general event builder writes."""

from __future__ import annotations

import orjson
import pytest

from gateway.encode import ReplyTerms
from gateway.encode.responses_body import echo_members, response_object
from gateway.encode.responses_stream import ResponsesWriter
from gateway.events import (
    MessageStart,
    RefusalDelta,
    Stop,
    StopReason,
    StreamEnd,
    TextDelta,
    ThinkingDelta,
    ToolCallStart,
)
from gateway.normalize.aggregate import ChunkAggregator
from gateway.normalize.truncation import judge


def frames(data: bytes) -> list[tuple[str, dict]]:
    out = []
    for block in data.decode().split("\n\n"):
        if block:
            event, payload = block.split("\n", 1)
            out.append(
                (event.removeprefix("event: "), orjson.loads(payload.removeprefix("data: ")))
            )
    return out


def test_the_text_delta_template_matches_the_general_event():
    terms = ReplyTerms("req1", "p", "m", "withhold", response_id="resp_" + "0" * 32)
    writer = ResponsesWriter(terms)
    texts = ["Grüß ", 'dich "\\n" ', "😀\u2028"]

    data = writer.feed(None, None, [MessageStart("up", "m"), *(TextDelta(t) for t in texts)])

    deltas = [(k, d) for k, d in frames(data) if k == "response.output_text.delta"]
    assert [d["delta"] for _, d in deltas] == texts
    first_seq = deltas[0][1]["sequence_number"]
    for n, (_, d) in enumerate(deltas):
        general = ResponsesWriter(terms)
        general._seq = first_seq + n
        expected = general._event(
            "response.output_text.delta",
            item_id=d["item_id"],
            output_index=0,
            content_index=0,
            delta=texts[n],
            logprobs=[],
        )
        assert expected in data  # byte for byte


def ended(events: list) -> bytes:
    """A whole stream of `events` through the writer, ended as the relay ends it."""
    terms = ReplyTerms("req1", "p", "m", "withhold", response_id="resp_" + "0" * 32)
    writer, agg = ResponsesWriter(terms), ChunkAggregator()
    for event in events:
        agg.handle(event)
    data = writer.feed(None, None, events[:-2])
    response = agg.final()
    reason, native = agg.stop
    verdict = judge(reason, native, agg.error, [(c.id, c.name) for c in agg.tool_calls], "withhold")
    return data + writer.end(verdict, response)


@pytest.mark.parametrize(
    "middle",
    [
        [TextDelta("Grüß "), TextDelta('"\\n"😀\u2028')],
        [ThinkingDelta("hmm"), TextDelta("a"), RefusalDelta("no %d %b"), TextDelta("b")],
        [TextDelta("x"), ToolCallStart(0, "call_1", "f"), TextDelta("held")],
        [],
    ],
)
def test_the_end_events_from_byte_templates_are_what_the_general_encoder_writes(middle):
    stop = Stop(StopReason.TOOL_CALLS if len(middle) == 3 else StopReason.STOP, "completed")
    data = ended([MessageStart("up", "m"), *middle, stop, StreamEnd(terminator_seen=True)])

    events = frames(data)
    for block in data.split(b"\n\n")[:-1]:
        payload = block.split(b"\ndata: ", 1)[1]
        assert orjson.dumps(orjson.loads(payload)) == payload  # orjson's own bytes for the dict
    assert [d["sequence_number"] for _, d in events] == list(range(len(events)))
    done = [d["item"] for k, d in events if k == "response.output_item.done"]
    assert events[-1][1]["response"]["output"] == done
    # The general encoder's bytes for the text part's and the message's end, in its key order.
    general = ResponsesWriter(ReplyTerms("req1", "p", "m", "withhold"))
    for kind, d in events:
        if kind == "response.output_text.done":
            where = {k: d[k] for k in ("item_id", "output_index", "content_index")}
            general._seq = d["sequence_number"]
            text = d["text"]
            part = {"type": "output_text", "text": text, "annotations": [], "logprobs": []}
            expected = general._event(kind, **where, text=text, logprobs=[])
            expected += general._event("response.content_part.done", **where, part=part)
            assert expected in data
        if kind == "response.output_item.done" and d["item"]["type"] == "message":
            item = d["item"]
            general._seq = d["sequence_number"]
            item = {k: item[k] for k in ("id", "type", "role", "status", "content")}
            assert general._event(kind, output_index=d["output_index"], item=item) in data
    texts = [d["text"] for k, d in events if k == "response.output_text.done"]
    parts = [p for item in done for p in item.get("content", ()) if p["type"] == "output_text"]
    assert texts == [p["text"] for p in parts]
    assert "".join(texts) == "".join(e.text for e in middle if isinstance(e, TextDelta))


@pytest.mark.parametrize("echo", [{}, {"store": False, "instructions": "Sois «bref»\u2028"}])
@pytest.mark.parametrize("model", ["", 'gpt-5 ünïcode "quoted"'])
def test_the_opening_events_from_byte_templates_are_what_the_general_encoder_writes(echo, model):
    terms = ReplyTerms(
        "req1", "p", "client-m", "withhold", response_id="resp_" + "7" * 32, echo=echo
    )
    writer = ResponsesWriter(terms)
    data = writer.feed(None, None, [MessageStart("up", model), TextDelta("hi")])

    general = ResponsesWriter(terms)
    response = response_object(
        terms,
        "in_progress",
        [],
        None,
        model,
        None,
        created_at=writer._created_at,
        echo=echo_members(terms),
    )
    expected = general._event("response.created", response=response)
    expected += general._event("response.in_progress", response=response)
    message_id = frames(data)[2][1]["item"]["id"]
    item = {"type": "message", "id": message_id, "role": "assistant", "status": "in_progress"}
    expected += general._event(
        "response.output_item.added", output_index=0, item={**item, "content": []}
    )
    part = {"type": "output_text", "text": "", "annotations": []}
    where = {"item_id": message_id, "output_index": 0, "content_index": 0}
    expected += general._event("response.content_part.added", **where, part=part)
    assert data.startswith(expected)  # byte for byte
    assert orjson.loads(expected.split(b"\ndata: ", 1)[1].split(b"\n")[0])["response"]["model"] == (
        model or "client-m"
    )
