"""Gateway keys (`[[keys]]`), through the real openai and anthropic SDKs and raw HTTP.

With keys configured: a model endpoint answers a request without a configured key with 401 in the
client's own error JSON, a key's routes bound what it may call (403), its request rate and token
budget are counted (429 with retry-after); every refusal is one audit record and nothing goes
upstream; the client's credential headers never reach the upstream; /metrics needs the admin key;
/healthz and HEAD / stay open; no key is ever logged or echoed.
"""

from __future__ import annotations

import logging
from typing import Any

import anthropic
import openai
import pytest

from tests.access_util import (
    audit_rows,
    key_table,
    labels,
    metric_samples,
    new_key,
    post,
    request,
    request_id,
    serve_keyed,
)
from tests.conftest import Stack
from tests.scenarios import Answer, script_for
from tests.upstream import Script

TEAM = new_key("team")
NARROW = new_key("narrow")
LIMITED = new_key("limited")
BUDGET = new_key("budget")
STREAMED = new_key("streamed")
UNCOUNTED = new_key("uncounted")
ADMIN = new_key("admin")
WRONG = new_key("wrong")
ALL_KEYS = (TEAM, NARROW, LIMITED, BUDGET, STREAMED, UNCOUNTED, ADMIN, WRONG)
WIRE = {"oa": "openai", "an": "anthropic", "open": "openai", "open-an": "anthropic"}


@pytest.fixture(scope="module")
def keyed(stack: Stack) -> tuple[str, str]:
    """One gateway with four keys and an admin key: (its name, its URL)."""
    return serve_keyed(
        stack,
        "keys",
        keys=[
            key_table("team", TEAM),
            key_table("narrow", NARROW, routes=["an-*"]),
            key_table("limited", LIMITED, requests_per_window=2, window="1h"),
            key_table("budget", BUDGET, tokens_per_window=40, window="1h"),
            key_table("streamed", STREAMED, tokens_per_window=40, window="1h"),
            key_table("uncounted", UNCOUNTED, tokens_per_window=40, window="1h"),
        ],
        admin={"sha256": key_table("admin", ADMIN)["sha256"]},
    )


def scripted(upstream: Any, unique_model: Any, prefix: str, stream: bool = False) -> str:
    model = unique_model(prefix)
    upstream.script(model, script_for(WIRE[prefix], Answer(text="hello"), model, stream))
    return model


def oa(url: str, key: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=url + "/v1", api_key=key, max_retries=0)


def an(url: str, key: str) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=url, api_key=key, max_retries=0)


def chat(url: str, key: str, model: str) -> Any:
    return oa(url, key).chat.completions.create(
        model=model, messages=[{"role": "user", "content": "hi"}]
    )


def message(url: str, key: str, model: str) -> Any:
    return an(url, key).messages.create(
        model=model, max_tokens=64, messages=[{"role": "user", "content": "hi"}]
    )


# --- 401 ----------------------------------------------------------------------------------------


def test_a_wrong_key_is_401_in_each_clients_format(stack, upstream, unique_model, keyed):
    name, url = keyed
    model = scripted(upstream, unique_model, "oa")

    with pytest.raises(openai.AuthenticationError) as chat_err:
        chat(url, WRONG, model)
    with pytest.raises(openai.AuthenticationError) as responses_err:
        oa(url, WRONG).responses.create(model=model, input="hi")
    with pytest.raises(anthropic.AuthenticationError) as messages_err:
        message(url, WRONG, model)

    for err in (chat_err.value, responses_err.value):
        assert err.status_code == 401
        assert err.body["type"] == "invalid_request_error"
        assert err.body["code"] == "invalid_api_key"
        assert WRONG not in err.body["message"]
    assert messages_err.value.status_code == 401
    body = messages_err.value.body
    assert body["type"] == "error"
    assert body["error"]["type"] == "authentication_error"
    assert WRONG not in str(body)
    assert upstream.received[model] == []  # nothing went upstream
    ids = [request_id(e.value) for e in (chat_err, responses_err, messages_err)]
    rows = audit_rows(stack, name, ids=ids)
    assert [(r["http_status"], r["key_name"], r["error_class"]) for r in rows] == [
        (401, None, "Unauthorized")
    ] * 3


