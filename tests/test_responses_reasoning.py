"""Anthropic thinking kept across turns by a stateless Responses client (RESPONSES.md §7.3).

A thinking block comes back as a reasoning item (the text as its summary, the signature in a
`gw1:` token when `include` asks for it); the item sent back becomes the same thinking block,
first in its assistant message. Tokens that are not the gateway's are dropped and counted, and
never forwarded. The real openai SDK against the scripted Anthropic upstream, streamed and whole;
the placement rules also as unit tests of the translator.
"""

from __future__ import annotations

import base64
import json
import logging
from typing import Any

import orjson
import pytest

from gateway.translate import reasoning_token
from gateway.translate.reasoning_token import Thinking
from gateway.translate.responses_anthropic import translate_request as to_anthropic
from gateway.translate.responses_openai import translate_request as to_chat
from tests.responses_support import WEATHER_TOOL
from tests.scenarios import Answer, Tool, script_for
from tests.test_responses_client import create

THINKING = "The user wants Bern's weather.\nI should call get_weather. ✓"
SIGNATURE = "EqQBCkgIARABGAIiQJ3sig+/="  # opaque; base64 characters Anthropic uses
INCLUDE = ["reasoning.encrypted_content"]
STREAMS = pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])


def token_of(payload: Any) -> str:
    raw = payload if isinstance(payload, bytes) else orjson.dumps(payload)
    return "gw1:" + base64.urlsafe_b64encode(raw).decode().rstrip("=")


def reasoning(encrypted: str | None, text: str = THINKING) -> dict[str, Any]:
    item: dict[str, Any] = {
        "type": "reasoning",
        "id": "rs_1",
        "summary": [{"type": "summary_text", "text": text}],
    }
    if encrypted is not None:
        item["encrypted_content"] = encrypted
    return item


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


def assistant(text: str) -> dict[str, Any]:
    return {
        "type": "message",
        "role": "assistant",
        "content": [{"type": "output_text", "text": text}],
    }


def call(call_id: str) -> dict[str, Any]:
    return {"type": "function_call", "call_id": call_id, "name": "get_weather", "arguments": "{}"}


def output(call_id: str) -> dict[str, Any]:
    return {"type": "function_call_output", "call_id": call_id, "output": "Rain"}


def thinking(signature: str = SIGNATURE, text: str = THINKING) -> dict[str, Any]:
    return {"type": "thinking", "thinking": text, "signature": signature}


def assert_anthropic_rules(messages: list[dict[str, Any]]) -> None:
    """Roles alternate from user; thinking leads its assistant message; tool results lead theirs."""
    assert [m["role"] for m in messages] == ["user", "assistant"] * (len(messages) // 2) + [
        "user"
    ] * (len(messages) % 2)
    for message in messages:
        kinds = [block["type"] for block in message["content"]]
        if message["role"] == "assistant":
            n = sum(k in ("thinking", "redacted_thinking") for k in kinds)
            assert all(k in ("thinking", "redacted_thinking") for k in kinds[:n])
            assert n < len(kinds), "an assistant message of thinking alone"
        else:
            assert "thinking" not in kinds and "redacted_thinking" not in kinds
            n = sum(k == "tool_result" for k in kinds)
            assert kinds[:n] == ["tool_result"] * n


# --- the token ---------------------------------------------------------------------------------


def test_the_token_carries_the_signature_and_nothing_else():
    token = reasoning_token.encode(Thinking(signature=SIGNATURE))
    assert token == token_of({"p": "anthropic", "sig": SIGNATURE})
    assert "=" not in token and "+" not in token and "/" not in token
    assert reasoning_token.decode(token) == Thinking(signature=SIGNATURE)
    redacted = reasoning_token.encode(Thinking(redacted="opaque-data"))
    assert redacted == token_of({"p": "anthropic", "redacted": "opaque-data"})
    assert reasoning_token.decode(redacted) == Thinking(redacted="opaque-data")


