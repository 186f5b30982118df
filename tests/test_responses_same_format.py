"""A Responses client in front of a Responses upstream (`kind = "openai_responses"`): the
request goes up as the client sent it (unknown fields kept), the answer is rebuilt from its
events, so the grammar, held and withheld calls, the gateway's own response id and the
`gateway` object hold exactly as for the other wires."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from tests.responses_support import WEATHER_TOOL, check_grammar, post
from tests.responses_upstream import (
    ResponsesStack,
    call_item,
    response,
    responses_sse,
    stream_events,
    text_item,
)
from tests.upstream import Script


@pytest.fixture(scope="module")
def rstack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ResponsesStack]:
    stack = ResponsesStack(Path(tmp_path_factory.mktemp("responses-same")))
    stack.start()
    yield stack
    stack.stop()


def scripted(rstack: ResponsesStack, script: Script) -> str:
    model = f"rs-{uuid.uuid4().hex[:10]}"
    rstack.upstream.script(model, script)
    return model


def events_of(text: str) -> list[tuple[str, dict[str, Any]]]:
    out = []
    for block in text.split("\n\n"):
        if block.strip():
            lines = dict(line.split(": ", 1) for line in block.split("\n") if ": " in line)
            out.append((lines["event"], json.loads(lines["data"])))
    return out


def test_the_request_goes_up_unchanged(rstack):
    model = scripted(rstack, Script(body=orjson.dumps(response([text_item("hi")]))))
    body = {
        "model": model,
        "input": [{"role": "user", "content": "hi"}],
        "x_future_field": {"kept": [1, 2]},
        "store": False,
        "include": ["reasoning.encrypted_content"],
    }

    status, _, text = post(rstack, body)

    assert status == 200, text
    received = rstack.upstream.last(model)
    assert received.path == "/v1/responses" and received.json == body
    assert received.headers["Authorization"].startswith("Bearer sk-upstream-SECRET")


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
def test_text_and_calls_through_the_sdk(rstack, stream):
    items = [text_item("Checking."), call_item("call_1", "get_weather", '{"city":"Bern"}')]
    script = (
        Script(chunks=responses_sse(stream_events(items)))
        if stream
        else Script(body=orjson.dumps(response(items)))
    )
    model = scripted(rstack, script)
    client = rstack.openai()

    if stream:
        with client.responses.stream(model=model, input="hi", tools=[WEATHER_TOOL]) as events:
            for _ in events:
                pass
            result = events.get_final_response()
    else:
        result = client.responses.create(model=model, input="hi", tools=[WEATHER_TOOL])

    assert result.output_text == "Checking."
    (call,) = [item for item in result.output if item.type == "function_call"]
    assert (call.call_id, json.loads(call.arguments)) == ("call_1", {"city": "Bern"})
    assert result.id.startswith("resp_") and result.id != "resp_1"  # the gateway's own id
    ext = result.model_extra["gateway"]
    assert (ext["stop_reason"], ext["native_stop_reason"]) == ("tool_calls", "completed")


def test_an_upstream_rotating_its_ids_still_gives_one_identity(rstack):
    events = stream_events([text_item("Hello there")])
    for n, event in enumerate(events):
        if "response" in event:
            event["response"] = {**event["response"], "id": f"resp_rotated_{n}"}
    model = scripted(rstack, Script(chunks=responses_sse(events)))

    with rstack.openai().responses.stream(model=model, input="hi") as stream:
        for _ in stream:
            pass
        result = stream.get_final_response()  # raises when the identity changes

    assert result.output_text == "Hello there"


def test_a_cut_call_is_withheld(rstack):
    items = [text_item("Let me"), call_item("call_9", "get_weather", '{"city": "Zür')]
    events = stream_events(items, status="incomplete", reason="max_output_tokens")
    model = scripted(rstack, Script(chunks=responses_sse(events)))

    status, _, text = post(rstack, {"model": model, "input": "hi", "stream": True})

    assert status == 200
    frames = events_of(text)
    final = check_grammar(frames)
    assert frames[-1][0] == "response.incomplete"
    assert "Zür" not in text and "function_call" not in text
    assert final["gateway"]["withheld_tool_calls"] == [{"id": "call_9", "name": "get_weather"}]


APPLY_PATCH = {"type": "custom", "name": "apply_patch", "description": "Apply a patch"}


def test_a_custom_tool_call_comes_back_as_one(rstack):
    item = {
        "type": "custom_tool_call",
        "id": "ctc_1",
        "call_id": "call_p",
        "name": "apply_patch",
        "input": "*** Begin Patch\n*** End Patch",
    }
    model = scripted(rstack, Script(body=orjson.dumps(response([item]))))

    result = rstack.openai().responses.create(model=model, input="patch", tools=[APPLY_PATCH])

    (call,) = result.output
    assert call.type == "custom_tool_call"
    assert (call.call_id, call.name, call.input) == ("call_p", "apply_patch", item["input"])


ROWS = [
    # upstream status, incomplete reason, items, client status, client reason, normalized
    ("completed", None, [text_item("done")], "completed", None, "stop"),
    ("incomplete", "max_output_tokens", [text_item("cut")], "incomplete", "max_output_tokens",
     "length"),
    ("incomplete", "content_filter", [text_item("filtered")], "incomplete", "content_filter",
     "content_filter"),
    ("incomplete", "max_messages", [text_item("paused")], "completed", None, "pause"),
    ("incomplete", "some_future_reason", [text_item("hm")], "completed", None, "unknown"),
]  # fmt: skip


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
@pytest.mark.parametrize(
    ("up_status", "up_reason", "items", "status", "reason", "normalized"),
    ROWS,
    ids=[f"{r[0]}-{r[1]}" for r in ROWS],
)
def test_stop_rows_of_a_responses_upstream(
    rstack, stream, up_status, up_reason, items, status, reason, normalized
):
    if stream:
        events = stream_events(items, status=up_status, reason=up_reason)
        script = Script(chunks=responses_sse(events))
    else:
        script = Script(body=orjson.dumps(response(items, up_status, up_reason)))
    model = scripted(rstack, script)

    got, _, text = post(rstack, {"model": model, "input": "hi", "stream": stream})

    assert got == 200, text
    final = check_grammar(events_of(text)) if stream else json.loads(text)
    assert final["status"] == status
    assert (final["incomplete_details"] or {}).get("reason") == reason
    native = up_status if up_reason is None else f"{up_status}:{up_reason}"
    ext = final["gateway"]
    assert (ext["stop_reason"], ext["native_stop_reason"]) == (normalized, native)


def test_the_gateways_own_reasoning_tokens_never_reach_a_responses_upstream(rstack):
    from gateway.translate.reasoning_token import Thinking, encode

    model = scripted(rstack, Script(body=orjson.dumps(response([text_item("ok")]))))
    ours = {
        "type": "reasoning",
        "id": "rs_a",
        "summary": [],
        "encrypted_content": encode(Thinking(signature="sig-from-anthropic")),
    }
    theirs = {"type": "reasoning", "id": "rs_o", "summary": [], "encrypted_content": "gAAAA-op"}
    items = [{"role": "user", "content": "hi"}, ours, theirs, {"role": "user", "content": "more"}]

    status, _, text = post(rstack, {"model": model, "input": items})

    assert status == 200, text
    sent = rstack.upstream.last(model).json["input"]
    assert [item.get("id") for item in sent] == [None, "rs_o", None]  # OpenAI's own stays
    assert "sig-from-anthropic" not in rstack.upstream.last(model).body.decode()
    assert json.loads(text)["gateway"]["dropped"]["input_items"] == {"reasoning": 1}


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
def test_parallel_calls_and_a_cut_call_under_pass(rstack, stream):
    calls = [
        call_item("call_a", "get_weather", '{"city":"Bern"}'),
        call_item("call_b", "get_weather", '{"city": "Ro'),
    ]
    if stream:
        events = stream_events(calls, status="incomplete", reason="max_output_tokens")
        script = Script(chunks=responses_sse(events))
    else:
        script = Script(body=orjson.dumps(response(calls, "incomplete", "max_output_tokens")))
    model = scripted(rstack, script)

    status, _, text = post(rstack, {"model": model, "input": "hi", "stream": stream}, "pass")

    assert status == 200
    final = check_grammar(events_of(text)) if stream else json.loads(text)
    assert final["status"] == "incomplete"
    got = [(item["call_id"], item["arguments"], item["status"]) for item in final["output"]]
    assert got == [
        ("call_a", '{"city":"Bern"}', "incomplete"),
        ("call_b", '{"city": "Ro', "incomplete"),
    ]


def test_parallel_calls_through_the_sdk_keep_their_order(rstack):
    calls = [
        call_item("call_a", "get_weather", '{"city":"Bern"}'),
        call_item("call_b", "get_weather", '{"city":"Rome"}'),
    ]
    model = scripted(rstack, Script(chunks=responses_sse(stream_events(calls))))

    with rstack.openai().responses.stream(model=model, input="hi", tools=[WEATHER_TOOL]) as s:
        for _ in s:
            pass
        result = s.get_final_response()

    assert [(c.call_id, json.loads(c.arguments)) for c in result.output] == [
        ("call_a", {"city": "Bern"}),
        ("call_b", {"city": "Rome"}),
    ]


def test_a_stream_without_its_terminal_event_ends_failed(rstack):
    events = stream_events([text_item("Partial answer")], terminal=False)
    model = scripted(rstack, Script(chunks=responses_sse(events)))

    status, _, text = post(rstack, {"model": model, "input": "hi", "stream": True})

    assert status == 200
    frames = events_of(text)
    final = check_grammar(frames)
    assert [kind for kind, _ in frames][-2:] == ["error", "response.failed"]
    assert final["gateway"]["truncated"] is True and final["output"][0]["status"] == "incomplete"


def test_an_upstream_429_keeps_its_status_body_and_retry_after(rstack):
    body = {
        "error": {
            "message": "Rate limit reached",
            "type": "requests",
            "code": "rate_limit_exceeded",
        }
    }
    script = Script(status=429, body=orjson.dumps(body), headers={"retry-after": "3"})
    model = scripted(rstack, script)

    status, headers, text = post(rstack, {"model": model, "input": "hi", "stream": True})

    assert status == 429 and headers.get("retry-after") == "3"
    assert json.loads(text)["error"]["code"] == "rate_limit_exceeded"


def test_a_chain_to_a_responses_upstream_sends_the_whole_history(rstack):
    first_model = scripted(rstack, Script(body=orjson.dumps(response([text_item("Hi Ada")]))))
    client = rstack.openai()
    first = client.responses.create(model=first_model, input="I am Ada", store=True)
    model = scripted(rstack, Script(body=orjson.dumps(response([text_item("Ada")]))))

    second = client.responses.create(model=model, input="Who am I?", previous_response_id=first.id)

    assert second.output_text == "Ada"
    sent = rstack.upstream.last(model).json
    assert "previous_response_id" not in sent
    texts = [item.get("content") for item in sent["input"]]
    assert texts[0] == "I am Ada" and texts[-1] == "Who am I?"
    assert sent["input"][1]["type"] == "message" and sent["input"][1]["role"] == "assistant"
