"""`[limits]`: concurrency (overall and per key), body and header sizes, the bound on client-chosen
metric labels, and bounded buffering toward a client that stops reading.

Over a concurrency limit a request gets 429 in its client's format with `retry-after: 1`, nothing
goes upstream, and it is one audit record; the place frees as the exchange ends.
"""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any
from urllib.parse import urlsplit

import anthropic
import openai
import orjson
import pytest
from aiohttp import web

from tests.access_util import (
    audit_rows,
    key_table,
    metric_samples,
    new_key,
    payload,
    post,
    request,
    request_id,
    serve_keyed,
    wait_for,
)
from tests.conftest import Stack
from tests.scenarios import Answer, script_for

STALL = 1.5  # seconds the first exchange holds its place


def slow(upstream: Any, unique_model: Any, prefix: str = "oa", stall: float = STALL) -> str:
    model = unique_model(prefix)
    wire = "openai" if prefix == "oa" else "anthropic"
    upstream.script(model, script_for(wire, Answer(text="late"), model, False, stall=stall))
    return model


def quick(upstream: Any, unique_model: Any, prefix: str = "oa") -> str:
    model = unique_model(prefix)
    wire = "openai" if prefix == "oa" else "anthropic"
    upstream.script(model, script_for(wire, Answer(text="hello"), model, False))
    return model


def in_flight(upstream: Any, model: str) -> bool:
    return bool(upstream.received.get(model))


def test_over_max_concurrent_is_429_with_retry_after_1(stack, upstream, unique_model):
    name, url = serve_keyed(stack, "conc", limits={"max_concurrent": 1})
    held = slow(upstream, unique_model)
    refused = quick(upstream, unique_model, "an")

    with ThreadPoolExecutor(1) as pool:
        first = pool.submit(post, url, "openai", held)
        assert wait_for(lambda: in_flight(upstream, held)), "the first exchange never started"
        client = anthropic.Anthropic(base_url=url, api_key="unused", max_retries=0)
        with pytest.raises(anthropic.RateLimitError) as err:
            client.messages.create(
                model=refused, max_tokens=64, messages=[{"role": "user", "content": "hi"}]
            )
        chat = post(url, "openai", refused)
        assert first.result().status == 200

    assert err.value.response.headers["retry-after"] == "1"
    assert err.value.body["error"]["type"] == "rate_limit_error"
    assert chat.status == 429
    assert chat.headers["retry-after"] == "1"
    assert (chat.json["error"]["type"], chat.json["error"]["code"]) == (
        "requests",
        "rate_limit_exceeded",
    )
    assert upstream.received[refused] == []  # nothing went upstream
    rows = audit_rows(stack, name, ids=[request_id(err.value), request_id(chat)])
    assert [(r["http_status"], r["error_class"]) for r in rows] == [(429, "RateLimited")] * 2
    # The place is free again once the exchange ended.
    assert post(url, "openai", refused).status == 200


def test_max_concurrent_per_key_counts_each_key_apart(stack, upstream, unique_model):
    busy, other = new_key("busy"), new_key("other")
    keys = [key_table("busy", busy), key_table("other", other)]
    name, url = serve_keyed(stack, "perkey", keys=keys, limits={"max_concurrent_per_key": 1})
    held = slow(upstream, unique_model)
    model = quick(upstream, unique_model)

    with ThreadPoolExecutor(1) as pool:
        first = pool.submit(post, url, "openai", held, {"authorization": f"Bearer {busy}"})
        assert wait_for(lambda: in_flight(upstream, held))
        with pytest.raises(openai.RateLimitError) as err:
            openai.OpenAI(
                base_url=url + "/v1", api_key=busy, max_retries=0
            ).chat.completions.create(model=model, messages=[{"role": "user", "content": "hi"}])
        served = post(url, "openai", model, {"authorization": f"Bearer {other}"})
        assert first.result().status == 200

    assert err.value.response.headers["retry-after"] == "1"
    assert "busy" in err.value.body["message"]
    assert served.status == 200  # another key's exchanges are not counted against it
    (row,) = audit_rows(stack, name, ids=[request_id(err.value)])
    assert (row["http_status"], row["key_name"]) == (429, "busy")
    assert len(upstream.received[model]) == 1
    assert post(url, "openai", model, {"authorization": f"Bearer {busy}"}).status == 200


def test_max_body_bytes_is_configurable(stack, upstream, unique_model):
    _, url = serve_keyed(stack, "body", limits={"max_body_bytes": "2KiB"})
    model = quick(upstream, unique_model)
    small = payload("openai", model)
    big = {**small, "messages": [{"role": "user", "content": "x" * 4096}]}

    assert request(url, "POST", "/v1/chat/completions", body=small).status == 200
    reply = request(url, "POST", "/v1/chat/completions", body=big)

    assert reply.status == 413
    assert reply.json["error"]["code"] == "request_too_large"
    assert "2048 bytes" in reply.json["error"]["message"]
    assert len(upstream.received[model]) == 1