FOREIGN = {
    "openai": "gAAAAABpPDIVYBwu2ljdVyeU-6Xu1R6056Ogp5vu5omQhuke_vFFLEfQzzhhTQ3W5fqw0K",
    "empty": "",
    "prefix-only": "gw1:",
    "not-base64": "gw1:***",
    "padded-odd": "gw1:" + "a" * 5,
    "other-version": "gw2:" + token_of({"p": "anthropic", "sig": "s"})[4:],
    "not-json": token_of(b"sig=s"),
    "not-an-object": token_of(["anthropic", "s"]),
    "other-provider": token_of({"p": "openai", "sig": "s"}),
    "sig-not-a-string": token_of({"p": "anthropic", "sig": 7}),
    "sig-empty": token_of({"p": "anthropic", "sig": ""}),
    "both": token_of({"p": "anthropic", "sig": "s", "redacted": "d"}),
    "extra-key": token_of({"p": "anthropic", "sig": "s", "thinking": "smuggled"}),
    "no-provider": token_of({"sig": "s"}),
}


@pytest.mark.parametrize("token", FOREIGN.values(), ids=FOREIGN.keys())
def test_anything_but_an_exact_token_is_foreign(token):
    assert reasoning_token.decode(token) is None


def test_a_non_string_is_foreign():
    assert reasoning_token.decode(None) is None
    assert reasoning_token.decode({"p": "anthropic", "sig": "s"}) is None


# --- placement: thinking first in its assistant message ----------------------------------------


def translated(items: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], dict[str, int]]:
    out = to_anthropic({"model": "m", "input": items}, "claude-x")
    assert_anthropic_rules(out.body["messages"])
    return out.body["messages"], dict(out.dropped.items)


GW = reasoning_token.encode(Thinking(signature=SIGNATURE))


def test_thinking_leads_the_assistant_message_of_its_run():
    messages, dropped = translated(
        [user("hi"), reasoning(GW), assistant("On it."), call("c1"), output("c1")]
    )
    assert [b["type"] for b in messages[1]["content"]] == ["thinking", "text", "tool_use"]
    assert messages[1]["content"][0] == thinking()
    assert dropped == {}


def test_each_turn_gets_its_own_thinking():
    gw2 = reasoning_token.encode(Thinking(signature="sig-2"))
    redacted = reasoning_token.encode(Thinking(redacted="opaque"))
    messages, dropped = translated(
        [
            {"role": "developer", "content": "Be brief."},
            user("hi"),
            reasoning(GW),
            call("c1"),
            output("c1"),
            reasoning(gw2, text="Second."),
            reasoning(redacted, text=""),
            call("c2"),
            output("c2"),
            user("thanks"),
            reasoning(None),  # OpenAI's reasoning, no token
            assistant("Bye."),
        ]
    )
    assert [m["role"] for m in messages] == [
        "user",
        "assistant",
        "user",
        "assistant",
        "user",
        "assistant",
    ]
    assert messages[1]["content"][0] == thinking()
    assert messages[3]["content"][:2] == [
        thinking("sig-2", "Second."),
        {"type": "redacted_thinking", "data": "opaque"},
    ]
    assert [b["type"] for b in messages[5]["content"]] == ["text"]
    assert dropped == {"reasoning": 1}


def test_reasoning_after_text_in_the_same_run_still_goes_first():
    messages, _ = translated([user("hi"), assistant("Let me see."), reasoning(GW), call("c1")])
    assert [b["type"] for b in messages[1]["content"]] == ["thinking", "text", "tool_use"]


def test_system_items_and_empty_messages_do_not_split_a_run():
    messages, dropped = translated(
        [
            user("hi"),
            reasoning(GW),
            {"role": "system", "content": "Note."},
            user(""),  # sends nothing: the core skips it
            assistant("Hello."),
        ]
    )
    assert [b["type"] for b in messages[1]["content"]] == ["thinking", "text"]
    assert dropped == {}


def test_reasoning_with_nothing_to_lead_is_dropped_and_counted():
    messages, dropped = translated([user("hi"), reasoning(GW), user("again"), reasoning(GW)])
    assert [m["role"] for m in messages] == ["user"]
    assert dropped == {"reasoning": 2}


def test_to_chat_every_reasoning_item_is_dropped_and_counted():
    items = [user("hi"), reasoning(GW), assistant("Hello."), user("more")]
    out = to_chat({"model": "m", "input": items}, "gpt-x")
    assert SIGNATURE not in json.dumps(out.body) and THINKING not in json.dumps(out.body)
    assert dict(out.dropped.items) == {"reasoning": 1}


# --- through the gateway, with the openai SDK -------------------------------------------------


