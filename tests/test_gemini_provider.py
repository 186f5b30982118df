"""The Gemini provider's two parts another Gemini-wire endpoint (Vertex AI) overrides: the URL
per model, operation and stream flag, and the credential headers."""

from __future__ import annotations

import asyncio

import pytest

from gateway.settings import parse_settings
from providers.base import Operation, ProviderRequest
from providers.gemini import GeminiProvider, client_key
from providers.registry import KINDS, build_provider

BASE = "https://generativelanguage.googleapis.com"


def request(stream: bool = False, operation: Operation = Operation.GENERATE, **headers: str):
    return ProviderRequest(b"{}", stream, "gemini-2.5-pro", operation, headers)


@pytest.mark.parametrize(
    ("stream", "operation", "tail"),
    [
        (False, Operation.GENERATE, "gemini-2.5-pro:generateContent"),
        (True, Operation.GENERATE, "gemini-2.5-pro:streamGenerateContent?alt=sse"),
        (False, Operation.COUNT_TOKENS, "gemini-2.5-pro:countTokens"),
        (False, Operation.EMBED, "gemini-2.5-pro:batchEmbedContents"),
    ],
)
def test_the_url_per_operation_and_stream_flag(stream, operation, tail):
    provider = GeminiProvider("g", BASE + "/", "key")
    assert provider.url(request(stream, operation)) == f"{BASE}/v1beta/models/{tail}"


def test_a_model_name_is_quoted_into_the_path():
    provider = GeminiProvider("g", BASE, "key")
    got = provider.url(ProviderRequest(b"{}", False, "tuned/a b?"))
    assert got == f"{BASE}/v1beta/models/tuned%2Fa%20b%3F:generateContent"


def test_the_kind_row_builds_it_with_its_default_url_and_api_version():
    settings = parse_settings(
        {"providers": {"g": {"kind": "gemini", "api_key": "k", "api_version": "v1"}}, "routes": []}
    )
    provider = build_provider("g", settings.providers["g"], {})
    assert isinstance(provider, GeminiProvider)
    assert provider.wire == KINDS["gemini"].wire == "gemini"
    assert provider.wire_of("anything") == "gemini"
    assert provider.url(request()) == f"{BASE}/v1/models/gemini-2.5-pro:generateContent"


def test_a_configured_key_goes_in_x_goog_api_key_never_the_clients():
    provider = GeminiProvider("g", BASE, "configured")
    headers = asyncio.run(provider.auth_headers(request(authorization="Bearer client")))
    assert headers == {"x-goog-api-key": "configured"}


@pytest.mark.parametrize(
    ("headers", "key"),
    [
        ({"x-api-key": "a"}, "a"),
        ({"authorization": "Bearer b"}, "b"),
        ({"authorization": "bearer  c "}, "c"),
        ({"x-api-key": "a", "authorization": "Bearer b"}, "a"),
        ({"authorization": "Basic xyz"}, None),
        ({}, None),
    ],
)
def test_without_a_key_the_clients_credential_is_the_key(headers, key):
    assert client_key(headers) == key
    provider = GeminiProvider("g", BASE, None)
    sent = asyncio.run(provider.auth_headers(request(**headers)))
    assert sent == ({"x-goog-api-key": key} if key else {})
