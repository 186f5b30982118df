"""Retries, fallbacks, load balancing, circuits and timeouts, through the real SDKs.

Every fault ends one of two ways: recovered before any byte reached the client (the upstream saw
each attempt, the record lists them), or reported in the client's own error format and audited.
The gateways here run on a loopback upstream scripted per model (tests/upstream.py); the SDKs
are told not to retry, so every retry seen is the gateway's.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
import uuid
from typing import Any

import anthropic
import openai
import orjson
import pytest

from gateway.app import build_app
from gateway.settings import parse_settings
from tests.access_util import redis_url
from tests.conftest import Stack, free_port
from tests.scenarios import Answer, script_for
from tests.upstream import Script

FAST_RETRY = {"attempts": 3, "backoff": 0.01, "max_backoff": 0.05, "max_retry_after": 2}
MESSAGES = [{"role": "user", "content": "hi"}]


def error_body(status: int, wire: str) -> bytes:
    if wire == "anthropic":
        kind = {529: "overloaded_error", 429: "rate_limit_error"}.get(status, "api_error")
        return orjson.dumps({"type": "error", "error": {"type": kind, "message": f"boom {status}"}})
    return orjson.dumps({"error": {"message": f"boom {status}", "type": "server_error"}})


def failing(status: int, wire: str = "openai", **headers: str) -> Script:
    return Script(status=status, body=error_body(status, wire), headers=headers)


def settings(upstream_url: str, dead_url: str, store: str, circuit: dict[str, Any]) -> dict:
    def openai_provider(key: str, **extra: Any) -> dict[str, Any]:
        return {
            "kind": "openai",
            "base_url": f"{upstream_url}/v1",
            "api_key": key,
            "retry": FAST_RETRY,
            **extra,
        }

    return {
        "providers": {
            "primary": openai_provider("sk-primary"),
            "second": openai_provider("sk-second"),
            "quick": openai_provider(
                "sk-quick", first_byte_timeout=0.4, idle_timeout=0.4, total_timeout=3
            ),
            "claude": {
                "kind": "anthropic",
                "base_url": upstream_url,
                "api_key": "sk-claude",
                "retry": FAST_RETRY,
            },
            "dead": {"kind": "openai", "base_url": dead_url, "api_key": "sk-dead"},
        },
        "routes": [
            {"match": "retry-*", "provider": "primary"},
            {"match": "quick-*", "provider": "quick"},
            {
                "match": "deadline-*",
                "provider": "primary",
                "retry": {"attempts": 50, "backoff": 0.1, "max_backoff": 0.1, "deadline": 0.5},
            },
            {
                "match": "fb-*",
                "targets": [{"provider": "dead"}, {"provider": "primary", "weight": 0}],
            },
            {
                "match": "xw-*",
                "targets": [{"provider": "claude"}, {"provider": "primary", "weight": 0}],
            },
            {
                "match": "lb-*",
                "targets": [
                    {"provider": "primary", "weight": 3},
                    {"provider": "second", "weight": 1},
                    {"provider": "claude", "weight": 0},
                ],
            },
            {
                "match": "least-*",
                "balance": "least_in_flight",
                "targets": [{"provider": "primary"}, {"provider": "second"}],
            },
            {"match": "cb-*", "provider": "second"},
        ],
        "audit": {"store": store},
        "circuit": circuit,
    }


class ResilienceStack(Stack):
    """One gateway without circuit breaking ("main") and one whose circuits open after two
    failures for half a second ("circuit"), on one scripted upstream."""

    async def _start(self) -> None:
        self.upstream_url = await self._serve(self.upstream.app())
        dead = f"http://127.0.0.1:{free_port()}/v1"
        for name, circuit in (
            ("main", {"failures": 0}),
            ("circuit", {"failures": 2, "cooldown": 0.5}),
        ):
            store = f"sqlite:///{self.audit_dir / f'audit-{name}.db'}"
            config = parse_settings(settings(self.upstream_url, dead, store, circuit))
            self.urls[name] = await self._serve(build_app(config, env={}))


@pytest.fixture(scope="module")
def rstack(tmp_path_factory: pytest.TempPathFactory):
    s = ResilienceStack(tmp_path_factory.mktemp("resilience"))
    s.start()
    yield s
    s.stop()


@pytest.fixture
def up(rstack):
    return rstack.upstream


def oa(rstack, name: str = "main") -> openai.OpenAI:
    return openai.OpenAI(base_url=rstack.urls[name] + "/v1", api_key="sk-client", max_retries=0)


def an(rstack, name: str = "main") -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=rstack.urls[name], api_key="sk-client", max_retries=0)


def record(rstack, model: str, name: str = "main", timeout: float = 5.0) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while True:
        with sqlite3.connect(rstack.audit_db(name)) as db:
            db.row_factory = sqlite3.Row
            row = db.execute("SELECT * FROM audit_records WHERE model = ?", (model,)).fetchone()
        if row is not None:
            out = dict(row)
            out["attempts"] = json.loads(out["attempts"])
            return out
        if time.monotonic() > deadline:
            raise AssertionError(f"no audit record for {model}")
        time.sleep(0.02)


def get(url: str) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=10) as reply:
            return reply.status, reply.read()
    except urllib.error.HTTPError as err:
        return err.code, err.read()


def get_json(url: str) -> Any:
    return json.loads(get(url)[1])


def get_text(url: str) -> str:
    return get(url)[1].decode()


def post_raw(url: str, body: dict[str, Any]) -> str:
    request = urllib.request.Request(
        url, data=json.dumps(body).encode(), headers={"content-type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=10) as reply:
        return reply.read().decode()


def outcomes(rec: dict[str, Any]) -> list[tuple[str, str, int | None]]:
    return [(a["provider"], a["outcome"], a.get("status")) for a in rec["attempts"]]


def answer(wire: str, model: str, stream: bool, text: str = "recovered") -> Script:
    return script_for(wire, Answer(text=text), model, stream)


def chat(client: openai.OpenAI, model: str, stream: bool) -> str:
    if not stream:
        reply = client.chat.completions.create(model=model, messages=MESSAGES)
        return reply.choices[0].message.content or ""
    parts = []
    for chunk in client.chat.completions.create(model=model, messages=MESSAGES, stream=True):
        if chunk.choices and chunk.choices[0].delta.content:
            parts.append(chunk.choices[0].delta.content)
    return "".join(parts)


STREAMS = pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])


# --- retries ------------------------------------------------------------------------------------


@STREAMS
@pytest.mark.parametrize("status", [408, 429, 500, 502, 503, 504, 529])
def test_a_retryable_status_is_retried_until_an_answer(rstack, up, unique_model, stream, status):
    model = unique_model("retry")
    up.script(model, failing(status), failing(status), answer("openai", model, stream))

    assert chat(oa(rstack), model, stream) == "recovered"

    assert len(up.received[model]) == 3
    rec = record(rstack, model)
    assert outcomes(rec) == [
        ("primary", "error_status", status),
        ("primary", "error_status", status),
        ("primary", "answered", 200),
    ]
    assert (rec["http_status"], rec["error_class"], rec["stop_reason"]) == (200, None, "stop")


@STREAMS
def test_attempts_are_bounded_and_the_last_error_reaches_the_client(
    rstack, up, unique_model, stream
):
    model = unique_model("retry")
    up.script(model, failing(503))

    with pytest.raises(openai.InternalServerError) as info:
        chat(oa(rstack), model, stream)

    assert info.value.status_code == 503
    assert len(up.received[model]) == 3  # attempts = 3
    rec = record(rstack, model)
    assert [a["outcome"] for a in rec["attempts"]] == ["error_status"] * 3
    assert (rec["http_status"], rec["error_class"]) == (503, "UpstreamStatusError")


@pytest.mark.parametrize("status", [400, 401, 403, 404, 422])
def test_a_status_that_says_the_request_is_wrong_is_not_retried(rstack, up, unique_model, status):
    model = unique_model("retry")
    up.script(model, failing(status), answer("openai", model, False))

    with pytest.raises(openai.APIStatusError) as info:
        chat(oa(rstack), model, False)

    assert info.value.status_code == status
    assert len(up.received[model]) == 1


def test_retry_after_is_waited_before_the_same_target_is_tried_again(rstack, up, unique_model):
    model = unique_model("retry")
    up.script(model, failing(429, **{"retry-after": "0.6"}), answer("openai", model, False))

    started = time.monotonic()
    assert chat(oa(rstack), model, False) == "recovered"

    assert time.monotonic() - started >= 0.6
    assert len(up.received[model]) == 2


def test_a_retry_after_beyond_the_cap_goes_to_the_client_at_once(rstack, up, unique_model):
    model = unique_model("retry")
    up.script(model, failing(429, **{"retry-after": "10"}), answer("openai", model, False))

    with pytest.raises(openai.RateLimitError) as info:
        chat(oa(rstack), model, False)

    assert info.value.response.headers["retry-after"] == "10"
    assert len(up.received[model]) == 1


def test_the_deadline_bounds_the_retries(rstack, up, unique_model):
    model = unique_model("deadline")
    up.script(model, failing(503))

    started = time.monotonic()
    with pytest.raises(openai.InternalServerError):
        chat(oa(rstack), model, False)
    took = time.monotonic() - started

    # 50 attempts allowed, up to 0.1 s apart, but none starts 0.5 s after the request came.
    tries = len(up.received[model])
    assert 2 <= tries < 50, tries
    assert took < 2.0, took


def test_nothing_is_retried_once_the_first_byte_reached_the_client(rstack, up, unique_model):
    model = unique_model("retry")
    broken = answer("openai", model, True, text="a long answer in several parts")
    broken.drop_after = 3
    up.script(model, broken, answer("openai", model, True))

    with pytest.raises(openai.APIError):
        chat(oa(rstack), model, True)

    assert len(up.received[model]) == 1
    rec = record(rstack, model)
    assert outcomes(rec) == [("primary", "broken", 200)]
    assert rec["truncated"] == 1


# --- timeouts -----------------------------------------------------------------------------------


@STREAMS
def test_a_stall_before_the_headers_is_a_first_byte_timeout_then_a_retry(
    rstack, up, unique_model, stream
):
    model = unique_model("quick")
    stalled = answer("openai", model, stream, text="late")
    stalled.stall = 5
    up.script(model, stalled, answer("openai", model, stream))

    assert chat(oa(rstack), model, stream) == "recovered"

    rec = record(rstack, model)
    assert rec["attempts"][0]["outcome"] == "timeout"
    assert rec["attempts"][0]["timeout"] == "first_byte"
    assert rec["attempts"][1]["outcome"] == "answered"
    assert rec["timeout"] is None  # the exchange itself did not time out


def test_every_attempt_timing_out_is_a_504_naming_the_timeout(rstack, up, unique_model):
    model = unique_model("quick")
    stalled = answer("openai", model, False, text="late")
    stalled.stall = 5
    up.script(model, stalled)

    with pytest.raises(openai.APIStatusError) as info:
        chat(oa(rstack), model, False)

    assert info.value.status_code == 504
    rec = record(rstack, model)
    assert (rec["http_status"], rec["timeout"], rec["error_class"]) == (
        504,
        "first_byte",
        "UpstreamTimeout",
    )
    assert [a["timeout"] for a in rec["attempts"]] == ["first_byte"] * 3


def test_an_idle_gap_mid_stream_ends_it_with_the_format_error_event(rstack, up, unique_model):
    model = unique_model("quick")
    slow = answer("anthropic", model, True, text="words then silence")
    slow.delay = 1.0  # each gap beyond the 0.4 s idle timeout
    up.script(model, slow)
    url = rstack.urls["main"] + "/v1/chat/completions"
    body = {"model": model, "messages": MESSAGES, "stream": True}

    raw = post_raw(url, body)

    assert len(up.received[model]) == 1  # bytes had reached the client: no retry
    last = [line for line in raw.splitlines() if line.startswith("data: ")][-1]
    assert last != "data: [DONE]"
    error = json.loads(last.removeprefix("data: "))["error"]
    assert error["type"] == "timeout_error" or "timeout" in json.dumps(error)
    rec = record(rstack, model)
    assert (rec["timeout"], rec["truncated"], rec["cut_reason"]) == (
        "idle",
        1,
        "upstream_timeout",
    )


def test_a_non_stream_body_that_stalls_mid_way_is_a_timeout_not_a_cut_answer(
    rstack, up, unique_model
):
    """Headers, then half the body, then silence: recorded as the timeout it was."""
    model = unique_model("quick")
    whole = answer("openai", model, False)
    assert whole.body is not None
    half = Script(chunks=[whole.body[:20]], delay=5, headers={"content-type": "application/json"})
    half.chunks.append(whole.body[20:])
    up.script(model, half)

    with pytest.raises(openai.APIStatusError) as info:
        chat(oa(rstack), model, False)

    assert info.value.status_code == 504
    rec = record(rstack, model)
    assert (rec["timeout"], rec["error_class"]) == ("idle", "UpstreamTimeout")
    assert (rec["stop_reason"], rec["truncated"]) == (None, 0)


# --- fallbacks and balance ----------------------------------------------------------------------


@STREAMS
def test_a_dead_target_falls_back_to_the_next(rstack, up, unique_model, stream):
    model = unique_model("fb")
    up.script(model, answer("openai", model, stream))

    assert chat(oa(rstack), model, stream) == "recovered"

    rec = record(rstack, model)
    assert [(a["provider"], a["outcome"]) for a in rec["attempts"]] == [
        ("dead", "unreachable"),
        ("primary", "answered"),
    ]
    assert rec["provider"] == "primary"


@STREAMS
def test_an_anthropic_client_is_answered_through_an_openai_wire_fallback(
    rstack, up, unique_model, stream
):
    model = unique_model("xw")
    up.script(model, failing(529, "anthropic"), answer("openai", model, stream, text="via openai"))
    client = an(rstack)

    if stream:
        with client.messages.stream(model=model, max_tokens=50, messages=MESSAGES) as events:
            message = events.get_final_message()
    else:
        message = client.messages.create(model=model, max_tokens=50, messages=MESSAGES)

    assert message.content[0].type == "text" and message.content[0].text == "via openai"
    assert message.stop_reason == "end_turn"
    assert [r.path for r in up.received[model]] == ["/v1/messages", "/v1/chat/completions"]
    rec = record(rstack, model)
    assert [(a["provider"], a["outcome"]) for a in rec["attempts"]] == [
        ("claude", "error_status"),
        ("primary", "answered"),
    ]


def test_traffic_spreads_by_weight_and_a_zero_weight_target_only_backs_up(rstack, up, unique_model):
    model = unique_model("lb")
    up.script(model, answer("openai", model, False))
    client = oa(rstack)

    for _ in range(200):
        chat(client, model, False)

    keys = [r.headers["Authorization"] for r in up.received[model]]
    share = keys.count("Bearer sk-primary") / len(keys)
    assert 0.6 <= share <= 0.9, share  # weight 3 of 4
    assert keys.count("Bearer sk-second") == len(keys) - keys.count("Bearer sk-primary")
    assert all(r.path == "/v1/chat/completions" for r in up.received[model])  # never claude


def test_least_in_flight_sends_the_next_request_to_the_idle_target(rstack, up, unique_model):
    busy, model = unique_model("least"), unique_model("least")
    held = answer("openai", busy, False, text="slow")
    held.stall = 1.5
    up.script(busy, held)
    up.script(model, answer("openai", model, False))
    client = oa(rstack)

    thread = threading.Thread(target=chat, args=(client, busy, False))
    thread.start()
    deadline = time.monotonic() + 5
    while not up.received[busy] and time.monotonic() < deadline:
        time.sleep(0.01)
    first = up.received[busy][0].headers["Authorization"]
    for _ in range(3):
        chat(client, model, False)
    thread.join()

    assert {r.headers["Authorization"] for r in up.received[model]} == (
        {"Bearer sk-primary", "Bearer sk-second"} - {first}
    )


# --- circuits -----------------------------------------------------------------------------------


def test_a_circuit_opens_after_repeated_failures_then_half_opens_and_closes(
    rstack, up, unique_model
):
    model = unique_model("cb")
    up.script(model, failing(500))
    client = oa(rstack, "circuit")
    base = rstack.urls["circuit"]

    for _ in range(2):  # 3 attempts each (retries at one target): the circuit opens at 2
        with pytest.raises(openai.InternalServerError):
            chat(client, model, False)
    sent = len(up.received[model])
    assert sent == 2

    with pytest.raises(openai.APIStatusError) as info:
        chat(client, model, False)
    assert info.value.status_code == 503
    assert info.value.response.headers["retry-after"] == "1"
    assert "circuit open" in info.value.message
    assert len(up.received[model]) == sent  # skipped: nothing sent upstream

    health = get_json(base + "/health")
    assert health["status"] == "unavailable" and "cb-*" in health["unavailable_routes"]
    assert health["targets"]["second/*"]["state"] == "open"
    metrics = get_text(base + "/metrics")
    assert 'gateway_circuit_state{target="second/*"} 2.0' in metrics
    rec = record(rstack, model, "circuit")  # the first record; the refused one is later
    assert rec["attempts"]

    time.sleep(0.6)  # the cool-down passes: one probe goes through, and closes the circuit
    up.script(model, answer("openai", model, False))
    assert chat(client, model, False) == "recovered"
    assert get_json(base + "/health")["targets"]["second/*"]["state"] == "closed"
    assert 'gateway_circuit_state{target="second/*"} 0.0' in get_text(base + "/metrics")


def test_metrics_count_attempts_retries_and_fallbacks(rstack, up, unique_model):
    model = unique_model("fb")
    up.script(model, answer("openai", model, False))
    before = get_text(rstack.urls["main"] + "/metrics")

    chat(oa(rstack), model, False)

    after = get_text(rstack.urls["main"] + "/metrics")

    def value(text: str, sample: str) -> float:
        for line in text.splitlines():
            if line.startswith(sample + " "):
                return float(line.split()[-1])
        return 0.0

    for sample, delta in (
        ('gateway_failed_attempts_total{outcome="unreachable",provider="dead"}', 1),
        ('gateway_fallback_exchanges_total{provider="primary"}', 1),
        ('gateway_retried_exchanges_total{answered="true",provider="primary"}', 1),
    ):
        assert value(after, sample) - value(before, sample) == delta, sample


def test_replicas_sharing_redis_share_an_open_circuit(rstack, up, unique_model):
    """Replica A's circuit opens after its failures; replica B, which saw none, learns it
    through Redis and skips the target too, without sending it anything."""
    url = redis_url()
    prefix = f"gw-test-{uuid.uuid4().hex[:10]}:"
    dead = f"http://127.0.0.1:{free_port()}/v1"
    urls = []
    for name in ("replica-a", "replica-b"):
        store = f"sqlite:///{rstack.audit_dir / f'audit-{name}.db'}"
        config = settings(rstack.upstream_url, dead, store, {"failures": 2, "cooldown": 4})
        config["state"] = {"redis": url, "prefix": prefix}
        urls.append(rstack.run(rstack._serve(build_app(parse_settings(config), env={}))))
    model = unique_model("cb")
    up.script(model, failing(500))
    client_a, client_b = (
        openai.OpenAI(base_url=u + "/v1", api_key="sk-client", max_retries=0) for u in urls
    )

    with pytest.raises(openai.InternalServerError):
        chat(client_a, model, False)  # two failed attempts: A's circuit opens
    sent = len(up.received[model])
    assert sent == 2

    deadline = time.monotonic() + 5  # B reads the shared circuits once a second
    while get_json(urls[1] + "/health")["targets"]["second/*"]["state"] != "open":
        assert time.monotonic() < deadline, "replica B never learned of the open circuit"
        time.sleep(0.1)
    with pytest.raises(openai.APIStatusError) as info:
        chat(client_b, model, False)
    assert info.value.status_code == 503 and "circuit open" in info.value.message
    assert len(up.received[model]) == sent  # B sent nothing: it never failed on its own


def test_gateway_audit_reports_retries_and_fallbacks(rstack, up, unique_model):
    model = unique_model("fb")
    up.script(model, answer("openai", model, False))
    chat(oa(rstack), model, False)
    record(rstack, model)  # written

    store = f"sqlite:///{rstack.audit_db('main')}"
    command = ["audit", "--store", store, "--by", "model", "--format", "json"]
    out = subprocess.run(
        [sys.executable, "-m", "gateway", *command],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    rows = {row["group"]: row for row in json.loads(out.stdout)}
    assert (rows[model]["retried"], rows[model]["fallbacks"]) == (1, 1)
