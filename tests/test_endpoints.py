"""The non-chat endpoints, the base-URL probe, and what the upstream receives from the gateway.

Models list in both shapes, liveness, Claude Code's `HEAD /` and `?beta=true`, header
forwarding, the configured upstream key (never the client's), both Anthropic auth styles,
route renames and same-format forward compatibility.
"""

from __future__ import annotations

import http.client
from typing import Any
from urllib.parse import urlsplit

import anthropic
import orjson
import pytest

from tests.conftest import (
    UPSTREAM_ANTHROPIC_KEY,
    UPSTREAM_OPENAI_KEY,
    anthropic_client,
    openai_client,
)
from tests.scenarios import Answer, script_for
from tests.upstream import Received

USER = [{"role": "user", "content": "hi"}]
CLIENT_KEY = "sk-client-own-key-9999"


def request(
    base: str,
    method: str,
    path: str,
    body: Any = None,
    headers: dict[str, str] | None = None,
) -> tuple[int, dict[str, str], bytes]:
    url = urlsplit(base)
    conn = http.client.HTTPConnection(url.hostname, url.port, timeout=10)
    raw = body if body is None or isinstance(body, bytes) else orjson.dumps(body)
    sent = dict(headers or {})
    if raw is not None:
        sent.setdefault("content-type", "application/json")
    try:
        conn.request(method, path, body=raw, headers=sent)
        resp = conn.getresponse()
        data = resp.read()
        return resp.status, {k.lower(): v for k, v in resp.getheaders()}, data
    finally:
        conn.close()


def lower(received: Received) -> dict[str, str]:
    return {k.lower(): v for k, v in received.headers.items()}


# --- GET /v1/models -----------------------------------------------------------------------------


def test_models_openai_shape(stack):
    status, headers, body = request(stack.urls["withhold"], "GET", "/v1/models")
    assert status == 200
    assert headers["content-type"].startswith("application/json")
    data = orjson.loads(body)
    assert data["object"] == "list"
    ids = [m["id"] for m in data["data"]]
    assert "mock-text" in ids
    assert "mock-tool-cut" in ids
    assert "oa-renamed" in ids  # a literal route name
    assert not any("*" in i for i in ids)  # globs are not model names
    assert len(ids) == len(set(ids))
    for item in data["data"]:
        assert item["object"] == "model"
        assert isinstance(item["created"], int)
        assert isinstance(item["owned_by"], str)


def test_models_anthropic_shape_with_anthropic_version(stack):
    headers = {"anthropic-version": "2023-06-01"}
    status, _, body = request(stack.urls["withhold"], "GET", "/v1/models", headers=headers)
    assert status == 200
    data = orjson.loads(body)
    assert "object" not in data
    assert data["has_more"] is False
    ids = [m["id"] for m in data["data"]]
    assert "mock-text" in ids
    assert data["first_id"] == ids[0]
    assert data["last_id"] == ids[-1]
    for item in data["data"]:
        assert item["type"] == "model"
        assert isinstance(item["display_name"], str)
        assert isinstance(item["created_at"], str)


def test_models_through_openai_sdk(stack):
    ids = [m.id for m in openai_client(stack).models.list()]
    assert "mock-text" in ids
    assert "mock-thinking" in ids


def test_models_through_anthropic_sdk(stack):
    ids = [m.id for m in anthropic_client(stack).models.list()]
    assert "mock-text" in ids
    assert "mock-thinking" in ids


# --- liveness and the base-URL probe ------------------------------------------------------------


def test_healthz(stack):
    status, headers, body = request(stack.urls["withhold"], "GET", "/healthz")
    assert status == 200
    assert headers["content-type"].startswith("application/json")
    assert orjson.loads(body)["status"] == "ok"


