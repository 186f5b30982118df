"""OpenAI Chat and Responses request bodies -> Gemini, through Anthropic Messages.

Gemini's request has the shape of Anthropic's more than of Chat's (a system instruction apart,
typed parts, tool results in the user turn), so each client format goes to Anthropic first with
its own translator (`openai_anthropic`, `responses_anthropic`), without inventing a max_tokens
Gemini does not need, then `anthropic_gemini`. What either step could not carry is named, and
the tools the first step reshaped keep their origins.

    >>> body = {"messages": [{"role": "user", "content": "hi"}], "seed": 7}
    >>> translation = openai_to_gemini(body, "gemini-2.5-flash")
    >>> translation.body["contents"], translation.dropped.fields
    ([{'role': 'user', 'parts': [{'text': 'hi'}]}], ('seed',))
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from gateway.translate import anthropic_gemini, openai_anthropic, responses_anthropic
from gateway.translate.translation import Dropped, Translation


def openai_to_gemini(body: dict[str, Any], upstream_model: str) -> Translation:
    first = openai_anthropic.translate_request(body, upstream_model, default_max_tokens=None)
    return _onward(first, upstream_model)


def responses_to_gemini(body: dict[str, Any], upstream_model: str) -> Translation:
    first = responses_anthropic.translate_request(body, upstream_model, default_max_tokens=None)
    return _onward(first, upstream_model)


def _onward(first: Translation, upstream_model: str) -> Translation:
    second = anthropic_gemini.translate_request(first.body, upstream_model)
    return Translation(second.body, merged(first.dropped, second.dropped), first.tools)


def merged(first: Dropped, second: Dropped) -> Dropped:
    items = Counter(first.items)
    items.update(second.items)
    return Dropped(
        tuple(sorted({*first.fields, *second.fields})),
        (*first.tools, *second.tools),
        dict(items),
    )
