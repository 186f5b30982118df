"""Shared kit of the access tests: gateway keys, gateways with keys on the test stack, raw HTTP,
audit rows, /metrics samples, and the Redis server of the shared-state tests.

Redis runs from `GATEWAY_TEST_REDIS_URL` (set by sourcing .ci/redis.sh). Without it the tests that
need it are skipped, except under CI=true, where they fail: CI must run them.
"""

from __future__ import annotations

import hashlib
import http.client
import os
import sqlite3
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import orjson
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.conftest import Stack, skip_without, stack_settings

REDIS_ENV = "GATEWAY_TEST_REDIS_URL"
USER = [{"role": "user", "content": "hi"}]
PATHS = {
    "openai": "/v1/chat/completions",
    "anthropic": "/v1/messages",
    "responses": "/v1/responses",
}


def redis_url() -> str:
    """The test server's URL, or skip (fail under CI=true) when none is configured."""
    url = os.environ.get(REDIS_ENV)
    if url:
        return url
    if os.environ.get("CI") == "true":
        pytest.fail(f"CI=true but {REDIS_ENV} is not set: .ci/run must `source .ci/redis.sh`")
    skip_without("redis", f"{REDIS_ENV} is not set")


def new_key(label: str) -> str:
    return f"gw-test-{label}-SECRET-{uuid.uuid4().hex}"


def sha256(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


def key_table(name: str, key: str, **limits: Any) -> dict[str, Any]:
    return {"name": name, "sha256": sha256(key), **limits}


def keyless_providers(stack: Stack) -> dict[str, Any]:
    """The stack's providers, plus two that have no key of their own (`open-*` on the OpenAI
    wire, `open-an-*` on Anthropic's): without gateway keys, the client's credential would be
    forwarded to them."""
    base = stack_settings(stack.upstream_url, "withhold", "http://127.0.0.1:9/v1")
    providers = dict(base["providers"])
    providers["open"] = {"kind": "openai", "base_url": f"{stack.upstream_url}/v1", "timeout": 5}
    providers["open_an"] = {"kind": "anthropic", "base_url": stack.upstream_url, "timeout": 5}
    routes = [
        {"match": "open-an-*", "provider": "open_an"},
        {"match": "open-*", "provider": "open"},
        *base["routes"],
    ]
    return {"providers": providers, "routes": routes}


def serve_keyed(stack: Stack, label: str, **tables: Any) -> tuple[str, str]:
    """A gateway with `tables` ([[keys]], [admin], [limits], [state]) on the stack: its name
    (for `stack.audit_db`) and URL."""
    name = f"{label}-{uuid.uuid4().hex[:8]}"
    return name, stack.add_gateway(name, {**keyless_providers(stack), **tables})


@dataclass
class Reply:
    status: int
    headers: dict[str, str]
    body: bytes

    @property
    def json(self) -> Any:
        return orjson.loads(self.body)


def request(
    base: str,
    method: str,
    path: str,
    headers: dict[str, str] | None = None,
    body: dict[str, Any] | None = None,
) -> Reply:
    url = urlsplit(base)
    conn = http.client.HTTPConnection(url.hostname, url.port, timeout=15)
    sent = {"content-type": "application/json", **(headers or {})}
    try:
        conn.request(method, path, body=None if body is None else orjson.dumps(body), headers=sent)
        resp = conn.getresponse()
        data = resp.read()
        return Reply(resp.status, {k.lower(): v for k, v in resp.getheaders()}, data)
    finally:
        conn.close()


def payload(client: str, model: str, stream: bool = False) -> dict[str, Any]:
    if client == "responses":
        return {"model": model, "input": "hi", "stream": stream}
    body: dict[str, Any] = {"model": model, "messages": USER, "stream": stream}
    if client == "anthropic":
        body["max_tokens"] = 64
    return body


def post(base: str, client: str, model: str, headers: dict[str, str] | None = None) -> Reply:
    sent = {"anthropic-version": "2023-06-01"} if client == "anthropic" else {}
    return request(base, "POST", PATHS[client], {**sent, **(headers or {})}, payload(client, model))


def wait_for(condition: Callable[[], Any], timeout: float = 5.0) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.02)
    return condition()


def audit_rows(
    stack: Stack, name: str, model: str | None = None, ids: list[str] | None = None
) -> list[dict[str, Any]]:
    """The audit rows on gateway `name` of `model`, or of the request ids `ids` (a request
    refused before its body was read has no model), once as many as expected are written: one
    per id, else at least one. Sorted by start time."""

    def rows() -> list[dict[str, Any]]:
        where, args = (
            ("model = ?", [model])
            if ids is None
            else (
                f"id IN ({','.join('?' * len(ids))})",
                list(ids),
            )
        )
        with sqlite3.connect(stack.audit_db(name)) as db:
            db.row_factory = sqlite3.Row
            try:
                found = db.execute(
                    f"SELECT * FROM audit_records WHERE {where} ORDER BY started_at", args
                ).fetchall()
            except sqlite3.OperationalError:  # the store is not created yet
                return []
        return [dict(row) for row in found]

    expected = 1 if ids is None else len(ids)
    found = wait_for(lambda: len(rows()) >= expected and rows())
    assert found and len(found) >= expected, f"{len(found or [])} records, not {expected}"
    if ids is not None:
        assert len(found) == expected
    return list(found)


def request_id(err: Any) -> str:
    """The request id of an SDK's error, or of a Reply."""
    headers = err.headers if isinstance(err, Reply) else err.response.headers
    return str(headers["x-request-id"])


Samples = dict[str, dict[tuple[tuple[str, str], ...], float]]


def metric_samples(text: str) -> Samples:
    samples: Samples = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            labels = tuple(sorted(sample.labels.items()))
            samples.setdefault(sample.name, {})[labels] = sample.value
    return samples


def labels(**pairs: str) -> tuple[tuple[str, str], ...]:
    return tuple(sorted(pairs.items()))
