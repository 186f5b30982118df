"""OpenAI client, non-streaming: the upstream's own body relayed, or one built from events."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from gateway.encode import ReplyTerms
from gateway.encode.openai_stream import usage_body
from gateway.events import StopReason
from gateway.formats.stop_reasons import from_openai, relayed, to_openai
from gateway.normalize.aggregate import AggregatedResponse
from gateway.normalize.truncation import Verdict


def relay_body(body: dict[str, Any], verdict: Verdict, terms: ReplyTerms) -> dict[str, Any]:
    """Same-format: the upstream body with every field kept, choices normalized. A choice's
    finish_reason stays the native value's own (a refusal keeps `stop`, a value the gateway does
    not know goes through as sent); the `gateway` object carries choice 0's verdict."""
    for choice in body.get("choices") or ():
        native = choice.get("finish_reason")
        message = choice.get("message") or {}
        choice_verdict = verdict
        if choice.get("index", 0) != 0:
            calls = [
                (c.get("id") or "", (c.get("function") or {}).get("name") or "")
                for c in message.get("tool_calls") or ()
            ]
            choice_verdict = terms.judge(from_openai(native), native, calls)
        if not choice_verdict.deliver_tool_calls:
            message.pop("tool_calls", None)
            message.pop("function_call", None)
        shown = from_openai(native)
        if choice_verdict is verdict and verdict.stop_reason is not StopReason.REFUSAL:
            shown = verdict.stop_reason  # the decoder's reading, the provider's own values too
        shown_value = to_openai(shown, choice_verdict.delivered_tool_calls)
        choice["finish_reason"] = relayed(shown, native, shown_value)
        choice["native_finish_reason"] = native
    body["gateway"] = terms.extension(verdict)
    return body


def build_body(resp: AggregatedResponse, verdict: Verdict, terms: ReplyTerms) -> dict[str, Any]:
    message: dict[str, Any] = {
        "role": "assistant",
        "content": resp.text or None,
        "refusal": resp.refusal or None,
    }
    if resp.thinking:
        message["reasoning_content"] = resp.thinking
    if verdict.stop_reason is StopReason.REFUSAL and resp.stop_details:
        message["refusal"] = resp.stop_details.get("explanation") or message["refusal"]
    if verdict.delivered_tool_calls:
        message["tool_calls"] = [
            {
                "id": call.id,
                "type": "function",
                "function": {"name": call.name, "arguments": call.arguments or "{}"},
            }
            for call in resp.tool_calls
        ]
    choice = {
        "index": 0,
        "message": message,
        "logprobs": None,
        "finish_reason": to_openai(verdict.stop_reason, verdict.delivered_tool_calls),
        "native_finish_reason": verdict.native_stop_reason,
    }
    return {
        "id": resp.id or "chatcmpl-" + terms.request_id,
        "object": "chat.completion",
        "created": int(time.time()),
        "model": resp.model or terms.model,
        "choices": [choice],
        "usage": usage_body(resp.usage),
        "gateway": terms.extension(verdict),
    }


def models_body(names: Sequence[str]) -> dict[str, Any]:
    """`GET /v1/models` in OpenAI's list shape."""
    created = int(time.time())
    data = [{"id": n, "object": "model", "created": created, "owned_by": "gateway"} for n in names]
    return {"object": "list", "data": data}