@pytest.mark.parametrize("client", ["openai", "anthropic", "responses"])
def test_no_key_at_all_is_401_naming_where_to_send_one(
    stack, upstream, unique_model, keyed, client
):
    name, url = keyed
    model = scripted(upstream, unique_model, "oa")

    reply = post(url, client, model)

    assert reply.status == 401
    if client == "anthropic":
        assert reply.json["error"]["type"] == "authentication_error"
        assert "Authorization: Bearer" in reply.json["error"]["message"]
    else:
        assert reply.json["error"]["code"] == "invalid_api_key"
        assert "Authorization: Bearer" in reply.json["error"]["message"]
    assert upstream.received[model] == []
    (row,) = audit_rows(stack, name, ids=[request_id(reply)])
    assert (row["http_status"], row["key_name"]) == (401, None)


# --- served, and never forwarded ----------------------------------------------------------------


def test_a_valid_key_in_any_header_is_served_and_never_forwarded(
    stack, upstream, unique_model, keyed
):
    """The `open*` providers have no key of their own: without gateway keys the client's
    credential would go upstream; with them it never does, whichever header carried it."""
    name, url = keyed
    chat_model = scripted(upstream, unique_model, "open")
    messages_model = scripted(upstream, unique_model, "open-an")
    azure_model = scripted(upstream, unique_model, "open")

    assert chat(url, TEAM, chat_model).choices[0].message.content == "hello"  # Bearer
    assert message(url, TEAM, messages_model).content[0].text == "hello"  # x-api-key
    reply = post(url, "openai", azure_model, {"api-key": TEAM})  # Azure clients
    assert reply.status == 200, reply.body

    for model in (chat_model, messages_model, azure_model):
        received = upstream.last(model).headers
        sent = {k.lower(): v for k, v in received.items()}
        assert not {"authorization", "x-api-key", "api-key"} & set(sent), sent
        assert all(TEAM not in value for value in sent.values())
        (row,) = audit_rows(stack, name, model)
        assert (row["http_status"], row["key_name"]) == (200, "team")


def test_an_anthropic_sdk_sending_bearer_is_served(stack, upstream, unique_model, keyed):
    _, url = keyed
    model = scripted(upstream, unique_model, "an")
    client = anthropic.Anthropic(base_url=url, auth_token=TEAM, max_retries=0)

    reply = client.messages.create(
        model=model, max_tokens=64, messages=[{"role": "user", "content": "hi"}]
    )

    assert reply.content[0].text == "hello"


# --- 403 ----------------------------------------------------------------------------------------


def test_a_route_the_key_may_not_use_is_403(stack, upstream, unique_model, keyed):
    name, url = keyed
    allowed = scripted(upstream, unique_model, "an")
    denied = scripted(upstream, unique_model, "oa")

    assert message(url, NARROW, allowed).content[0].text == "hello"
    with pytest.raises(openai.PermissionDeniedError) as chat_err:
        chat(url, NARROW, denied)
    with pytest.raises(anthropic.PermissionDeniedError) as messages_err:
        message(url, NARROW, denied)

    assert chat_err.value.body["type"] == "permission_error"
    assert "narrow" in chat_err.value.body["message"]
    assert messages_err.value.body["error"]["type"] == "permission_error"
    assert upstream.received[denied] == []
    rows = audit_rows(stack, name, ids=[request_id(chat_err.value), request_id(messages_err.value)])
    assert [(r["http_status"], r["key_name"], r["model"]) for r in rows] == [
        (403, "narrow", denied)
    ] * 2


# --- 429 ----------------------------------------------------------------------------------------


def test_past_its_request_rate_a_key_gets_429_with_retry_after(
    stack, upstream, unique_model, keyed
):
    name, url = keyed
    model = scripted(upstream, unique_model, "oa")

    chat(url, LIMITED, model)
    chat(url, LIMITED, model)
    with pytest.raises(openai.RateLimitError) as chat_err:
        chat(url, LIMITED, model)
    with pytest.raises(anthropic.RateLimitError) as messages_err:
        message(url, LIMITED, model)

    err = chat_err.value
    assert err.body["type"] == "requests"
    assert err.body["code"] == "rate_limit_exceeded"
    assert 1 <= int(err.response.headers["retry-after"]) <= 3600
    assert messages_err.value.body["error"]["type"] == "rate_limit_error"
    assert int(messages_err.value.response.headers["retry-after"]) >= 1
    assert len(upstream.received[model]) == 2  # the refused ones never went upstream
    served = audit_rows(stack, name, model)
    refused = audit_rows(stack, name, ids=[request_id(err), request_id(messages_err.value)])
    assert [(r["http_status"], r["key_name"]) for r in served] == [(200, "limited")] * 2
    assert [(r["http_status"], r["key_name"], r["error_class"]) for r in refused] == [
        (429, "limited", "RateLimited")
    ] * 2


