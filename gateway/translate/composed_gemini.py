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

# The client's fields the first step carries as Anthropic's `metadata.user_id`, which Gemini
# has no place for: named as the client sent them.
USER_FIELDS = ("safety_identifier", "user")


def openai_to_gemini(body: dict[str, Any], upstream_model: str) -> Translation:
    first = openai_anthropic.translate_request(body, upstream_model, default_max_tokens=None)
    return _onward(body, first, upstream_model)


def responses_to_gemini(body: dict[str, Any], upstream_model: str) -> Translation:
    first = responses_anthropic.translate_request(body, upstream_model, default_max_tokens=None)
    return _onward(body, first, upstream_model)


def _onward(body: dict[str, Any], first: Translation, upstream_model: str) -> Translation:
    anthropic_body = dict(first.body)
    user = Dropped()
    if anthropic_body.pop("metadata", None) is not None:
        user = Dropped(tuple(key for key in USER_FIELDS if body.get(key)))
    second = anthropic_gemini.translate_request(anthropic_body, upstream_model)
    dropped = merged(merged(first.dropped, user), second.dropped)
    return Translation(second.body, dropped, first.tools)


def merged(first: Dropped, second: Dropped) -> Dropped:
    items = Counter(first.items)
    items.update(second.items)
    return Dropped(
        tuple(sorted({*first.fields, *second.fields})),
        (*first.tools, *second.tools),
        dict(items),
    )
