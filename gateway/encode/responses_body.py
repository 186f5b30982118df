"""Responses client: the Response object (RESPONSES.md §3), whole or as the stream's terminal one.

    body = build_body(response, verdict, terms)      # a non-streamed answer
    obj = response_object(terms, "completed", None, output, usage, model, verdict)
    echo = echo_members(terms)      # a stream's three response objects: the echo encoded once
    obj = response_object(terms, "in_progress", [], None, model, None, echo=echo, created_at=t)

`status` and `incomplete_details` come from the stop-reason table (`to_responses`); there is no
finish reason. Output items are a reasoning item, one message item (text, then a refusal part),
then the function calls when they are delivered: a cut response's calls are withheld (none in
`output`, listed in `gateway.withheld_tool_calls`), or under `pass` delivered with
`status: "incomplete"`. Function call ids are minted (`fc_…`); `call_id` is the upstream's.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import orjson

from gateway.encode import ReplyTerms
from gateway.events import StopReason, Usage
from gateway.formats.stop_reasons import to_responses
from gateway.normalize.aggregate import AggregatedResponse, ToolCall
from gateway.normalize.truncation import Verdict
from gateway.translate import reasoning_token
from gateway.translate.reasoning_token import Thinking

Item = dict[str, Any]


def usage_object(usage: Usage) -> dict[str, Any]:
    """Every field filled: the SDK's types and Codex require them (0 when unknown)."""
    input_tokens = usage.input_tokens or 0
    output_tokens = usage.output_tokens or 0
    return {
        "input_tokens": input_tokens,
        "input_tokens_details": {
            "cached_tokens": usage.cache_read_tokens or 0,
            "cache_write_tokens": usage.cache_creation_tokens or 0,
        },
        "output_tokens": output_tokens,
        "output_tokens_details": {"reasoning_tokens": usage.reasoning_tokens or 0},
        "total_tokens": input_tokens + output_tokens,
    }


def response_id(terms: ReplyTerms) -> str:
    return terms.response_id or "resp_" + terms.request_id


# An item's index as its id writes it: a format spec (`:03d`) costs twice the rest of the id.
_INDEX_DIGITS = tuple(f"{index:03d}" for index in range(100))


def item_id(prefix: str, terms: ReplyTerms, index: int) -> str:
    """Stable per response and item, never equal to a call's `call_id`."""
    digits = _INDEX_DIGITS[index] if 0 <= index < 100 else f"{index:03d}"
    return f"{prefix}_{response_id(terms)[5:]}{digits}"


def status_of(verdict: Verdict) -> tuple[str, str | None]:
    return to_responses(verdict.stop_reason)


def response_object(
    terms: ReplyTerms,
    status: str,
    output: Sequence[Item | orjson.Fragment],  # a Fragment: an item already encoded
    usage: Usage | None,
    model: str,
    verdict: Verdict | None,
    *,
    created_at: int,
    incomplete_reason: str | None = None,
    error: dict[str, Any] | None = None,
    echo: bytes | None = None,
    completed_at: int | None = None,
) -> dict[str, Any]:
    """`echo`: the echoed request fields as `echo_members` encoded them, for an answer that
    writes several response objects (a stream: three), so that an agent's echo (its whole tool
    list and its instructions) is encoded once, not each time; None: from `terms.echo` (a whole
    answer's body stays plain data: the Responses store keeps it, and `GET` returns it).
    `completed_at`: when an ended answer was finished (None: now)."""
    usage_value: dict[str, Any] | orjson.Fragment | None = (
        usage_object(usage) if usage is not None else None
    )
    if echo:  # the members follow the usage's value, as raw JSON: same bytes, same order
        usage_value = orjson.Fragment(orjson.dumps(usage_value) + b"," + echo)
    body: dict[str, Any] = {
        "id": response_id(terms),
        "object": "response",
        "created_at": created_at,
        "status": status,
        "error": error,
        "incomplete_details": {"reason": incomplete_reason} if incomplete_reason else None,
        "model": model or terms.model,
        "output": list(output),
        "usage": usage_value,
    }
    if echo is None:
        body.update(terms.echo)
    if status != "in_progress":
        body["completed_at"] = int(time.time()) if completed_at is None else completed_at
    if verdict is not None:
        body["gateway"] = terms.extension(verdict)
    return body


