"""`POST /v1/messages/count_tokens` through the real Anthropic SDK: answered by an Anthropic
upstream's own endpoint (the client's body, with the route's model name), estimated with the
o200k_base encoding for an upstream that offers no count (an OpenAI-wire model, the mock), and
marked as such; audited as a `count_tokens` exchange with the count as its input tokens and no
stop reason."""

from __future__ import annotations

import orjson
import pytest

from gateway.audit.record import AuditRecord
from gateway.audit.report import summarize
from gateway.token_estimate import PER_IMAGE, estimate_sync
from tests.access_util import audit_rows
from tests.conftest import UPSTREAM_ANTHROPIC_KEY, anthropic_client
from tests.test_endpoints import lower, request
from tests.upstream import Script

MESSAGES = [{"role": "user", "content": "How many tokens is this sentence, roughly?"}]


def counted(n: int) -> Script:
    return Script(body=orjson.dumps({"input_tokens": n}))


def test_anthropic_upstream_counts_with_its_own_endpoint(stack, upstream, unique_model):
    model = unique_model("an")
    upstream.script(model, counted(4242))
    client = anthropic_client(stack)
    raw = client.messages.with_raw_response.count_tokens(
        model=model, messages=MESSAGES, system="be brief"
    )
    answer = raw.parse()
    assert answer.input_tokens == 4242
    body = orjson.loads(raw.http_response.content)
    assert body["gateway"]["estimated"] is False
    assert body["gateway"]["provider"] == "anthropic"
    got = upstream.last(model)
    assert got.path == "/v1/messages/count_tokens"
    assert got.json == {"model": model, "messages": MESSAGES, "system": "be brief"}
    assert lower(got)["x-api-key"] == UPSTREAM_ANTHROPIC_KEY
    (row,) = audit_rows(stack, "withhold", model)
    assert row["operation"] == "count_tokens"
    assert row["input_tokens"] == 4242
    assert row["stop_reason"] is None and row["truncated"] == 0
    assert row["http_status"] == 200


def test_openai_wire_model_is_estimated_and_says_so(stack, upstream, unique_model):
    model = unique_model("oa")
    upstream.script(model, Script(status=500, body=b"{}"))  # would be recorded if asked
    client = anthropic_client(stack)
    raw = client.messages.with_raw_response.count_tokens(model=model, messages=MESSAGES)
    body = orjson.loads(raw.http_response.content)
    expected = estimate_sync({"model": model, "messages": MESSAGES})
    assert body["input_tokens"] == expected
    assert body["gateway"] == {
        "provider": "openai",
        "request_id": raw.http_response.headers["x-request-id"],
        "estimated": True,
        "tokenizer": "o200k_base",
    }
    assert upstream.received[model] == []
    (row,) = audit_rows(stack, "withhold", model)
    assert row["operation"] == "count_tokens" and row["input_tokens"] == expected


def test_estimate_grows_with_the_text_and_counts_tools_and_images():
    small = estimate_sync({"messages": MESSAGES})
    longer = estimate_sync({"messages": [{"role": "user", "content": "word " * 1000}]})
    assert 8 < small < 30
    assert 990 < longer < 1100  # one token per repeated word
    tools = [{"name": "get_weather", "input_schema": {"type": "object"}}]
    assert estimate_sync({"messages": MESSAGES, "tools": tools}) > small
    image = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "x"}}
    with_image = [{"role": "user", "content": [{"type": "text", "text": "hi"}, image]}]
    text_only = [{"role": "user", "content": [{"type": "text", "text": "hi"}]}]
    assert (
        estimate_sync({"messages": with_image}) - estimate_sync({"messages": text_only})
        == PER_IMAGE
    )


def test_estimate_takes_a_history_longer_than_one_tokenizer_call():
    body = {"messages": [{"role": "user", "content": "a " * 300_000}]}
    assert estimate_sync(body) > 250_000


def test_mock_provider_is_estimated(stack):
    client = anthropic_client(stack)
    raw = client.messages.with_raw_response.count_tokens(model="mock-hello", messages=MESSAGES)
    body = orjson.loads(raw.http_response.content)
    assert body["gateway"]["estimated"] is True and body["input_tokens"] > 0


def test_upstream_error_reaches_the_client_in_anthropic_format(stack, upstream, unique_model):
    model = unique_model("an")
    error = {"type": "error", "error": {"type": "invalid_request_error", "message": "bad"}}
    upstream.script(model, Script(status=400, body=orjson.dumps(error)))
    client = anthropic_client(stack)
    with pytest.raises(Exception) as caught:
        client.messages.count_tokens(model=model, messages=MESSAGES)
    assert getattr(caught.value, "status_code", None) == 400
    (row,) = audit_rows(stack, "withhold", model)
    assert row["operation"] == "count_tokens" and row["http_status"] == 400


def test_body_without_messages_is_refused(stack):
    status, _, body = request(
        stack.urls["withhold"], "POST", "/v1/messages/count_tokens", {"model": "an-x"}
    )
    assert status == 400
    error = orjson.loads(body)
    assert error["type"] == "error" and error["error"]["type"] == "invalid_request_error"
    assert "messages" in error["error"]["message"]


def test_unroutable_model_is_404_in_anthropic_format(stack):
    status, _, body = request(
        stack.urls["withhold"],
        "POST",
        "/v1/messages/count_tokens",
        {"model": "nowhere-x", "messages": MESSAGES},
    )
    assert status == 404
    assert orjson.loads(body)["type"] == "error"


def test_counts_and_embeddings_stay_out_of_the_answer_figures():
    """A token count has no stop reason and is never cut: `gateway audit` counts it apart
    (`other_operations`), so it dilutes no truncation rate; its cost still adds up."""
    answer = AuditRecord("a", 1.0, "openai", False, provider="p", stop_reason="length")
    answer.truncated = True
    count = AuditRecord("b", 2.0, "anthropic", False, provider="p", operation="count_tokens")
    embed = AuditRecord("c", 3.0, "openai", False, provider="p", operation="embed")
    embed.cost_usd = 0.5
    (summary,) = summarize([answer, count, embed], "provider")
    assert (summary.requests, summary.truncated_rate) == (1, 1.0)
    assert summary.stop_reasons["none"] == 0
    assert summary.other_operations == 2
    assert summary.cost_usd == 0.5