def test_a_key_over_its_token_budget_gets_429(stack, upstream, unique_model, keyed):
    """The budget is 40 tokens an hour; an exchange uses 12 + 34 = 46: served (the budget was not
    used up yet), and every request after it is refused."""
    name, url = keyed
    model = scripted(upstream, unique_model, "oa")

    chat(url, BUDGET, model)
    with pytest.raises(openai.RateLimitError) as chat_err:
        chat(url, BUDGET, model)
    with pytest.raises(anthropic.RateLimitError) as messages_err:
        message(url, BUDGET, model)

    assert chat_err.value.body["type"] == "tokens"
    assert chat_err.value.body["code"] == "rate_limit_exceeded"
    assert "40 tokens" in chat_err.value.body["message"]
    assert int(chat_err.value.response.headers["retry-after"]) >= 1
    assert messages_err.value.body["error"]["type"] == "rate_limit_error"
    assert len(upstream.received[model]) == 1
    (served,) = audit_rows(stack, name, model)
    assert (served["input_tokens"], served["output_tokens"]) == (12, 34)
    refused = audit_rows(
        stack, name, ids=[request_id(chat_err.value), request_id(messages_err.value)]
    )
    assert [(r["http_status"], r["key_name"]) for r in refused] == [(429, "budget")] * 2

    samples = metric_samples(request(url, "GET", "/metrics", {"x-api-key": ADMIN}).body.decode())
    outcomes = samples["gateway_key_requests_total"]
    assert outcomes[labels(key="budget", outcome="served")] == 1
    assert outcomes[labels(key="budget", outcome="over_budget")] == 2
    tokens = samples["gateway_key_tokens_total"]
    assert tokens[labels(key="budget", direction="input")] == 12
    assert tokens[labels(key="budget", direction="output")] == 34


def streamed_chat(url: str, key: str, model: str, content: str = "hi") -> list[Any]:
    """A streamed chat completion as the openai SDK gives it, not asking for usage."""
    stream = oa(url, key).chat.completions.create(
        model=model, messages=[{"role": "user", "content": content}], stream=True
    )
    return list(stream)


def test_a_stream_that_did_not_ask_for_usage_still_counts_against_the_budget(
    stack, upstream, unique_model, keyed
):
    """An OpenAI client streaming without `stream_options.include_usage`, before an upstream
    that (as OpenAI does) streams usage only when asked: the gateway asks, so the budget counts
    the 12 + 34 tokens and the next request is refused; the client still gets no usage chunk."""
    name, url = keyed
    model = unique_model("oa")
    script = script_for("openai", Answer(text="hello"), model, True, usage_if_asked=True)
    upstream.script(model, script)

    chunks = streamed_chat(url, STREAMED, model)
    with pytest.raises(openai.RateLimitError) as err:
        streamed_chat(url, STREAMED, model)

    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == "hello"
    assert all(c.choices and c.usage is None for c in chunks)
    assert err.value.body["type"] == "tokens"
    assert len(upstream.received[model]) == 1
    assert upstream.last(model).json["stream_options"] == {"include_usage": True}
    (served,) = audit_rows(stack, name, model)
    assert (served["input_tokens"], served["output_tokens"]) == (12, 34)
    assert served["estimated_tokens"] is None


