"""Malformed client input gets the calling format's own error JSON and a fitting 4xx status.

Raw HTTP (http.client) for what no SDK would send, and the real SDKs for the exception class
they raise. Never a traceback, never a non-JSON body.
"""

from __future__ import annotations

import http.client
from typing import Any
from urllib.parse import urlsplit

import anthropic
import openai
import orjson
import pytest

from tests.conftest import anthropic_client, openai_client
from tests.upstream import Script

OA = "/v1/chat/completions"
AN = "/v1/messages"
ENDPOINTS = (OA, AN)
FORMAT = {OA: "openai", AN: "anthropic"}
USER = [{"role": "user", "content": "hi"}]


def request(
    base: str,
    method: str,
    path: str,
    body: bytes | None = None,
    headers: dict[str, str] | None = None,
) -> tuple[int, dict[str, str], bytes]:
    """One raw HTTP exchange; headers come back with lower-case names."""
    url = urlsplit(base)
    conn = http.client.HTTPConnection(url.hostname, url.port, timeout=10)
    try:
        sent = {"content-type": "application/json", **(headers or {})}
        conn.request(method, path, body=body, headers=sent)
        resp = conn.getresponse()
        data = resp.read()
        return resp.status, {k.lower(): v for k, v in resp.getheaders()}, data
    finally:
        conn.close()


def post(base: str, path: str, body: bytes | Any) -> tuple[int, dict[str, str], bytes]:
    raw = body if isinstance(body, bytes) else orjson.dumps(body)
    headers = {"anthropic-version": "2023-06-01"} if path == AN else {}
    return request(base, "POST", path, raw, headers)


def valid_body(path: str, model: str = "mock-text") -> dict[str, Any]:
    body: dict[str, Any] = {"model": model, "messages": USER}
    if path == AN:
        body["max_tokens"] = 64
    return body


def assert_error(
    fmt: str, status: int, headers: dict[str, str], body: bytes, expected: int
) -> dict[str, Any]:
    """The format's own error JSON with `expected` status; returns the inner error object."""
    assert status == expected, body
    assert headers["content-type"].startswith("application/json")
    assert b"Traceback" not in body
    assert b'File "' not in body
    data = orjson.loads(body)
    if fmt == "openai":
        assert set(data) == {"error"}, data
        error = data["error"]
        assert {"message", "type", "code"} <= set(error)
    else:
        assert data["type"] == "error", data
        assert "gateway" not in data
        error = data["error"]
        assert {"type", "message"} <= set(error)
    assert isinstance(error["message"], str) and error["message"]
    assert isinstance(error["type"], str) and error["type"]
    return error


# --- raw HTTP ----------------------------------------------------------------------------------


@pytest.mark.parametrize("path", ENDPOINTS)
def test_invalid_json(stack, path):
    status, headers, body = post(stack.urls["withhold"], path, b'{"model": "mock-text",')
    error = assert_error(FORMAT[path], status, headers, body, 400)
    assert error["type"] == "invalid_request_error"
    if path == OA:
        assert error["code"] == "invalid_json"


@pytest.mark.parametrize("path", ENDPOINTS)
def test_empty_body(stack, path):
    status, headers, body = post(stack.urls["withhold"], path, b"")
    assert_error(FORMAT[path], status, headers, body, 400)


@pytest.mark.parametrize("path", ENDPOINTS)
def test_json_array_body(stack, path):
    status, headers, body = post(stack.urls["withhold"], path, [valid_body(path)])
    error = assert_error(FORMAT[path], status, headers, body, 400)
    assert error["type"] == "invalid_request_error"


@pytest.mark.parametrize("path", ENDPOINTS)
@pytest.mark.parametrize("scalar", [b"null", b'"text"', b"42"])
def test_json_scalar_body(stack, path, scalar):
    status, headers, body = post(stack.urls["withhold"], path, scalar)
    assert_error(FORMAT[path], status, headers, body, 400)


