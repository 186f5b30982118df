"""The Responses stream's events as byte templates: each writes exactly the bytes the writer's
general encoder (`ResponsesWriter._event`, orjson over the event's dict) would write for it, in
its key order, with the varying fields filled in as JSON (tests/test_responses_writer.py holds
them to it). The writer's hot and fixed-shape events use them; the rest go through `_event`.
"""

from __future__ import annotations

# The terminal event's name, by the response's status (LIFECYCLE writes it twice).
TERMINAL_EVENTS = {
    "completed": b"response.completed",
    "incomplete": b"response.incomplete",
    "failed": b"response.failed",
}
# A text delta: its sequence number, the part's fixed fields, the delta's JSON.
TEXT_DELTA = (
    b"event: response.output_text.delta\n"
    b'data: {"type":"response.output_text.delta","sequence_number":%d%b%b,"logprobs":[]}\n\n'
)
# The end of a text part, from its fields' JSON (its text encoded once for all of them):
# response.output_text.done and response.content_part.done, then the part as content holds it.
TEXT_DONE = (
    b"event: response.output_text.done\n"
    b'data: {"type":"response.output_text.done","sequence_number":%d,%b,"text":%b,"logprobs":[]}'
    b"\n\n"
    b"event: response.content_part.done\n"
    b'data: {"type":"response.content_part.done","sequence_number":%d,%b,"part":%b}\n\n'
)
TEXT_PART = b'{"type":"output_text","text":%b,"annotations":[],"logprobs":[]}'
MESSAGE_ITEM = b'{"id":%b,"type":"message","role":"assistant","status":%b,"content":[%b]}'
ITEM_DONE = (
    b"event: response.output_item.done\n"
    b'data: {"type":"response.output_item.done","sequence_number":%d,"output_index":%d,"item":%b}'
    b"\n\n"
)
# A lifecycle event: the event's name twice, its sequence number, its response object.
LIFECYCLE = b'event: %s\ndata: {"type":"%s","sequence_number":%d,"response":%b}\n\n'
# The response object of response.created and response.in_progress, as `response_object`
# encodes it: its id, created_at and model as JSON, then the echo's members after a comma.
STARTED = (
    b'{"id":%b,"object":"response","created_at":%d,"status":"in_progress","error":null,'
    b'"incomplete_details":null,"model":%b,"output":[],"usage":null%b}'
)
STARTED_EVENTS = (
    b"event: response.created\n"
    b'data: {"type":"response.created","sequence_number":%d,"response":%b}\n\n'
    b"event: response.in_progress\n"
    b'data: {"type":"response.in_progress","sequence_number":%d,"response":%b}\n\n'
)
# A message item opened, then its first part (the part's place as `where` writes it).
MESSAGE_ADDED = (
    b"event: response.output_item.added\n"
    b'data: {"type":"response.output_item.added","sequence_number":%d,"output_index":%d,'
    b'"item":{"type":"message","id":%b,"role":"assistant","status":"in_progress","content":[]}}'
    b"\n\n"
)
TEXT_PART_ADDED = (
    b"event: response.content_part.added\n"
    b'data: {"type":"response.content_part.added","sequence_number":%d,%b,'
    b'"part":{"type":"output_text","text":"","annotations":[]}}\n\n'
)