@pytest.mark.parametrize("method", ["GET", "HEAD"])
def test_base_url_probe(stack, method):
    # Claude Code sends HEAD / on ANTHROPIC_BASE_URL before its first request.
    headers = {"anthropic-version": "2023-06-01", "x-api-key": CLIENT_KEY}
    status, _, body = request(stack.urls["withhold"], method, "/", headers=headers)
    assert status == 200
    if method == "HEAD":
        assert body == b""
    else:
        assert isinstance(orjson.loads(body), dict)


# --- /v1/messages?beta=true ---------------------------------------------------------------------


def test_messages_beta_query_works_like_messages(stack):
    body = {"model": "mock-text", "max_tokens": 64, "messages": USER}
    headers = {"anthropic-version": "2023-06-01", "x-api-key": CLIENT_KEY}
    base = stack.urls["withhold"]
    s1, _, plain = request(base, "POST", "/v1/messages", body, headers)
    s2, h2, beta = request(base, "POST", "/v1/messages?beta=true", body, headers)
    assert s1 == s2 == 200
    assert h2["content-type"].startswith("application/json")
    a, b = orjson.loads(plain), orjson.loads(beta)
    assert b["type"] == "message"
    assert b["content"] == a["content"]
    assert b["stop_reason"] == a["stop_reason"] == "end_turn"


def test_messages_beta_query_streaming_to_anthropic_upstream(stack, upstream, unique_model):
    model = unique_model("an")
    upstream.script(model, script_for("anthropic", Answer(text="beta ok"), model, stream=True))
    body = {"model": model, "max_tokens": 64, "messages": USER, "stream": True}
    headers = {"anthropic-version": "2023-06-01", "x-api-key": CLIENT_KEY}
    status, resp_headers, raw = request(
        stack.urls["withhold"], "POST", "/v1/messages?beta=true", body, headers
    )
    assert status == 200
    assert resp_headers["content-type"].startswith("text/event-stream")
    assert b"event: message_stop" in raw
    assert upstream.last(model).path == "/v1/messages"


def test_anthropic_sdk_beta_messages(stack):
    # The SDK's beta namespace posts to /v1/messages?beta=true.
    client = anthropic_client(stack)
    message = client.beta.messages.create(
        model="mock-text", max_tokens=64, messages=USER, betas=["some-beta-2025-01-01"]
    )
    assert message.stop_reason == "end_turn"
    assert message.content[0].type == "text"


# --- what the upstream receives -----------------------------------------------------------------


def test_anthropic_version_and_beta_forwarded_unchanged(stack, upstream, unique_model):
    model = unique_model("an")
    upstream.script(model, script_for("anthropic", Answer(text="ok"), model, stream=False))
    beta = "claude-code-20250219,interleaved-thinking-2025-05-14,fine-grained-tool-streaming"
    headers = {"anthropic-version": "2099-01-01", "anthropic-beta": beta, "x-api-key": CLIENT_KEY}
    body = {"model": model, "max_tokens": 64, "messages": USER}
    status, _, _ = request(stack.urls["withhold"], "POST", "/v1/messages", body, headers)
    assert status == 200
    seen = lower(upstream.last(model))
    assert seen["anthropic-version"] == "2099-01-01"
    assert seen["anthropic-beta"] == beta


def test_anthropic_sdk_beta_header_forwarded(stack, upstream, unique_model):
    model = unique_model("an")
    upstream.script(model, script_for("anthropic", Answer(text="ok"), model, stream=False))
    client = anthropic_client(stack)
    client.beta.messages.create(
        model=model, max_tokens=64, messages=USER, betas=["feature-a-2025", "feature-b-2025"]
    )
    seen = lower(upstream.last(model))
    assert seen["anthropic-beta"] == "feature-a-2025,feature-b-2025"
    assert seen["anthropic-version"] == client.default_headers["anthropic-version"]


