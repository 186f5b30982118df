"""Conformance matrix, non-streaming: every client format x upstream wire pair (issue 2).

OpenAI client -> {OpenAI, Anthropic} upstream, Anthropic client -> {OpenAI, Anthropic} upstream,
through the real SDKs: text, one and two tool calls, every stop-reason table row, cut tool calls
under both policies, and an upstream body that breaks off.
"""

from __future__ import annotations

import anthropic
import openai
import orjson
import pytest

from tests.scenarios import Answer, anthropic_body, openai_body
from tests.test_matrix_support import (
    CUT_CASES,
    CUT_IDS,
    PAIR_IDS,
    PAIRS,
    ROW_CASES,
    ROW_IDS,
    TEXT,
    drive,
    one_tool,
    run_cut,
    run_row,
    run_text,
    run_tools,
    two_tools,
)
from tests.upstream import Script

STREAM = False


@pytest.mark.parametrize(("client", "wire"), PAIRS, ids=PAIR_IDS)
def test_text(stack, upstream, unique_model, client, wire):
    seen = run_text(stack, upstream, unique_model, client, wire, STREAM)
    if client == wire == "anthropic":
        # same-format: fields of the upstream body the gateway does not know are kept
        assert seen.extra["unknown_future_field"] == {"kept": True}
    if client == wire == "openai":
        # same-format: the upstream's own body, its id and fingerprint included
        assert seen.obj.id == "chatcmpl-up1"
        assert seen.obj.system_fingerprint == "fp_unknown_field_kept"


@pytest.mark.parametrize(("client", "wire"), PAIRS, ids=PAIR_IDS)
def test_one_tool_call(stack, upstream, unique_model, client, wire):
    run_tools(stack, upstream, unique_model, client, wire, STREAM, one_tool(wire))


@pytest.mark.parametrize(("client", "wire"), PAIRS, ids=PAIR_IDS)
def test_two_parallel_tool_calls(stack, upstream, unique_model, client, wire):
    run_tools(
        stack, upstream, unique_model, client, wire, STREAM, two_tools(wire), text="Checking."
    )


@pytest.mark.parametrize(("client", "row"), ROW_CASES, ids=ROW_IDS)
def test_stop_reason_row(stack, upstream, unique_model, client, row):
    run_row(stack, upstream, unique_model, client, row, STREAM)


@pytest.mark.parametrize(("client", "wire", "policy", "both"), CUT_CASES, ids=CUT_IDS)
def test_cut_tool_call(stack, upstream, unique_model, client, wire, policy, both):
    run_cut(stack, upstream, unique_model, client, wire, policy, both, STREAM)


@pytest.mark.parametrize(("client", "wire"), PAIRS, ids=PAIR_IDS)
def test_upstream_body_breaks_off(stack, upstream, unique_model, client, wire):
    """The upstream drops the connection half-way through a whole body: the client gets an
    error in its own format with a 5xx status, never a half answer or a bare 500."""
    answer = Answer(text=TEXT)

    def script(model: str) -> Script:
        render = openai_body if wire == "openai" else anthropic_body
        body = orjson.dumps(render(answer, model))
        half = len(body) // 2
        return Script(
            chunks=[body[:half], body[half:]],
            drop_after=1,
            headers={"content-type": "application/json"},
        )

    seen = drive(stack, upstream, unique_model, client, wire, answer, stream=STREAM, script=script)
    err = seen.error
    if client == "openai":
        assert isinstance(err, openai.APIStatusError), err
        assert err.status_code in (502, 504)
        assert isinstance(err.body, dict) and err.body.get("message")
    else:
        assert isinstance(err, anthropic.APIStatusError), err
        assert err.status_code in (502, 504)
        body = err.body
        assert isinstance(body, dict) and body["type"] == "error" and body["error"]["message"]
    assert "Traceback" not in str(err.body)
