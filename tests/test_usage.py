"""Usage across wires. Anthropic counts cached input apart from `input_tokens`; OpenAI's
`prompt_tokens` includes the cached part (`prompt_tokens_details.cached_tokens`). The normalized
input total includes every cached token, so an OpenAI client of an Anthropic upstream sees the
whole prompt, an Anthropic client of an OpenAI upstream sees only the fresh part as
`input_tokens`, and the audit record holds the total."""

from __future__ import annotations

import sqlite3
import time
from typing import Any

import orjson
import pytest

from gateway.formats import anthropic_messages, openai_chat
from tests.conftest import anthropic_client, openai_client
from tests.scenarios import Answer, anthropic_body, anthropic_events, openai_body, openai_chunks
from tests.upstream import Script, anthropic_sse, openai_sse

FRESH, READ, CREATED, OUTPUT = 10, 100, 7, 5
TOTAL = FRESH + READ + CREATED
ANTHROPIC_USAGE = {
    "input_tokens": FRESH,
    "cache_read_input_tokens": READ,
    "cache_creation_input_tokens": CREATED,
    "output_tokens": OUTPUT,
}
OPENAI_USAGE = {
    "prompt_tokens": FRESH + READ,
    "completion_tokens": OUTPUT,
    "total_tokens": FRESH + READ + OUTPUT,
    "prompt_tokens_details": {"cached_tokens": READ},
}


def test_anthropic_usage_counts_cached_input_in_the_total():
    usage = anthropic_messages.usage_event(ANTHROPIC_USAGE)
    assert (usage.input_tokens, usage.cache_read_tokens, usage.cache_creation_tokens) == (
        TOTAL,
        READ,
        CREATED,
    )
    assert usage.output_tokens == OUTPUT


def test_openai_usage_already_counts_cached_input():
    usage = openai_chat.usage_event(OPENAI_USAGE)
    assert (usage.input_tokens, usage.cache_read_tokens) == (FRESH + READ, READ)


def anthropic_script(model: str, stream: bool) -> Script:
    answer = Answer(text="cached answer")
    if not stream:
        body = anthropic_body(answer, model)
        body["usage"] = ANTHROPIC_USAGE
        return Script(body=orjson.dumps(body))
    events = anthropic_events(answer, model)
    events[0]["message"]["usage"] = {**ANTHROPIC_USAGE, "output_tokens": 1}
    events[-2]["usage"] = {"output_tokens": OUTPUT}
    return Script(chunks=anthropic_sse(events))


def openai_script(model: str, stream: bool) -> Script:
    answer = Answer(text="cached answer")
    if not stream:
        body = openai_body(answer, model)
        body["usage"] = OPENAI_USAGE
        return Script(body=orjson.dumps(body))
    chunks = openai_chunks(answer, model)
    chunks[-1]["usage"] = OPENAI_USAGE
    return Script(chunks=openai_sse(chunks))


def record_usage(stack: Any, request_id: str) -> tuple[Any, ...]:
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        with sqlite3.connect(stack.audit_db()) as conn:
            row = conn.execute(
                "select input_tokens, cache_read_tokens, cache_creation_tokens, output_tokens "
                "from audit_records where id = ?",
                (request_id,),
            ).fetchone()
        if row is not None:
            return tuple(row)
        time.sleep(0.05)
    raise AssertionError(f"no audit record {request_id}")


@pytest.mark.parametrize("stream", [True, False], ids=["stream", "whole"])
def test_an_openai_client_of_an_anthropic_upstream_sees_the_whole_prompt(
    stack, upstream, unique_model, stream
):
    model = unique_model("an")
    upstream.script(model, anthropic_script(model, stream))
    client = openai_client(stack)
    messages = [{"role": "user", "content": "hi"}]
    if stream:
        chunks = list(
            client.chat.completions.create(
                model=model, messages=messages, stream=True, stream_options={"include_usage": True}
            )
        )
        usage = chunks[-1].usage
        request_id = chunks[-2].model_extra["gateway"]["request_id"]
    else:
        completion = client.chat.completions.create(model=model, messages=messages)
        usage = completion.usage
        request_id = completion.model_extra["gateway"]["request_id"]
    assert (usage.prompt_tokens, usage.completion_tokens) == (TOTAL, OUTPUT)
    assert usage.prompt_tokens_details.cached_tokens == READ
    assert record_usage(stack, request_id) == (TOTAL, READ, CREATED, OUTPUT)


@pytest.mark.parametrize("stream", [True, False], ids=["stream", "whole"])
def test_an_anthropic_client_of_an_openai_upstream_sees_the_fresh_part_as_input(
    stack, upstream, unique_model, stream
):
    model = unique_model("oa")
    upstream.script(model, openai_script(model, stream))
    client = anthropic_client(stack)
    messages = [{"role": "user", "content": "hi"}]
    if stream:
        with client.messages.stream(model=model, max_tokens=64, messages=messages) as events:
            message = events.get_final_message()
    else:
        message = client.messages.create(model=model, max_tokens=64, messages=messages)
    assert (message.usage.input_tokens, message.usage.cache_read_input_tokens) == (FRESH, READ)
    assert message.usage.output_tokens == OUTPUT
    request_id = message.model_extra["gateway"]["request_id"] if not stream else None
    if request_id is not None:
        assert record_usage(stack, request_id) == (FRESH + READ, READ, None, OUTPUT)
