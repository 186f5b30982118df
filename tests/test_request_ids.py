"""Every answer carries a request id, and a request the gateway refused before routing is named
the same way by the response, the audit record, the report and /metrics: provider `-` and stop
reason `none` (never `unknown`, which is a stop value the upstream sent)."""

from __future__ import annotations

import asyncio
import http.client
import sqlite3
import time
from typing import Any
from urllib.parse import urlsplit

import orjson
import pytest
from prometheus_client.parser import text_string_to_metric_families

from gateway.audit.record import NO_PROVIDER, NO_STOP_REASON
from gateway.audit.report import summarize
from gateway.audit.sqlite_store import SQLiteStore

ANTHROPIC = {"anthropic-version": "2023-06-01"}


def request(stack: Any, method: str, path: str, body: bytes, headers: dict[str, str]) -> Any:
    url = urlsplit(stack.urls["withhold"])
    conn = http.client.HTTPConnection(url.hostname, url.port, timeout=10)
    try:
        conn.request(method, path, body, {"content-type": "application/json", **headers})
        response = conn.getresponse()
        return response.status, response.getheader("x-request-id"), response.read()
    finally:
        conn.close()


@pytest.mark.parametrize(
    ("path", "headers", "anthropic"),
    [
        ("/v1/nothing", {}, False),
        ("/v1/nothing", ANTHROPIC, True),
        ("/v1/messages/nothing", {}, True),
    ],
)
def test_an_unknown_endpoint_is_answered_with_a_request_id(stack, path, headers, anthropic):
    status, request_id, raw = request(stack, "POST", path, b"{}", headers)
    assert status == 404
    assert request_id and len(request_id) == 24
    body = orjson.loads(raw)
    if anthropic:
        assert body["type"] == "error" and body["request_id"] == request_id
    else:
        assert body["error"]["code"] == "not_found"


def fetch_record(db: Any, request_id: str) -> Any:
    async def fetch() -> Any:
        store = SQLiteStore(str(db))
        await store.open()
        try:
            return [r for r in await store.fetch() if r.id == request_id]
        finally:
            await store.close()

    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        with sqlite3.connect(db) as conn:
            row = conn.execute("select 1 from audit_records where id = ?", (request_id,))
            if row.fetchone() is not None:
                return asyncio.run(fetch())[0]
        time.sleep(0.05)
    raise AssertionError(f"no audit record {request_id}")


def counters(stack: Any) -> list[dict[str, str]]:
    url = urlsplit(stack.urls["withhold"])
    conn = http.client.HTTPConnection(url.hostname, url.port, timeout=10)
    conn.request("GET", "/metrics")
    text = conn.getresponse().read().decode()
    conn.close()
    (family,) = [f for f in text_string_to_metric_families(text) if f.name == "gateway_requests"]
    return [s.labels for s in family.samples if s.name == "gateway_requests_total"]


@pytest.mark.parametrize("client", ["openai", "anthropic"])
def test_a_request_refused_before_routing_is_named_one_way_everywhere(stack, client):
    path = "/v1/chat/completions" if client == "openai" else "/v1/messages"
    status, request_id, raw = request(stack, "POST", path, b"{not json", {})
    assert status == 400 and request_id
    if client == "anthropic":
        assert orjson.loads(raw)["request_id"] == request_id

    record = fetch_record(stack.audit_db(), request_id)
    assert (record.provider, record.stop_reason, record.error_class) == (None, None, "InvalidJSON")
    (row,) = summarize([record], "provider")
    assert row.group == NO_PROVIDER == "-"
    assert row.stop_reasons[NO_STOP_REASON] == 1 and row.stop_reasons["unknown"] == 0
    labels = {"provider": NO_PROVIDER, "stop_reason": NO_STOP_REASON, "client_format": client}
    assert any(labels.items() <= sample.items() for sample in counters(stack))
