"""Drivers for the Responses endpoint tests: raw streams read and checked against the grammar.

`raw_events` POSTs to `/v1/responses` with plain HTTP and returns the SSE events as (event line,
data object) pairs; `check_grammar` asserts what the openai SDK's accumulator and Codex require
of them (RESPONSES.md §4), on the bytes themselves.
"""

from __future__ import annotations

import http.client
import json
from typing import Any
from urllib.parse import urlsplit

WEATHER_TOOL = {
    "type": "function",
    "name": "get_weather",
    "description": "Weather for a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
}
TERMINALS = ("response.completed", "response.incomplete", "response.failed")


def post(stack: Any, body: dict[str, Any], policy: str = "withhold", path: str = "/v1/responses"):
    url = urlsplit(stack.urls[policy])
    conn = http.client.HTTPConnection(url.hostname, url.port, timeout=10)
    try:
        conn.request(
            "POST",
            path,
            body=json.dumps(body).encode(),
            headers={"content-type": "application/json", "authorization": "Bearer sk-client"},
        )
        response = conn.getresponse()
        headers = {name.lower(): value for name, value in response.getheaders()}
        return response.status, headers, response.read().decode("utf-8")
    finally:
        conn.close()


def raw_events(
    stack: Any, body: dict[str, Any], policy: str = "withhold"
) -> tuple[str, list[tuple[str, dict[str, Any]]]]:
    status, headers, text = post(stack, {**body, "stream": True}, policy)
    assert status == 200, text[:500]
    assert headers.get("content-type", "").startswith("text/event-stream")
    events = []
    for block in text.split("\n\n"):
        if not block.strip():
            continue
        lines = dict(line.split(": ", 1) for line in block.split("\n") if ": " in line)
        events.append((lines.get("event", ""), json.loads(lines["data"])))
    return text, events


def check_grammar(events: list[tuple[str, dict[str, Any]]]) -> dict[str, Any]:
    """Every rule a client relies on; returns the terminal response."""
    kinds = [kind for kind, _ in events]
    assert all(kind == data["type"] for kind, data in events), "event line and type differ"
    assert [data["sequence_number"] for _, data in events] == list(range(len(events)))
    assert kinds[:2] == ["response.created", "response.in_progress"]
    assert kinds[-1] in TERMINALS and sum(k in TERMINALS for k in kinds) == 1
    if kinds[-1] == "response.failed":
        assert kinds[-2] == "error"
    else:
        assert "error" not in kinds
    response_id = events[0][1]["response"]["id"]
    assert response_id.startswith("resp_")
    assert events[1][1]["response"]["id"] == response_id == events[-1][1]["response"]["id"]
    open_item: dict[str, Any] | None = None
    indexes: list[int] = []
    done: list[dict[str, Any]] = []
    for kind, data in events[2:-1]:
        if kind == "error":
            assert data["error"]["message"] == data["message"]
            continue
        assert "error" not in data, "a top-level error key makes the SDK raise"
        if kind == "response.output_item.added":
            assert open_item is None, "one item open at a time"
            index = data["output_index"]
            assert index == len(indexes), "output_index fresh and in order"
            indexes.append(index)
            open_item = data["item"]
            continue
        assert open_item is not None, f"{kind} outside an item"
        assert data["output_index"] == indexes[-1]
        if kind == "response.output_item.done":
            item = data["item"]
            assert item["type"] == open_item["type"] and item["id"] == open_item["id"]
            if item["type"] == "function_call":
                assert item["call_id"] == open_item["call_id"] != item["id"]
            done.append(item)
            open_item = None
        else:
            assert data["item_id"] == open_item["id"]
    assert open_item is None, "an item left open"
    final = events[-1][1]["response"]
    ids = [item["id"] for item in done]
    assert len(set(ids)) == len(ids), "item ids are unique"
    assert [item["id"] for item in final["output"]] == ids
    assert final["output"] == done
    return final


def text_deltas(events: list[tuple[str, dict[str, Any]]]) -> str:
    return "".join(d["delta"] for k, d in events if k == "response.output_text.delta")
