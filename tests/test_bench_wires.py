"""The bench's fake upstream speaks each wire well enough for the gateway and the official SDKs.

Its answers are read three ways: by the gateway's own decoders (framing, stream decoder and
aggregator, whole-body decoder: what the gateway does with them), by the real SDKs against the
upstream running as its own process on 127.0.0.1 (openai for Chat and Responses, anthropic for
Messages, botocore's bedrock-runtime client for Converse and ConverseStream), and through a
gateway built from the bench's generated configuration, once per format. Knobs chosen by model
name (chunks, pacing, held streams) are checked on the bytes.
"""

from __future__ import annotations

import socket
import time
import tomllib
from collections.abc import Iterator
from pathlib import Path

import anthropic
import openai
import orjson
import pytest
from aiohttp.test_utils import TestClient, TestServer
from botocore.session import get_session

from gateway.app import build_app
from gateway.events import StopReason
from gateway.formats.registry import wire_for
from gateway.normalize.aggregate import AggregatedResponse, ChunkAggregator
from gateway.settings import parse_settings
from gateway_bench.children import Child, Children
from gateway_bench.gateway_config import BEDROCK_ENV, render
from gateway_bench.plan import FORMATS
from gateway_bench.scenario import Scenario, words
from gateway_bench.upstream import prepare
from gateway_bench.wires import WIRES

TEXT = "".join(words(5))  # "Hello w1 w2 w3 w4"


def decode_stream(wire_name: str, writes: list[bytes]) -> AggregatedResponse:
    """The writes as the gateway reads them: framing, the wire's decoder, the aggregator."""
    wire = wire_for(wire_name)
    framing, decoder, aggregator = wire.framing(), wire.stream_decoder(), ChunkAggregator()
    body = b"".join(writes)
    frames = framing.feed(body[:7]) + framing.feed(body[7:]) + framing.close()
    for frame in frames:
        for event in decoder.decode(frame)[1]:
            aggregator.handle(event)
    for event in decoder.eof():
        aggregator.handle(event)
    return aggregator.final()


def decode_whole(wire_name: str, body: bytes) -> AggregatedResponse:
    aggregator = ChunkAggregator()
    for event in wire_for(wire_name).body_events(orjson.loads(body)):
        aggregator.handle(event)
    return aggregator.final()


@pytest.mark.parametrize("wire_name", list(WIRES))
def test_the_gateways_decoders_read_every_wires_stream(wire_name):
    wire = WIRES[wire_name]
    result = decode_stream(wire_name, wire.stream("bench-c5", Scenario(5)))
    assert result.text == TEXT
    assert result.stop_reason is StopReason.STOP
    assert result.complete and result.error is None
    assert result.usage.output_tokens == 5


@pytest.mark.parametrize("wire_name", list(WIRES))
def test_the_gateways_decoders_read_every_wires_whole_answer(wire_name):
    wire = WIRES[wire_name]
    result = decode_whole(wire_name, wire.whole("bench-c5", Scenario(5)))
    assert result.text == TEXT
    assert result.stop_reason is StopReason.STOP
    assert result.usage.output_tokens == 5


