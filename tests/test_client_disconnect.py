"""A client that leaves cancels its exchange at once: the upstream request is closed even while
the upstream is silent (before its first byte, or between chunks), and the record says the
client left. Without it the gateway would wait for the upstream's answer or its timeout."""

from __future__ import annotations

import json
import socket
import sqlite3
import time
from urllib.parse import urlsplit

import pytest

from tests.scenarios import Answer, script_for
from tests.upstream import Script

STALL = 30.0  # far beyond anything the test waits for


def leave_after(stack, body: dict, wait: float, policy: str = "withhold") -> float:
    """Send the request, read what arrives for `wait` seconds, then close the socket."""
    url = urlsplit(stack.urls[policy])
    data = json.dumps(body).encode()
    with socket.create_connection((url.hostname, url.port), timeout=5) as sock:
        sock.sendall(
            b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            + f"Content-Length: {len(data)}\r\n\r\n".encode()
            + data
        )
        sock.settimeout(wait)
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            try:
                if not sock.recv(65536):
                    break
            except TimeoutError:
                break
    return time.monotonic()


def wait_for(condition, timeout: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.02)
    return False


def record_of(stack, model: str) -> tuple | None:
    with sqlite3.connect(stack.audit_db()) as db:
        return db.execute(
            "SELECT ended_by, client_aborted, http_status FROM audit_records WHERE model = ?",
            (model,),
        ).fetchone()


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
def test_leaving_before_the_first_byte_closes_the_upstream_request(
    stack, upstream, unique_model, stream
):
    model = unique_model("oa")
    script = script_for("openai", Answer(text="late"), model, stream)
    script.stall = STALL
    upstream.script(model, script)
    body = {"model": model, "messages": [{"role": "user", "content": "hi"}], "stream": stream}

    left = leave_after(stack, body, wait=0.5)

    assert wait_for(lambda: model in upstream.closed), "the upstream request stayed open"
    assert upstream.closed[model] - left < 2.0  # at once, not at the end of the stall
    assert wait_for(lambda: record_of(stack, model) is not None)
    ended_by, aborted, status = record_of(stack, model)
    assert (ended_by, aborted, status) == ("client", 1, 499)


def test_leaving_while_the_upstream_is_silent_mid_stream(stack, upstream, unique_model):
    model = unique_model("an")
    base = script_for("anthropic", Answer(text="first words, then a long silence"), model, True)
    upstream.script(model, Script(chunks=base.chunks, delay=STALL))  # silent after each chunk
    body = {"model": model, "messages": [{"role": "user", "content": "hi"}], "stream": True}

    left = leave_after(stack, body, wait=0.8)

    assert wait_for(lambda: model in upstream.closed), "the upstream request stayed open"
    assert upstream.closed[model] - left < 2.0
    assert wait_for(lambda: record_of(stack, model) is not None)
    ended_by, aborted, status = record_of(stack, model)
    # The stream had started: the record keeps the 200 the client got, not 499.
    assert (ended_by, aborted, status) == ("client", 1, 200)
