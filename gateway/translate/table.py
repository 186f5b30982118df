"""The one table choosing a request translator per (client format, upstream wire) pair."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from gateway.errors import InvalidRequest
from gateway.translate import anthropic_openai, openai_anthropic

Translator = Callable[[dict[str, Any], str], dict[str, Any]]

TRANSLATORS: dict[tuple[str, str], Translator] = {
    ("openai", "anthropic"): openai_anthropic.translate_request,
    ("anthropic", "openai"): anthropic_openai.translate_request,
}


def translate_request(
    client: str, wire: str, body: dict[str, Any], upstream_model: str
) -> dict[str, Any]:
    """The client's body translated for an upstream of another wire (same-format traffic is a
    passthrough and never comes here)."""
    translator = TRANSLATORS.get((client, wire))
    if translator is None:
        supported = ", ".join(f"{c}->{w}" for c, w in TRANSLATORS)
        raise InvalidRequest(f"No translation from {client} to {wire} (supported: {supported})")
    return translator(body, upstream_model)