def anthropic_model(upstream, unique_model, answer: Answer, stream: bool) -> str:
    model = unique_model("an")
    upstream.script(model, script_for("anthropic", answer, model, stream))
    return model


@STREAMS
@pytest.mark.parametrize("include", [True, False], ids=["include", "no-include"])
def test_thinking_comes_back_as_a_reasoning_item(stack, upstream, unique_model, stream, include):
    answer = Answer(text="Sunny.", thinking=THINKING, signature=SIGNATURE)
    model = anthropic_model(upstream, unique_model, answer, stream)

    response = create(stack, model, stream, **({"include": INCLUDE} if include else {}))

    assert response.status == "completed"
    assert [item.type for item in response.output] == ["reasoning", "message"]
    item = response.output[0]
    assert item.id.startswith("rs_")
    assert [(part.type, part.text) for part in item.summary] == [("summary_text", THINKING)]
    if include:
        assert item.encrypted_content == token_of({"p": "anthropic", "sig": SIGNATURE})
    else:
        assert item.encrypted_content is None
    assert response.output_text == "Sunny."


@STREAMS
def test_the_reasoning_item_sent_back_is_the_same_thinking_block(
    stack, upstream, unique_model, caplog, stream
):
    caplog.set_level(logging.DEBUG)
    first = Answer(
        thinking=THINKING,
        signature=SIGNATURE,
        tools=[Tool("toolu_up_0", "get_weather", '{"city":"Bern"}')],
    )
    model = anthropic_model(upstream, unique_model, first, stream)
    question = {"role": "user", "content": "Weather in Bern?"}
    turn1 = create(stack, model, stream, input=[question], tools=[WEATHER_TOOL], include=INCLUDE)
    assert [item.type for item in turn1.output] == ["reasoning", "function_call"]

    upstream.script(model, script_for("anthropic", Answer(text="Rain in Bern."), model, stream))
    history = [item.model_dump(exclude_none=True) for item in turn1.output]
    result = {"type": "function_call_output", "call_id": "toolu_up_0", "output": "Rain"}
    turn2 = create(
        stack,
        model,
        stream,
        input=[question, *history, result],
        tools=[WEATHER_TOOL],
        include=INCLUDE,
    )

    assert turn2.output_text == "Rain in Bern."
    assert "dropped" not in turn2.model_extra["gateway"]
    messages = upstream.last(model).json["messages"]
    assert_anthropic_rules(messages)
    assert [m["role"] for m in messages] == ["user", "assistant", "user"]
    assert messages[1]["content"] == [
        thinking(),
        {"type": "tool_use", "id": "toolu_up_0", "name": "get_weather", "input": {"city": "Bern"}},
    ]
    assert messages[2]["content"][0]["type"] == "tool_result"
    assert THINKING not in caplog.text and SIGNATURE not in caplog.text


@STREAMS
@pytest.mark.parametrize(
    "token",
    [FOREIGN["openai"], FOREIGN["not-json"], FOREIGN["extra-key"], FOREIGN["other-provider"]],
    ids=["openai", "malformed-gw1", "gw1-extra-key", "gw1-other-provider"],
)
def test_a_foreign_token_is_dropped_counted_and_never_forwarded(
    stack, upstream, unique_model, stream, token
):
    model = anthropic_model(upstream, unique_model, Answer(text="Hello."), stream)
    items = [user("hi"), reasoning(token, text="REASONING-3c1d"), assistant("Hi."), user("more")]

    response = create(stack, model, stream, input=items)

    assert response.model_extra["gateway"]["dropped"]["input_items"] == {"reasoning": 1}
    sent = upstream.last(model)
    assert token.encode() not in sent.body and b"REASONING-3c1d" not in sent.body
    assert b'"thinking"' not in sent.body
    assert_anthropic_rules(sent.json["messages"])


@STREAMS
def test_a_gateway_token_is_dropped_on_a_chat_upstream(stack, upstream, unique_model, stream):
    model = unique_model("oa")
    upstream.script(model, script_for("openai", Answer(text="Hello."), model, stream))
    items = [user("hi"), reasoning(GW), assistant("Hi."), user("more")]

    response = create(stack, model, stream, input=items)

    assert response.model_extra["gateway"]["dropped"]["input_items"] == {"reasoning": 1}
    sent = upstream.last(model).body
    assert SIGNATURE.encode() not in sent and GW.encode() not in sent