def test_an_upstream_that_sends_no_usage_is_counted_by_an_estimate(
    stack, upstream, unique_model, keyed
):
    """A compatible server that streams no usage even when asked: the record keeps its counts
    unknown and an estimate apart (about four characters a token), and the budget counts the
    estimate, so the key cannot stream on for free."""
    name, url = keyed
    model = unique_model("oa")
    chunks = [c for c in script_for("openai", Answer(text="hello"), model, True).chunks]
    upstream.script(model, Script(chunks=[c for c in chunks if b'"usage"' not in c]))

    streamed_chat(url, UNCOUNTED, model, content="x" * 200)  # over 40 tokens by the estimate
    with pytest.raises(openai.RateLimitError):
        streamed_chat(url, UNCOUNTED, model)

    (served,) = audit_rows(stack, name, model)
    assert served["input_tokens"] is None and served["output_tokens"] is None
    assert served["cost_usd"] is None
    sent = len(upstream.last(model).body)
    assert served["estimated_tokens"] == -(-sent // 4) + 2  # "hello": 5 characters
    samples = metric_samples(request(url, "GET", "/metrics", {"x-api-key": ADMIN}).body.decode())
    tokens = samples["gateway_key_tokens_total"]
    assert tokens[labels(key="uncounted", direction="estimated")] == served["estimated_tokens"]
    assert labels(key="uncounted", direction="input") not in tokens


# --- the other endpoints ------------------------------------------------------------------------


def test_metrics_need_the_admin_key(upstream, unique_model, keyed):
    _, url = keyed
    model = scripted(upstream, unique_model, "oa")
    chat(url, TEAM, model)
    post(url, "openai", model, {"authorization": f"Bearer {WRONG}"})

    assert request(url, "GET", "/metrics").status == 401
    assert request(url, "GET", "/metrics", {"authorization": f"Bearer {TEAM}"}).status == 401
    reply = request(url, "GET", "/metrics", {"authorization": f"Bearer {ADMIN}"})

    assert reply.status == 200
    outcomes = metric_samples(reply.body.decode())["gateway_key_requests_total"]
    assert outcomes[labels(key="team", outcome="served")] >= 1
    assert outcomes[labels(key="-", outcome="unauthorized")] >= 1


def test_with_keys_and_no_admin_key_metrics_always_answer_401(stack):
    _, url = serve_keyed(stack, "noadmin", keys=[key_table("team", TEAM)])

    for headers in ({}, {"authorization": f"Bearer {TEAM}"}, {"x-api-key": ADMIN}):
        reply = request(url, "GET", "/metrics", headers)
        assert reply.status == 401
        assert "none is configured" in reply.json["error"]["message"]


def test_liveness_and_the_base_url_probe_stay_open(keyed):
    _, url = keyed

    assert request(url, "GET", "/healthz").status == 200
    assert request(url, "HEAD", "/").status == 200


def test_models_and_stored_responses_need_a_key(keyed):
    _, url = keyed

    with pytest.raises(openai.AuthenticationError):
        oa(url, WRONG).models.list()
    assert request(url, "GET", "/v1/models").status == 401
    assert (
        request(url, "GET", "/v1/models", {"anthropic-version": "2023-06-01"}).json["error"]["type"]
        == "authentication_error"
    )
    assert [m.id for m in oa(url, TEAM).models.list()]
    with pytest.raises(openai.AuthenticationError):
        oa(url, WRONG).responses.retrieve("resp_0123")
    with pytest.raises(openai.NotFoundError):  # with a key: the store's own answer
        oa(url, TEAM).responses.retrieve("resp_0123")
    assert request(url, "DELETE", "/v1/responses/resp_0123").status == 401


def test_no_key_is_ever_logged_or_echoed(stack, upstream, unique_model, keyed, caplog):
    _, url = keyed
    model = scripted(upstream, unique_model, "open", stream=True)
    caplog.set_level(logging.DEBUG)

    for stream in oa(url, TEAM).chat.completions.create(
        model=model, messages=[{"role": "user", "content": "hi"}], stream=True
    ):
        assert TEAM not in str(stream)
    replies = [
        post(url, "openai", model, {"authorization": f"Bearer {WRONG}"}),
        post(url, "anthropic", model, {"x-api-key": WRONG}),
        request(url, "GET", "/metrics", {"authorization": f"Bearer {WRONG}"}),
        request(url, "GET", "/v1/models", {"api-key": WRONG}),
    ]
    audit_rows(stack, keyed[0], ids=[request_id(reply) for reply in replies[:2]])

    for reply in replies:
        assert reply.status == 401
        assert WRONG.encode() not in reply.body
        assert all(WRONG not in value for value in reply.headers.values())
    assert caplog.records  # the exchanges were logged
    for record in caplog.records:
        text = record.getMessage() + repr(record.__dict__)
        for key in ALL_KEYS:
            assert key not in text, record.name
            assert key_table("", key)["sha256"] not in text, record.name


def test_stored_responses_belong_to_the_key_that_made_them_whatever_its_header(
    upstream, unique_model, keyed
):
    """Azure-style clients send their key as `api-key`: their stored answers are theirs, not
    shared with every other `api-key` client."""
    _, url = keyed
    model = scripted(upstream, unique_model, "oa")
    created = post(url, "responses", model, {"api-key": TEAM})
    assert created.status == 200, created.body
    path = f"/v1/responses/{created.json['id']}"

    assert request(url, "GET", path, {"api-key": TEAM}).status == 200
    assert request(url, "GET", path, {"api-key": NARROW}).status == 404
    assert request(url, "GET", path, {"authorization": f"Bearer {LIMITED}"}).status == 404
