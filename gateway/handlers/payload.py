"""What an attempt sends upstream: the client's own bytes when the upstream speaks the client's
wire (renamed when the route renames the model), else the request translated; and what the
translation dropped, recorded by name and count.

    payload = upstream_payload(client, wire.name, obj, raw, target.upstream_model)
    record_dropped(record, payload.dropped)
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import orjson

from gateway.audit.record import AuditRecord
from gateway.client_formats import ClientFormat
from gateway.handlers.validation import nested_too_deep
from gateway.translate.table import NOTHING_DROPPED, Dropped, translate_request
from gateway.translate.translation import ToolOrigin


@dataclass(frozen=True, slots=True)
class UpstreamPayload:
    """The bytes an attempt sends, what its translation dropped, and its reshaped tools."""

    payload: bytes
    dropped: Dropped = NOTHING_DROPPED
    tools: Mapping[str, ToolOrigin] = field(default_factory=dict)


def record_dropped(record: AuditRecord, dropped: Dropped) -> None:
    """What this attempt's translation left out, by name and count (never a value)."""
    record.dropped_fields = list(dropped.fields) or None
    record.dropped_tools = len(dropped.tools)
    record.dropped_input_items = sum(dropped.items.values())


def upstream_payload(
    client: ClientFormat, wire: str, obj: dict[str, Any], raw: bytes, upstream_model: str
) -> UpstreamPayload:
    """What goes upstream: the client's own bytes when the wire is the client's and the route
    does not rename the model; else the body renamed or translated, with what it dropped."""
    if client.relays(wire):
        tools = client.relay_tools(obj)
        rewritten = client.relay_request(obj)
        dropped = NOTHING_DROPPED
        if rewritten is not None:
            obj, dropped = rewritten
        elif obj.get("model") == upstream_model:
            return UpstreamPayload(raw, tools=tools)
    try:
        if client.relays(wire):
            body = orjson.dumps({**obj, "model": upstream_model})
            return UpstreamPayload(body, dropped, tools)
        translation = translate_request(client.name, wire, obj, upstream_model)
        return UpstreamPayload(
            orjson.dumps(translation.body), translation.dropped, translation.tools
        )
    except orjson.JSONEncodeError:  # nested deeper than the encoder writes (tool inputs too)
        raise nested_too_deep(client.endpoint, obj) from None