def echo_members(terms: ReplyTerms) -> bytes:
    """The echoed request fields as JSON object members, without the braces (b"" for none)."""
    return orjson.dumps(terms.echo)[1:-1] if terms.echo else b""


def message_item(
    terms: ReplyTerms, index: int, text: str, refusal: str, status: str
) -> Item | None:
    content: list[dict[str, Any]] = []
    if text:
        content.append({"type": "output_text", "text": text, "annotations": [], "logprobs": []})
    if refusal:
        content.append({"type": "refusal", "refusal": refusal})
    if not content:
        return None
    return {
        "id": item_id("msg", terms, index),
        "type": "message",
        "role": "assistant",
        "status": status,
        "content": content,
    }


def reasoning_item(terms: ReplyTerms, index: int, thinking: str, signature: str | None) -> Item:
    item: Item = {
        "id": item_id("rs", terms, index),
        "type": "reasoning",
        "summary": [{"type": "summary_text", "text": thinking}] if thinking else [],
    }
    if terms.encrypted_reasoning and signature:
        # The signature only: the thinking text is the summary, which Anthropic signed.
        item["encrypted_content"] = reasoning_token.encode(Thinking(signature=signature))
    return item


def call_item(terms: ReplyTerms, index: int, call: ToolCall, status: str) -> Item:
    """A function call as the client declared its tool: a custom tool's call carries its raw
    input, a namespaced one its own name and namespace."""
    arguments = call.arguments or "{}"
    origin = terms.tools.get(call.name)
    if origin is not None and origin.custom:
        return {
            "id": item_id("ctc", terms, index),
            "type": "custom_tool_call",
            "call_id": call.id,
            "name": origin.name,
            "input": custom_input(arguments),
            "status": status,
            **({"namespace": origin.namespace} if origin.namespace else {}),
        }
    item: Item = {
        "id": item_id("fc", terms, index),
        "type": "function_call",
        "call_id": call.id,
        "name": origin.name if origin is not None else call.name,
        "arguments": arguments,
        "status": status,
    }
    if origin is not None and origin.namespace:
        item["namespace"] = origin.namespace
    return item


def custom_input(arguments: str) -> str:
    """The raw text a custom tool takes, unwrapped from the `{"input": …}` the upstream wrote;
    arguments that do not parse (a cut call under `pass`) are passed as they are."""
    try:
        parsed = orjson.loads(arguments)
    except orjson.JSONDecodeError:
        return arguments
    value = parsed.get("input") if isinstance(parsed, dict) else None
    return value if isinstance(value, str) else arguments


def refusal_text(resp: AggregatedResponse, verdict: Verdict) -> str:
    """The refusal the model wrote, or the explanation Anthropic gave for stopping."""
    if resp.refusal:
        return resp.refusal
    if verdict.stop_reason is StopReason.REFUSAL and resp.stop_details:
        explanation = resp.stop_details.get("explanation")
        return explanation if isinstance(explanation, str) else ""
    return ""


def call_status(verdict: Verdict) -> str:
    return "incomplete" if verdict.truncated else "completed"


def build_body(resp: AggregatedResponse, verdict: Verdict, terms: ReplyTerms) -> dict[str, Any]:
    status, reason = status_of(verdict)
    item_status = "completed" if status == "completed" else "incomplete"
    output: list[Item] = []
    if resp.thinking or resp.thinking_signature:
        output.append(reasoning_item(terms, 0, resp.thinking, resp.thinking_signature))
    message = message_item(terms, 1, resp.text, refusal_text(resp, verdict), item_status)
    if message is not None:
        output.append(message)
    if verdict.delivered_tool_calls:
        output += [
            call_item(terms, 2 + k, call, call_status(verdict))
            for k, call in enumerate(resp.tool_calls)
        ]
    now = int(time.time())  # created and completed at once
    return response_object(
        terms,
        status,
        output,
        resp.usage,
        resp.model,
        verdict,
        created_at=now,
        incomplete_reason=reason,
        error=_failed(verdict) if status == "failed" else None,
        completed_at=now,
    )


def _failed(verdict: Verdict) -> dict[str, Any]:
    native = verdict.native_stop_reason
    return {"code": "server_error", "message": f"The upstream stopped the generation ({native})"}