@pytest.mark.parametrize("wire_name", list(WIRES))
def test_each_wire_says_its_end_with_its_marker(wire_name):
    wire = WIRES[wire_name]
    writes = wire.stream("m", Scenario(3))
    assert wire.terminator in b"".join(writes[len(writes) // 2 :])
    assert wire.terminator not in b"".join(writes[: len(writes) // 2])
    assert wire.ended in wire.whole("m", Scenario(3))


def test_scenarios_are_read_from_the_model_name():
    assert Scenario.parse("bench") == Scenario(20, None, False)
    assert Scenario.parse("xbench-c200-p1") == Scenario(200, 1.0, False)
    assert Scenario.parse("hbench-c20-hold") == Scenario(20, None, True)
    assert Scenario.parse("fake-stop-p0.5") == Scenario(20, 0.5, False)
    assert Scenario.parse("claude-3-x-c2000") == Scenario(2000, None, False)
    assert Scenario.parse(Scenario(7, 2.0, True).model("abench")) == Scenario(7, 2.0, True)


def test_a_burst_is_one_write_and_a_paced_stream_one_write_per_event():
    wire = WIRES["openai"]
    events = len(wire.stream("m", Scenario(5)))
    assert len(prepare(wire, "bench-c5", True).writes) == 1
    paced = prepare(wire, "bench-c5-p2", True)
    assert len(paced.writes) == events and paced.pace_s == pytest.approx(0.002)
    assert paced.writes[-1].endswith(b"0\r\n\r\n")  # the chunked body's end, on the last one
    held = prepare(wire, "bench-c5-hold", True)
    assert held.hold and len(held.writes) == 1 and not held.writes[0].endswith(b"0\r\n\r\n")


# --- the upstream process, read by the official SDKs -----------------------------------------


@pytest.fixture(scope="module")
def upstream() -> Iterator[Child]:
    with Children() as children:
        yield children.upstream()


def test_openai_sdk_reads_chat_completions(upstream):
    client = openai.OpenAI(base_url=upstream.url + "/v1", api_key="x", max_retries=0)
    messages = [{"role": "user", "content": "hi"}]
    reply = client.chat.completions.create(model="bench-c5", messages=messages)
    assert reply.choices[0].message.content == TEXT
    assert reply.choices[0].finish_reason == "stop"
    stream = client.chat.completions.create(model="bench-c5-p1", messages=messages, stream=True)
    chunks = list(stream)
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == TEXT
    with client.chat.completions.stream(model="bench-c5", messages=messages) as accumulated:
        final = accumulated.get_final_completion()
    assert final.choices[0].message.content == TEXT
    assert final.usage is not None and final.usage.completion_tokens == 5


def test_openai_sdk_reads_responses(upstream):
    client = openai.OpenAI(base_url=upstream.url + "/v1", api_key="x", max_retries=0)
    reply = client.responses.create(model="rbench-c5", input="hi")
    assert reply.output_text == TEXT and reply.status == "completed"
    with client.responses.stream(model="rbench-c5-p1", input="hi") as stream:
        final = stream.get_final_response()
    assert final.output_text == TEXT
    assert final.usage is not None and final.usage.output_tokens == 5


def test_anthropic_sdk_reads_messages(upstream):
    client = anthropic.Anthropic(base_url=upstream.url, api_key="x", max_retries=0)
    messages = [{"role": "user", "content": "hi"}]
    reply = client.messages.create(model="xbench-c5", max_tokens=10, messages=messages)
    assert reply.content[0].text == TEXT and reply.stop_reason == "end_turn"
    with client.messages.stream(model="xbench-c5-p1", max_tokens=10, messages=messages) as s:
        final = s.get_final_message()
    assert final.content[0].text == TEXT and final.stop_reason == "end_turn"
    assert final.usage.output_tokens == 5


def test_botocore_reads_converse_and_its_event_stream(upstream):
    client = get_session().create_client(
        "bedrock-runtime",
        region_name="us-east-1",
        endpoint_url=upstream.url,
        aws_access_key_id="AKIDEXAMPLE",
        aws_secret_access_key="secret",
    )
    messages = [{"role": "user", "content": [{"text": "hi"}]}]
    reply = client.converse(modelId="bbench-c5", messages=messages)
    assert reply["output"]["message"]["content"][0]["text"] == TEXT
    assert reply["stopReason"] == "end_turn"
    events = list(client.converse_stream(modelId="bbench-c5-p1", messages=messages)["stream"])
    deltas = [e["contentBlockDelta"] for e in events if "contentBlockDelta" in e]
    text = "".join(delta["delta"]["text"] for delta in deltas)
    assert text == TEXT
    assert [name for e in events for name in e][-2:] == ["messageStop", "metadata"]
    assert events[-1]["metadata"]["usage"]["outputTokens"] == 5


def test_gemini_and_unknown_paths_over_http(upstream):
    with socket.create_connection(("127.0.0.1", upstream.port)) as sock:
        path = WIRES["gemini"].request_path("gbench-c5", True)
        sock.sendall(request(path, b"{}") + request("/nowhere", b"{}"))
        received = read_until(sock, b"404 Not Found")
    head, _, body = received.partition(b"\r\n\r\n")
    assert b"200 OK" in head and b"text/event-stream" in head
    assert decode_stream("gemini", [dechunk(body.partition(b"HTTP/1.1 404")[0])]).text == TEXT


def test_a_held_stream_sends_its_first_event_and_then_waits(upstream):
    with socket.create_connection(("127.0.0.1", upstream.port)) as sock:
        body = WIRES["openai"].body("hbench-hold", True, 0)
        sock.sendall(request("/v1/chat/completions", body))
        first = read_until(sock, b"\r\n\r\n", b'"role":"assistant"')
        sock.settimeout(0.3)
        with pytest.raises(TimeoutError):
            first += sock.recv(65536)
    assert first.count(b"data: ") == 1


def request(path: str, body: bytes) -> bytes:
    head = f"POST {path} HTTP/1.1\r\nhost: x\r\ncontent-length: {len(body)}\r\n\r\n"
    return head.encode() + body


def read_until(sock: socket.socket, *markers: bytes) -> bytes:
    data = b""
    deadline = time.monotonic() + 10
    while not all(m in data for m in markers) and time.monotonic() < deadline:
        data += sock.recv(65536)
    return data


def dechunk(body: bytes) -> bytes:
    out, rest = b"", body
    while rest:
        size, _, rest = rest.partition(b"\r\n")
        n = int(size, 16)
        out, rest = out + rest[:n], rest[n + 2 :]
        if n == 0:
            break
    return out


# --- through a gateway on the bench's own configuration ----------------------------------------


@pytest.fixture
async def bench_gateway(upstream, tmp_path: Path, monkeypatch) -> TestClient:
    for name, value in BEDROCK_ENV.items():
        monkeypatch.setenv(name, value)
    config = tomllib.loads(render(upstream.port, tmp_path / "audit.db"))
    app = build_app(parse_settings(config), env={})
    async with TestClient(TestServer(app)) as client:
        yield client


@pytest.mark.parametrize("stream", [False, True])
async def test_every_format_answers_through_the_gateway(bench_gateway, stream):
    for row in FORMATS.values():
        wire = WIRES[row.client_wire]
        model = Scenario(5).model(row.prefix)
        response = await bench_gateway.post(
            wire.request_path(model, stream),
            data=wire.body(model, stream, 2000),
            headers={"content-type": "application/json", **wire.headers},
        )
        body = await response.read()
        assert response.status == 200, (row.name, body[:300])
        assert (wire.terminator if stream else wire.ended) in body, row.name
