"""The runaway signal through the gateway: flagged in the record and /metrics, or rejected."""

from __future__ import annotations

import sqlite3
import time

import anthropic
import openai
import pytest

from tests.conftest import anthropic_client, openai_client
from tests.scenarios import Answer, script_for
from tests.test_agent_guard import READ, anthropic_loop, openai_loop


def record_by_id(db, request_id, timeout=5.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with sqlite3.connect(db) as conn:
            row = conn.execute(
                "select runaway_streak, error_class, http_status from audit_records where id = ?",
                (request_id,),
            ).fetchone()
        if row is not None:
            return row
        time.sleep(0.05)
    raise AssertionError(f"no audit record {request_id}")


@pytest.mark.parametrize(("count", "flagged"), [(3, False), (4, True)])
def test_openai_conversation_flagged_at_four_identical_calls(
    stack, upstream, unique_model, count, flagged
):
    model = unique_model("oa")
    upstream.script(model, script_for("openai", Answer(text="ok"), model, stream=False))
    body = openai_loop([READ] * count)
    reply = openai_client(stack).chat.completions.create(model=model, messages=body["messages"])
    request_id = reply.model_extra["gateway"]["request_id"]
    streak, error_class, status = record_by_id(stack.audit_db(), request_id)
    assert streak == (4 if flagged else None)
    assert (error_class, status) == (None, 200)


@pytest.mark.parametrize(("count", "flagged"), [(3, False), (4, True)])
def test_anthropic_conversation_flagged_at_four_identical_calls(
    stack, upstream, unique_model, count, flagged
):
    model = unique_model("an")
    upstream.script(model, script_for("anthropic", Answer(text="ok"), model, stream=False))
    body = anthropic_loop([READ] * count)
    message = anthropic_client(stack).messages.create(
        model=model, max_tokens=10, messages=body["messages"]
    )
    streak, _, _ = record_by_id(stack.audit_db(), message.model_extra["gateway"]["request_id"])
    assert streak == (4 if flagged else None)


def test_reject_answers_openai_clients_in_their_error_format(stack, upstream, unique_model):
    model = unique_model("oa")
    upstream.script(model, script_for("openai", Answer(text="ok"), model, stream=False))
    client = openai_client(stack, "reject")
    with pytest.raises(openai.BadRequestError) as caught:
        client.chat.completions.create(model=model, messages=openai_loop([READ] * 4)["messages"])
    error = caught.value.body
    assert error["code"] == "runaway_suspected"
    assert "4 identical calls" in error["message"] and "read_file" in error["message"]
    assert upstream.received[model] == []  # never sent upstream


def test_reject_answers_anthropic_clients_in_their_error_format(stack, upstream, unique_model):
    model = unique_model("an")
    upstream.script(model, script_for("anthropic", Answer(text="ok"), model, stream=True))
    client = anthropic_client(stack, "reject")
    with pytest.raises(anthropic.BadRequestError) as caught:
        client.messages.create(
            model=model,
            max_tokens=10,
            stream=True,
            messages=anthropic_loop([READ] * 5)["messages"],
        )
    body = caught.value.body
    assert body["type"] == "error"
    assert body["error"]["type"] == "invalid_request_error"
    assert "5 identical calls" in body["error"]["message"]
    assert upstream.received[model] == []


def test_reject_lets_three_identical_calls_through(stack, upstream, unique_model):
    model = unique_model("oa")
    upstream.script(model, script_for("openai", Answer(text="ok"), model, stream=False))
    reply = openai_client(stack, "reject").chat.completions.create(
        model=model, messages=openai_loop([READ] * 3)["messages"]
    )
    assert reply.choices[0].message.content == "ok"