@pytest.mark.parametrize(
    "auth",
    [{"x-api-key": CLIENT_KEY}, {"authorization": f"Bearer {CLIENT_KEY}"}],
    ids=["x-api-key", "bearer"],
)
@pytest.mark.parametrize("stream", [False, True])
def test_anthropic_upstream_gets_configured_key(stack, upstream, unique_model, auth, stream):
    model = unique_model("an")
    upstream.script(model, script_for("anthropic", Answer(text="ok"), model, stream=stream))
    headers = {"anthropic-version": "2023-06-01", **auth}
    body = {"model": model, "max_tokens": 64, "messages": USER, "stream": stream}
    status, _, _ = request(stack.urls["withhold"], "POST", "/v1/messages", body, headers)
    assert status == 200
    seen = lower(upstream.last(model))
    assert seen["x-api-key"] == UPSTREAM_ANTHROPIC_KEY
    assert "authorization" not in seen
    assert CLIENT_KEY not in str(seen)


@pytest.mark.parametrize("stream", [False, True])
def test_openai_upstream_gets_configured_key(stack, upstream, unique_model, stream):
    model = unique_model("oa")
    upstream.script(model, script_for("openai", Answer(text="ok"), model, stream=stream))
    headers = {"authorization": f"Bearer {CLIENT_KEY}"}
    body = {"model": model, "messages": USER, "stream": stream}
    status, _, _ = request(stack.urls["withhold"], "POST", "/v1/chat/completions", body, headers)
    assert status == 200
    seen = lower(upstream.last(model))
    assert seen["authorization"] == f"Bearer {UPSTREAM_OPENAI_KEY}"
    assert "x-api-key" not in seen
    assert CLIENT_KEY not in str(seen)


def test_cross_format_upstreams_get_configured_keys(stack, upstream, unique_model):
    # An Anthropic client reaching an OpenAI upstream, and the reverse.
    oa_model, an_model = unique_model("oa"), unique_model("an")
    upstream.script(oa_model, script_for("openai", Answer(text="ok"), oa_model, stream=False))
    upstream.script(an_model, script_for("anthropic", Answer(text="ok"), an_model, stream=False))
    an = anthropic.Anthropic(base_url=stack.urls["withhold"], api_key=CLIENT_KEY, max_retries=0)
    an.messages.create(model=oa_model, max_tokens=64, messages=USER)
    seen = lower(upstream.last(oa_model))
    assert seen["authorization"] == f"Bearer {UPSTREAM_OPENAI_KEY}"
    assert CLIENT_KEY not in str(seen)
    assert "anthropic-version" not in seen
    oa = openai_client(stack)
    oa.chat.completions.create(model=an_model, messages=USER)
    seen = lower(upstream.last(an_model))
    assert seen["x-api-key"] == UPSTREAM_ANTHROPIC_KEY
    assert seen["anthropic-version"]  # the provider supplies one when the client sent none
    assert "authorization" not in seen


@pytest.mark.parametrize("style", ["api_key", "auth_token"])
@pytest.mark.parametrize("stream", [False, True])
def test_anthropic_sdk_with_either_auth_style(stack, upstream, unique_model, style, stream):
    model = unique_model("an")
    upstream.script(model, script_for("anthropic", Answer(text="auth ok"), model, stream=stream))
    client = anthropic.Anthropic(
        base_url=stack.urls["withhold"], max_retries=0, **{style: CLIENT_KEY}
    )
    if stream:
        with client.messages.stream(model=model, max_tokens=64, messages=USER) as s:
            message = s.get_final_message()
    else:
        message = client.messages.create(model=model, max_tokens=64, messages=USER)
    assert message.content[0].text == "auth ok"
    assert lower(upstream.last(model))["x-api-key"] == UPSTREAM_ANTHROPIC_KEY


@pytest.mark.parametrize("style", ["api_key", "auth_token"])
def test_anthropic_sdk_either_auth_style_on_mock(stack, style):
    client = anthropic.Anthropic(
        base_url=stack.urls["withhold"], max_retries=0, **{style: CLIENT_KEY}
    )
    message = client.messages.create(model="mock-text", max_tokens=64, messages=USER)
    assert message.stop_reason == "end_turn"


