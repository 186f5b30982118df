"""The one table choosing a request translator per (client format, upstream wire) pair.

A translator returns the upstream body and what of the client's request it could not carry, by
name only (never a value): the `gateway` object and the audit record list them, so nothing is
dropped silently.

    translation = translate_request("openai", "anthropic", body, "claude-x")
    translation.body, translation.dropped.fields       # ("seed", "logprobs")
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from gateway.errors import InvalidRequest
from gateway.translate import (
    anthropic_bedrock,
    anthropic_gemini,
    anthropic_openai,
    anthropic_responses,
    composed_gemini,
    openai_anthropic,
    openai_responses,
    responses_anthropic,
    responses_openai,
    to_bedrock,
)
from gateway.translate.translation import NOTHING_DROPPED, Dropped, Translation

__all__ = ["NOTHING_DROPPED", "TRANSLATORS", "Dropped", "Translation", "translate_request"]


Translator = Callable[[dict[str, Any], str], Translation]


TRANSLATORS: dict[tuple[str, str], Translator] = {
    ("openai", "anthropic"): openai_anthropic.translate_request,
    ("anthropic", "openai"): anthropic_openai.translate_request,
    ("openai", "openai_responses"): openai_responses.translate_request,
    ("anthropic", "openai_responses"): anthropic_responses.translate_request,
    ("responses", "openai"): responses_openai.translate_request,
    ("responses", "anthropic"): responses_anthropic.translate_request,
    ("anthropic", "gemini"): anthropic_gemini.translate_request,
    ("openai", "gemini"): composed_gemini.openai_to_gemini,
    ("responses", "gemini"): composed_gemini.responses_to_gemini,
    ("anthropic", "bedrock"): anthropic_bedrock.translate_request,
    ("openai", "bedrock"): to_bedrock.translate_openai,
    ("responses", "bedrock"): to_bedrock.translate_responses,
}


def translate_request(
    client: str, wire: str, body: dict[str, Any], upstream_model: str
) -> Translation:
    """The client's body translated for an upstream of another wire (same-format traffic is a
    passthrough and never comes here)."""
    translator = TRANSLATORS.get((client, wire))
    if translator is None:
        supported = ", ".join(f"{c}->{w}" for c, w in TRANSLATORS)
        raise InvalidRequest(f"No translation from {client} to {wire} (supported: {supported})")
    return translator(body, upstream_model)
