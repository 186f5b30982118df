"""Anthropic client, non-streaming: the upstream's own body relayed, or one built from events."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from gateway.encode import ReplyTerms
from gateway.encode.anthropic_stream import stop_details, usage_body
from gateway.formats.stop_reasons import relayed, to_anthropic
from gateway.normalize.aggregate import AggregatedResponse
from gateway.normalize.truncation import Verdict


def relay_body(body: dict[str, Any], verdict: Verdict, terms: ReplyTerms) -> dict[str, Any]:
    """Same-format: the upstream body with every field kept; withheld tool_use blocks removed; a
    stop_reason the gateway does not know goes through as sent."""
    if not verdict.deliver_tool_calls:
        body["content"] = [b for b in body.get("content") or () if b.get("type") != "tool_use"]
    shown = to_anthropic(
        verdict.stop_reason, verdict.delivered_tool_calls, body.get("stop_sequence")
    )
    body["stop_reason"] = relayed(verdict.stop_reason, verdict.native_stop_reason, shown)
    body["gateway"] = terms.extension(verdict)
    return body


def build_body(resp: AggregatedResponse, verdict: Verdict, terms: ReplyTerms) -> dict[str, Any]:
    content: list[dict[str, Any]] = []
    if resp.thinking:
        content.append(
            {
                "type": "thinking",
                "thinking": resp.thinking,
                "signature": resp.thinking_signature or "",
            }
        )
    if resp.text or resp.refusal:
        content.append({"type": "text", "text": resp.text + resp.refusal})
    if verdict.delivered_tool_calls:
        for call in resp.tool_calls:
            arguments = call.parsed if isinstance(call.parsed, dict) else {}
            content.append(
                {"type": "tool_use", "id": call.id, "name": call.name, "input": arguments}
            )
    body: dict[str, Any] = {
        "id": resp.id or "msg_" + terms.request_id,
        "type": "message",
        "role": "assistant",
        "model": resp.model or terms.model,
        "content": content,
        "stop_reason": to_anthropic(
            verdict.stop_reason, verdict.delivered_tool_calls, resp.stop_sequence
        ),
        "stop_sequence": resp.stop_sequence,
        "usage": usage_body(resp.usage),
        "gateway": terms.extension(verdict),
    }
    details = stop_details(verdict)
    if details:
        body["stop_details"] = details
    return body


def models_body(names: Sequence[str]) -> dict[str, Any]:
    """`GET /v1/models` in Anthropic's list shape."""
    data = [
        {"id": n, "type": "model", "display_name": n, "created_at": "2025-01-01T00:00:00Z"}
        for n in names
    ]
    return {
        "data": data,
        "has_more": False,
        "first_id": names[0] if names else None,
        "last_id": names[-1] if names else None,
    }
