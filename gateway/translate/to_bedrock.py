"""Chat Completions and Responses request bodies -> Bedrock Converse, through Anthropic Messages.

Converse's body is Anthropic's in other words (system apart, user/assistant turns of content
blocks, tool use and results matched by id), so each client format goes the way it already goes
to Anthropic (`openai_anthropic`, `responses_anthropic`, which keep Anthropic's rules: roles
alternate, tool results lead their turn), with `default_max_tokens=None` (Converse's budget is
optional), and on through `anthropic_bedrock`. What the second step drops is named in the
client's own terms: the Anthropic field it made, renamed to the client field it came from.

    translation = translate_openai({"messages": [...], "user": "u"}, "anthropic.claude-x")
    translation.dropped.fields      # ('user',): Converse has no user id for the model
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from gateway.translate import anthropic_bedrock, openai_anthropic, responses_anthropic
from gateway.translate.translation import Dropped, Translation

# An Anthropic field the first step made -> the client field it came from; "user" stands for
# whichever of safety_identifier / user the client gave (read from its body).
_ORIGINS: Final[Mapping[str, str]] = {
    "metadata": "user",
    "tool_choice.disable_parallel_tool_use": "parallel_tool_calls",
}


def translate_openai(body: dict[str, Any], upstream_model: str) -> Translation:
    first = openai_anthropic.translate_request(body, upstream_model, default_max_tokens=None)
    return _onward(body, first)


def translate_responses(body: dict[str, Any], upstream_model: str) -> Translation:
    first = responses_anthropic.translate_request(body, upstream_model, default_max_tokens=None)
    return _onward(body, first)


def _onward(client_body: dict[str, Any], first: Translation) -> Translation:
    second = anthropic_bedrock.translate_request(first.body, str(first.body.get("model", "")))
    fields = set(first.dropped.fields)
    for name in second.dropped.fields:
        origin = _ORIGINS.get(name, name)
        if origin == "user" and client_body.get("safety_identifier"):
            origin = "safety_identifier"
        fields.add(origin)
    items = dict(first.dropped.items)
    for kind, n in second.dropped.items.items():
        items[kind] = items.get(kind, 0) + n
    tools = first.dropped.tools + second.dropped.tools
    return Translation(second.body, Dropped(tuple(sorted(fields)), tools, items), first.tools)