@pytest.mark.parametrize("path", ENDPOINTS)
def test_missing_model(stack, path):
    payload = valid_body(path)
    del payload["model"]
    status, headers, body = post(stack.urls["withhold"], path, payload)
    error = assert_error(FORMAT[path], status, headers, body, 400)
    assert "model" in error["message"]
    if path == OA:
        assert error["param"] == "model"


@pytest.mark.parametrize("path", ENDPOINTS)
@pytest.mark.parametrize("model", ["", 42, None, ["mock-text"]])
def test_empty_or_non_string_model(stack, path, model):
    status, headers, body = post(stack.urls["withhold"], path, valid_body(path, model))
    error = assert_error(FORMAT[path], status, headers, body, 400)
    assert "model" in error["message"]


@pytest.mark.parametrize("path", ENDPOINTS)
@pytest.mark.parametrize("stream", [False, True])
def test_unknown_model(stack, path, stream):
    payload = {**valid_body(path, "no-such-model-anywhere"), "stream": stream}
    status, headers, body = post(stack.urls["withhold"], path, payload)
    error = assert_error(FORMAT[path], status, headers, body, 404)
    assert "no-such-model-anywhere" in error["message"]
    if path == OA:
        assert error["code"] == "model_not_found"
    else:
        assert error["type"] == "not_found_error"


def test_anthropic_body_without_max_tokens(stack):
    # An OpenAI-shaped body sent to the Anthropic endpoint.
    payload = {"model": "mock-text", "messages": USER}
    status, headers, body = post(stack.urls["withhold"], AN, payload)
    error = assert_error("anthropic", status, headers, body, 400)
    assert error["type"] == "invalid_request_error"
    assert "max_tokens" in error["message"]


@pytest.mark.parametrize("max_tokens", [0, -5, "many", 1.5, None])
def test_anthropic_bad_max_tokens(stack, max_tokens):
    payload = {**valid_body(AN), "max_tokens": max_tokens}
    status, headers, body = post(stack.urls["withhold"], AN, payload)
    error = assert_error("anthropic", status, headers, body, 400)
    assert "max_tokens" in error["message"]


@pytest.mark.parametrize("path", ENDPOINTS)
@pytest.mark.parametrize("messages", ["hi", {"role": "user", "content": "hi"}, None, ["hi"]])
def test_messages_not_a_list_of_objects(stack, path, messages):
    payload = {**valid_body(path), "messages": messages}
    status, headers, body = post(stack.urls["withhold"], path, payload)
    error = assert_error(FORMAT[path], status, headers, body, 400)
    assert "messages" in error["message"]


@pytest.mark.parametrize("path", ENDPOINTS)
def test_missing_messages(stack, path):
    payload = valid_body(path)
    del payload["messages"]
    status, headers, body = post(stack.urls["withhold"], path, payload)
    error = assert_error(FORMAT[path], status, headers, body, 400)
    assert "messages" in error["message"]


def test_openai_empty_messages(stack):
    payload = {"model": "mock-text", "messages": []}
    status, headers, body = post(stack.urls["withhold"], OA, payload)
    error = assert_error("openai", status, headers, body, 400)
    assert error["param"] == "messages"


@pytest.mark.parametrize("path", ENDPOINTS)
@pytest.mark.parametrize("stream", ["yes", 1, "true"])
def test_stream_not_a_boolean(stack, path, stream):
    payload = {**valid_body(path), "stream": stream}
    status, headers, body = post(stack.urls["withhold"], path, payload)
    error = assert_error(FORMAT[path], status, headers, body, 400)
    assert "stream" in error["message"]


@pytest.mark.parametrize("path", ENDPOINTS)
def test_bad_input_is_rejected_before_any_upstream_call(stack, upstream, unique_model, path):
    # A routable model with a broken body: the upstream never sees it.
    model = unique_model("oa" if path == OA else "an")
    upstream.script(model, Script(body=b"{}"))
    payload = {**valid_body(path, model), "stream": "yes"}
    status, headers, body = post(stack.urls["withhold"], path, payload)
    assert_error(FORMAT[path], status, headers, body, 400)
    assert upstream.received[model] == []


