"""An error reply after routing names the provider and every target tried, in a top-level
`gateway` object (gateway.handlers.error_extension): an upstream's own error JSON relayed to a
client of its wire keeps its bytes and gains the member; a gateway-rendered one has it too.

An upstream's 401 or 403 to a provider whose key is a placeholder says so in `gateway.hint`:
the README's `export OPENAI_API_KEY=unused`, run in the gateway's terminal, otherwise reaches
the client as a bare upstream 401.
"""

from __future__ import annotations

from typing import Any

import anthropic
import openai
import orjson
import pytest

from gateway.encode.errors import with_member
from tests.conftest import ONE_ATTEMPT, Stack
from tests.upstream import Script

USER = [{"role": "user", "content": "hi"}]
OPENAI_401 = orjson.dumps(
    {
        "error": {
            "message": "Incorrect API key provided: unused.",
            "type": "invalid_request_error",
            "param": None,
            "code": "invalid_api_key",
        }
    }
)
ANTHROPIC_401 = orjson.dumps(
    {"type": "error", "error": {"type": "authentication_error", "message": "invalid x-api-key"}}
)


@pytest.fixture(scope="module")
def fallback(stack: Stack) -> str:
    """A gateway whose `fb-*` route tries a dead provider, then `openai` (its fallback); `ph-*`
    and `an-*` reach providers whose key is the README's placeholder."""
    providers = {
        "dead": {"kind": "openai", "base_url": "http://127.0.0.1:9/v1", "api_key": "sk-dead"},
        "openai": {
            "kind": "openai",
            "base_url": f"{stack.upstream_url}/v1",
            "api_key": "sk-upstream-openai-key-123456789",
            "retry": ONE_ATTEMPT,
        },
        "placeholder": {
            "kind": "openai",
            "base_url": f"{stack.upstream_url}/v1",
            "api_key": "unused",
            "retry": ONE_ATTEMPT,
        },
        "anthropic": {"kind": "anthropic", "base_url": stack.upstream_url, "api_key": "unused"},
    }
    routes = [
        {"match": "fb-*", "targets": [{"provider": "dead"}, {"provider": "openai", "weight": 0}]},
        {"match": "ph-*", "provider": "placeholder"},
        {"match": "an-*", "provider": "anthropic"},
        {"match": "oa-*", "provider": "openai"},
    ]
    return stack.add_gateway("error-extension", {"providers": providers, "routes": routes})


def chat_error(url: str, model: str) -> openai.APIStatusError:
    client = openai.OpenAI(base_url=url + "/v1", api_key="sk-client", max_retries=0)
    with pytest.raises(openai.APIStatusError) as info:
        client.chat.completions.create(model=model, messages=USER)
    return info.value


def test_a_relayed_error_keeps_its_bytes_and_names_every_target(fallback, upstream, unique_model):
    model = unique_model("fb")
    upstream.script(model, Script(status=401, body=OPENAI_401))
    err = chat_error(fallback, model)

    raw = err.response.content
    assert err.status_code == 401
    assert raw.startswith(OPENAI_401[:-1] + b',"gateway":')  # the upstream's bytes, then ours
    reply = orjson.loads(raw)
    assert reply["error"] == orjson.loads(OPENAI_401)["error"]
    ext: dict[str, Any] = reply["gateway"]
    assert ext["provider"] == "openai"
    assert ext["request_id"] == err.response.headers["x-request-id"]
    assert [(a["provider"], a["outcome"]) for a in ext["attempts"]] == [
        ("dead", "unreachable"),
        ("openai", "error_status"),
    ]
    assert ext["attempts"][1]["status"] == 401 and "status" not in ext["attempts"][0]
    assert "hint" not in ext  # a real-looking key: the upstream's word stands
    assert b"sk-upstream" not in raw and b"sk-client" not in raw


def test_a_placeholder_key_refused_says_so(fallback, upstream, unique_model):
    model = unique_model("ph")
    upstream.script(model, Script(status=401, body=OPENAI_401))
    ext = orjson.loads(chat_error(fallback, model).response.content)["gateway"]

    assert ext["provider"] == "placeholder"
    assert "'placeholder'" in ext["hint"] and "placeholder" in ext["hint"]
    assert "unused" not in ext["hint"].replace("OPENAI_API_KEY=unused", "")  # never the key


def test_a_translated_error_has_the_member_too(fallback, upstream, unique_model):
    """An Anthropic upstream's 401 to an OpenAI client: the gateway's own OpenAI error JSON,
    and the same `gateway` object, hint included (the Anthropic provider's key is `unused`)."""
    model = unique_model("an")
    upstream.script(model, Script(status=401, body=ANTHROPIC_401))
    err = chat_error(fallback, model)

    assert isinstance(err, openai.AuthenticationError)
    reply = orjson.loads(err.response.content)
    assert reply["error"]["message"] == "invalid x-api-key"
    assert reply["gateway"]["provider"] == "anthropic"
    assert reply["gateway"]["attempts"][0]["status"] == 401
    assert "'anthropic'" in reply["gateway"]["hint"]


def test_the_anthropic_sdk_reads_a_relayed_error_with_the_member(fallback, upstream, unique_model):
    model = unique_model("an")
    upstream.script(model, Script(status=401, body=ANTHROPIC_401))
    client = anthropic.Anthropic(base_url=fallback, api_key="sk-client", max_retries=0)
    with pytest.raises(anthropic.AuthenticationError) as info:
        client.messages.create(model=model, max_tokens=8, messages=USER)

    body = info.value.body
    assert isinstance(body, dict)
    assert body["error"] == {"type": "authentication_error", "message": "invalid x-api-key"}
    assert body["gateway"]["provider"] == "anthropic"


def test_an_error_before_routing_has_no_member(fallback):
    """No provider was involved in a request for a model no route matches."""
    err = chat_error(fallback, "no-such-model")
    assert err.status_code == 404
    assert "gateway" not in orjson.loads(err.response.content)


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        (b'{"error":{"message":"x"}}', b'{"error":{"message":"x"},"gateway":{"p":1}}'),
        (b'{"error": "x"}\n', b'{"error": "x","gateway":{"p":1}}\n'),  # trailing bytes kept
        (b"{ }", b'{ "gateway":{"p":1}}'),
        (b'{"gateway":{"inner":1},"e":2}', b'{"gateway":{"p":1},"e":2}'),  # one member only
        (b'["not", "an object"]', b'["not", "an object"]'),
        (b"<html>", b"<html>"),
    ],
)
def test_a_member_joins_a_json_object_and_nothing_else_changes(body, expected):
    assert with_member(body, "gateway", {"p": 1}) == expected