def test_header_limits_are_configurable(stack, upstream, unique_model):
    _, url = serve_keyed(stack, "headers", limits={"max_header_bytes": 2048, "max_headers": 20})
    model = quick(upstream, unique_model)

    assert post(url, "openai", model, {"x-long": "y" * 1500}).status == 200
    assert post(url, "openai", model, {"x-long": "y" * 3000}).status == 431
    many = {f"x-h{i}": "v" for i in range(30)}
    assert post(url, "openai", model, many).status == 431


def test_client_chosen_model_labels_fold_into_other(stack, upstream, unique_model):
    name, url = serve_keyed(stack, "labels", limits={"metric_models": 3})
    models = [quick(upstream, unique_model) for _ in range(5)]
    for model in models:
        assert post(url, "openai", model).status == 200
    assert post(url, "openai", models[0]).status == 200  # a name already counted stays named
    audit_rows(stack, name, models[-1])

    samples = metric_samples(request(url, "GET", "/metrics").body.decode())
    counted = {dict(k)["model"]: v for k, v in samples["gateway_requests_total"].items()}
    assert counted == {models[0]: 2, models[1]: 1, models[2]: 1, "other": 2}


# --- a client that stops reading ----------------------------------------------------------------

FRAME = (
    b"data: "
    + orjson.dumps(
        {
            "id": "chatcmpl-big",
            "object": "chat.completion.chunk",
            "created": 1,
            "model": "big",
            "choices": [{"index": 0, "delta": {"content": "x" * 4000}, "finish_reason": None}],
        }
    )
    + b"\n\n"
)
TOTAL = 50 * 1024 * 1024


class BigUpstream:
    """Streams TOTAL bytes of Chat chunks, counting what its writes got out (each write waits
    for the socket to drain, so the count stops where the receiver stops reading)."""

    def __init__(self) -> None:
        self.sent = 0
        self.ended: str | None = None  # "complete" or "closed"
        self.done = threading.Event()

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_post("/v1/chat/completions", self.handle)
        return app

    async def handle(self, request: web.Request) -> web.StreamResponse:
        await request.read()
        response = web.StreamResponse(headers={"content-type": "text/event-stream"})
        await response.prepare(request)
        try:
            while self.sent < TOTAL:
                await response.write(FRAME)
                self.sent += len(FRAME)
            await response.write(b"data: [DONE]\n\n")
            self.ended = "complete"
        except (asyncio.CancelledError, ConnectionError):
            self.ended = "closed"
            raise
        finally:
            self.done.set()
        return response


def rss_bytes() -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


def test_a_client_that_stops_reading_holds_the_upstream_back(stack: Stack):
    """The gateway writes to the client only as fast as the client reads: the upstream's writes
    block once the socket buffers on the way are full, far short of the 50 MB it would send,
    and the gateway's memory does not grow by the stream. When the client closes, the exchange
    ends at once, its upstream request is closed, and its record says the client ended it."""
    big = BigUpstream()
    upstream_url = stack.run(stack._serve(big.app()))
    name, url = serve_keyed(
        stack,
        "slowclient",
        providers={"big": {"kind": "openai", "base_url": f"{upstream_url}/v1", "api_key": "k"}},
        routes=[{"match": "big-*", "provider": "big"}],
    )
    body = orjson.dumps(payload("openai", "big-stream", stream=True))
    where = urlsplit(url)
    rss_before = rss_bytes()
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 * 1024)
    sock.connect((where.hostname, where.port))
    try:
        sock.sendall(
            b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            + f"Content-Length: {len(body)}\r\n\r\n".encode()
            + body
        )
        # Never read: the upstream's count climbs until the buffers are full, then stops.
        assert wait_for(lambda: big.sent > 0), "the upstream never started"
        previous = -1
        deadline = time.monotonic() + 20
        while big.sent != previous and time.monotonic() < deadline:
            previous = big.sent
            time.sleep(1.0)
        stalled = big.sent
        time.sleep(1.0)
        assert big.sent == stalled, "the upstream kept sending to a client that reads nothing"
        assert stalled < TOTAL * 0.6, f"{stalled} of {TOTAL} bytes went out: not held back"
        assert not big.done.is_set()
        assert rss_bytes() - rss_before < 40 * 1024 * 1024
    finally:
        sock.close()

    assert big.done.wait(5), "the upstream request stayed open after the client left"
    assert big.ended == "closed"
    (row,) = audit_rows(stack, name, "big-stream")
    assert (row["ended_by"], row["client_aborted"]) == ("client", 1)


def test_without_keys_or_limits_the_exchange_has_no_access_checks(stack):
    """The hot path of a gateway that configures none of this: no AccessControl at all."""
    from gateway.app import GATEWAY

    name, _ = serve_keyed(stack, "plain")
    gateway = stack.apps[name][GATEWAY]

    assert gateway.access is None
    assert gateway.observer.settle is None
