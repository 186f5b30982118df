"""The Responses stream writer on its own: the byte template of the text-delta hot path writes
exactly what the general event builder writes."""

from __future__ import annotations

import orjson

from gateway.encode import ReplyTerms
from gateway.encode.responses_stream import ResponsesWriter
from gateway.events import MessageStart, TextDelta


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