@pytest.mark.parametrize(
    ("method", "path", "headers", "fmt"),
    [
        ("GET", "/v1/nothing-here", {}, "openai"),
        ("POST", "/v1/completions", {}, "openai"),
        ("POST", "/v2/messages", {"anthropic-version": "2023-06-01"}, "anthropic"),
        ("GET", "/v1/messages/batches", {"anthropic-version": "2023-06-01"}, "anthropic"),
    ],
)
def test_unknown_path(stack, method, path, headers, fmt):
    body = b"{}" if method == "POST" else None
    status, resp_headers, data = request(stack.urls["withhold"], method, path, body, headers)
    error = assert_error(fmt, status, resp_headers, data, 404)
    assert path in error["message"]
    if fmt == "anthropic":
        assert error["type"] == "not_found_error"


@pytest.mark.parametrize(
    ("method", "path", "headers", "fmt"),
    [
        ("GET", "/v1/nothing-here", {}, "openai"),
        ("POST", "/v2/messages", {"anthropic-version": "2023-06-01"}, "anthropic"),
        ("POST", OA, {}, "openai"),  # refused by the exchange: invalid JSON
        ("POST", AN, {"anthropic-version": "2023-06-01"}, "anthropic"),
    ],
)
def test_every_refusal_has_a_fresh_request_id(stack, method, path, headers, fmt):
    ids = set()
    for _ in range(2):
        body = b"{" if method == "POST" else None
        _, resp_headers, data = request(stack.urls["withhold"], method, path, body, headers)
        request_id = resp_headers.get("x-request-id", "")
        assert len(request_id) >= 16, resp_headers
        if fmt == "anthropic":
            assert orjson.loads(data)["request_id"] == request_id
        ids.add(request_id)
    assert len(ids) == 2


@pytest.mark.parametrize("path", ENDPOINTS)
def test_wrong_method_on_an_endpoint(stack, path):
    headers = {"anthropic-version": "2023-06-01"} if path == AN else {}
    status, resp_headers, data = request(stack.urls["withhold"], "GET", path, None, headers)
    assert 400 <= status < 500
    assert resp_headers["content-type"].startswith("application/json")
    assert b"Traceback" not in data
    parsed = orjson.loads(data)
    if path == OA:
        assert set(parsed) == {"error"}
    else:
        assert parsed["type"] == "error"


# --- the real SDKs ------------------------------------------------------------------------------


def test_openai_sdk_unknown_model_raises_not_found(stack):
    client = openai_client(stack)
    with pytest.raises(openai.NotFoundError) as info:
        client.chat.completions.create(model="no-such-model", messages=USER)
    assert info.value.status_code == 404
    assert info.value.code == "model_not_found"


def test_openai_sdk_unknown_model_streaming_raises_not_found(stack):
    client = openai_client(stack)
    with pytest.raises(openai.NotFoundError):
        client.chat.completions.create(model="no-such-model", messages=USER, stream=True)


def test_openai_sdk_empty_messages_raises_bad_request(stack):
    client = openai_client(stack)
    with pytest.raises(openai.BadRequestError) as info:
        client.chat.completions.create(model="mock-text", messages=[])
    assert info.value.status_code == 400
    assert info.value.param == "messages"


def test_anthropic_sdk_unknown_model_raises_not_found(stack):
    client = anthropic_client(stack)
    with pytest.raises(anthropic.NotFoundError) as info:
        client.messages.create(model="no-such-model", max_tokens=10, messages=USER)
    assert info.value.status_code == 404
    assert info.value.body["error"]["type"] == "not_found_error"


def test_anthropic_sdk_unknown_model_streaming_raises_not_found(stack):
    client = anthropic_client(stack)
    with (
        pytest.raises(anthropic.NotFoundError),
        client.messages.stream(model="no-such-model", max_tokens=10, messages=USER) as stream,
    ):
        stream.get_final_message()


def test_anthropic_sdk_bad_max_tokens_raises_bad_request(stack):
    client = anthropic_client(stack)
    with pytest.raises(anthropic.BadRequestError) as info:
        client.messages.create(model="mock-text", max_tokens=0, messages=USER)
    assert info.value.status_code == 400
    assert info.value.body["error"]["type"] == "invalid_request_error"