# --- routes that rename, and forward compatibility ----------------------------------------------


@pytest.mark.parametrize("stream", [False, True])
def test_route_rename_changes_only_the_model(stack, upstream, stream):
    model = "oa-renamed-target"
    upstream.script(model, script_for("openai", Answer(text="renamed"), model, stream=stream))
    body: dict[str, Any] = {
        "model": "oa-renamed",
        "messages": [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": [{"type": "text", "text": "héllo ✓"}]},
        ],
        "temperature": 0.25,
        "max_completion_tokens": 77,
        "tools": [
            {
                "type": "function",
                "function": {"name": "f", "parameters": {"type": "object", "properties": {}}},
            }
        ],
        "stream": stream,
        "some_future_field": {"x": 1},
    }
    headers = {"authorization": f"Bearer {CLIENT_KEY}"}
    status, _, _ = request(stack.urls["withhold"], "POST", "/v1/chat/completions", body, headers)
    assert status == 200
    sent_up = upstream.last(model).json
    assert sent_up["model"] == "oa-renamed-target"
    # A stream also asks for its usage (gateway.translate.stream_usage): nothing else changes.
    usage = {"stream_options": {"include_usage": True}} if stream else {}
    assert {k: v for k, v in sent_up.items() if k != "model"} == {
        **{k: v for k, v in body.items() if k != "model"},
        **usage,
    }


def test_route_rename_through_sdk(stack, upstream):
    model = "oa-renamed-target"
    upstream.script(model, script_for("openai", Answer(text="renamed"), model, stream=False))
    completion = openai_client(stack).chat.completions.create(model="oa-renamed", messages=USER)
    assert completion.choices[0].message.content == "renamed"
    assert upstream.last(model).json["model"] == "oa-renamed-target"


@pytest.mark.parametrize("stream", [False, True])
def test_openai_passthrough_keeps_unknown_fields(stack, upstream, unique_model, stream):
    model = unique_model("oa")
    upstream.script(model, script_for("openai", Answer(text="ok"), model, stream=stream))
    body = {
        "model": model,
        "messages": [{"role": "user", "content": "hi", "future_message_field": [1, 2]}],
        "stream": stream,
        "some_future_field": {"x": 1},
        "service_tier": "flex",
    }
    status, _, _ = request(stack.urls["withhold"], "POST", "/v1/chat/completions", body)
    assert status == 200
    usage = {"stream_options": {"include_usage": True}} if stream else {}
    assert upstream.last(model).json == {**body, **usage}


@pytest.mark.parametrize("stream", [False, True])
def test_anthropic_passthrough_keeps_unknown_fields(stack, upstream, unique_model, stream):
    model = unique_model("an")
    upstream.script(model, script_for("anthropic", Answer(text="ok"), model, stream=stream))
    body = {
        "model": model,
        "max_tokens": 64,
        "system": [{"type": "text", "text": "sys", "cache_control": {"type": "ephemeral"}}],
        "messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}],
        "thinking": {"type": "adaptive"},
        "output_config": {"effort": "high"},
        "context_management": {"edits": []},
        "metadata": {"user_id": "u-1"},
        "stream": stream,
        "some_future_field": {"x": 1},
    }
    headers = {"anthropic-version": "2023-06-01", "x-api-key": CLIENT_KEY}
    status, _, _ = request(stack.urls["withhold"], "POST", "/v1/messages", body, headers)
    assert status == 200
    assert upstream.last(model).json == body


def test_passthrough_through_sdk_extra_body(stack, upstream, unique_model):
    model = unique_model("oa")
    upstream.script(model, script_for("openai", Answer(text="ok"), model, stream=False))
    openai_client(stack).chat.completions.create(
        model=model, messages=USER, extra_body={"some_future_field": {"x": 1}}
    )
    assert upstream.last(model).json["some_future_field"] == {"x": 1}
