"""An OpenAI Chat stream relayed to an OpenAI-wire upstream asks for its usage; the client gets
only what it asked for (gateway.translate.stream_usage, gateway.encode.openai_relay).

The upstream streams as OpenAI does once asked: `"usage":null` in every chunk and a usage-only
chunk last. A client that did not ask sees neither, byte for byte the stream it would have had
from OpenAI; a client that asked sees them as sent. Either way the record has the counts.
"""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from tests.access_util import audit_rows, request
from tests.conftest import Stack, openai_client
from tests.upstream import Script, openai_sse

USER = [{"role": "user", "content": "hi"}]
USAGE = {"prompt_tokens": 9, "completion_tokens": 2, "total_tokens": 11}


def chunks(model: str) -> list[dict[str, Any]]:
    base = {"id": "chatcmpl-u", "object": "chat.completion.chunk", "created": 1, "model": model}

    def choice(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}

    return [
        {**base, "choices": [choice({"role": "assistant", "content": "Hi"})], "usage": None},
        {**base, "choices": [choice({"content": " there"})], "usage": None},
        {**base, "choices": [choice({}, "stop")], "usage": None},
        {**base, "choices": [], "usage": USAGE},
    ]


def frames(body: bytes) -> list[bytes]:
    return [f for f in body.split(b"\n\n") if f]


def streamed(stack: Stack, upstream: Any, model: str, **extra: Any) -> bytes:
    upstream.script(model, Script(chunks=openai_sse(chunks(model)), usage_if_asked=True))
    body = {"model": model, "messages": USER, "stream": True, **extra}
    reply = request(stack.urls["withhold"], "POST", "/v1/chat/completions", body=body)
    assert reply.status == 200
    return reply.body


def test_a_client_that_did_not_ask_gets_no_usage_and_the_record_has_it(
    stack, upstream, unique_model
):
    model = unique_model("oa")
    body = streamed(stack, upstream, model)

    assert upstream.last(model).json["stream_options"] == {"include_usage": True}
    assert b'"usage"' not in body
    sent = [b"data: " + orjson.dumps(c) for c in chunks(model)[:2]]
    assert frames(body)[:2] == [f.replace(b',"usage":null', b"") for f in sent]
    assert frames(body)[-1] == b"data: [DONE]"
    (record,) = audit_rows(stack, "withhold", model)
    assert (record["input_tokens"], record["output_tokens"]) == (9, 2)


def test_a_client_that_asked_gets_the_usage_as_the_upstream_sent_it(stack, upstream, unique_model):
    model = unique_model("oa")
    options = {"include_usage": True}
    body = streamed(stack, upstream, model, stream_options=options)

    assert upstream.last(model).json["stream_options"] == options
    sent = [b"data: " + orjson.dumps(c) for c in chunks(model)]
    assert frames(body)[:2] == sent[:2]  # `"usage":null` kept
    assert frames(body)[-2] == sent[-1]  # the usage chunk, as sent
    (record,) = audit_rows(stack, "withhold", model)
    assert (record["input_tokens"], record["output_tokens"]) == (9, 2)


@pytest.mark.parametrize("options", [{"include_usage": False}, {"other": 1}])
def test_the_clients_other_stream_options_are_kept(stack, upstream, unique_model, options):
    model = unique_model("oa")
    upstream.script(model, Script(chunks=openai_sse(chunks(model))))
    stream = openai_client(stack).chat.completions.create(
        model=model, messages=USER, stream=True, stream_options=options
    )
    assert "".join(c.choices[0].delta.content or "" for c in stream if c.choices) == "Hi there"
    assert upstream.last(model).json["stream_options"] == {**options, "include_usage": True}
