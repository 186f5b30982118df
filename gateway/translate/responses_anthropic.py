"""OpenAI Responses request body -> Anthropic Messages request body (RESPONSES.md §2, §7.1).

The message core goes through Chat Completions, whose translation to Anthropic already keeps
Anthropic's rules (roles alternate from `user`, tool results lead their turn, system text joined
at the top): Responses -> Chat (`responses_openai`) -> Anthropic (`openai_anthropic`). What Chat
cannot carry is then written in Anthropic's own terms: structured output and effort in
`output_config`, an `allowed_tools` choice as the subset of tools it allows, the thinking blocks
that reasoning items carry in gateway tokens first in their assistant messages
(`responses_thinking`). Errors name the Responses field (`input[3].arguments`), checked before
the core runs.

    >>> body = {"model": "m", "input": "hi", "text": {"format": {"type": "json_schema",
    ...         "name": "n", "schema": {"type": "object"}}}}
    >>> translate_request(body, "claude-x").body["output_config"]
    {'format': {'type': 'json_schema', 'schema': {'type': 'object'}}}
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson

from gateway.translate import openai_anthropic, responses_openai, responses_thinking
from gateway.translate.fields import invalid
from gateway.translate.responses_request import (
    dropped_fields,
)
from gateway.translate.translation import Dropped, Translation

CARRIED = frozenset(
    {
        "parallel_tool_calls",
        "max_output_tokens",
        "temperature",
        "top_p",
        "reasoning",
        "text",
        "user",
        "safety_identifier",
    }
)
# Anthropic's effort levels; Responses' `minimal` is the lowest it has, `none` sends no effort.
EFFORT = {"minimal": "low", "low": "low", "medium": "medium", "high": "high", "xhigh": "xhigh"}


def translate_request(
    body: dict[str, Any], upstream_model: str, *, default_max_tokens: int | None = 4096
) -> Translation:
    _check_input(body.get("input"))
    chat = responses_openai.translate_request(body, upstream_model)
    core = openai_anthropic.translate_request(
        chat.body, upstream_model, default_max_tokens=default_max_tokens
    )
    out = core.body  # what the core dropped is named below in Responses terms
    carried = responses_thinking.place(out["messages"], responses_thinking.read(body.get("input")))
    output_config = _output_config(body)
    if output_config:
        out["output_config"] = output_config
    user = body.get("safety_identifier") or body.get("user")
    if isinstance(user, str) and user:
        out["metadata"] = {"user_id": user}
    read = CARRIED | {key for key in ("service_tier",) if key in out}  # mapped by the core
    fields = list(dropped_fields(body, read))
    text = body.get("text")
    if isinstance(text, dict) and text.get("verbosity") is not None:
        fields.append("text.verbosity")
    dropped = Dropped(tuple(fields), chat.dropped.tools, _uncarried(chat.dropped.items, carried))
    return Translation(out, dropped, chat.tools)


def _uncarried(items: Mapping[str, int], thinking: int) -> dict[str, int]:
    """The core drops every reasoning item; those that came back as thinking blocks were not."""
    left = {**items, "reasoning": items.get("reasoning", 0) - thinking}
    return {kind: n for kind, n in left.items() if n > 0}


def _check_input(value: Any) -> None:
    """What the Chat core would accept but Anthropic cannot take, named in Responses terms."""
    for i, item in enumerate(value if isinstance(value, list) else ()):
        if not isinstance(item, dict):
            continue
        kind = item.get("type", "message" if "role" in item else None)
        if kind == "function_call":
            _check_arguments(item.get("arguments"), f"input[{i}].arguments")
        content = item.get("content") if kind == "message" else None
        for k, part in enumerate(content if isinstance(content, list) else ()):
            if isinstance(part, dict) and part.get("type") == "input_file":
                raise invalid(f"input[{i}].content[{k}]", "files cannot be sent to Anthropic")


def _check_arguments(arguments: Any, path: str) -> None:
    if arguments is None or (isinstance(arguments, str) and not arguments.strip()):
        return
    if not isinstance(arguments, str):
        raise invalid(path, "must be a JSON string")
    try:
        parsed = orjson.loads(arguments)
    except orjson.JSONDecodeError:
        raise invalid(path, "is not valid JSON") from None  # the parser quotes the text
    if not isinstance(parsed, dict):
        raise invalid(path, "must encode a JSON object")


def _output_config(body: dict[str, Any]) -> dict[str, Any]:
    config: dict[str, Any] = {}
    reasoning = body.get("reasoning")
    effort = reasoning.get("effort") if isinstance(reasoning, dict) else None
    if isinstance(effort, str) and effort in EFFORT:
        config["effort"] = EFFORT[effort]
    text = body.get("text")
    fmt = text.get("format") if isinstance(text, dict) else None
    if isinstance(fmt, dict) and fmt.get("type") == "json_schema":
        schema = fmt.get("schema")
        if not isinstance(schema, dict):
            raise invalid("text.format.schema", "must be an object")
        config["format"] = {"type": "json_schema", "schema": schema}
    return config
