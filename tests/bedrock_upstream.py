"""A loopback AWS Bedrock upstream (Converse and ConverseStream), and an event-stream encoder.

The encoder is written here from the protocol, not taken from botocore (whose decoder the
gateway uses): prelude (total length, headers length, CRC32 of those 8 bytes), headers (name
length, name, type 7 = string, value length, value), payload, CRC32 of everything before it.

`BedrockUpstream` answers `POST /model/{modelId}/converse[-stream]` with the script registered
under the model id (URL-unquoted), records each request, and checks the Authorization header:
a SigV4 signature of the shape AWS requires, or the Bedrock API key as a bearer token.

    upstream.script(model, Script(chunks=[event_stream(stream_events(...))]))
"""

from __future__ import annotations

import binascii
import re
import struct
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import anthropic
import openai
import orjson
from aiohttp import web

from gateway.app import build_app
from gateway.settings import parse_settings
from tests.served import LoopServers
from tests.upstream import FakeUpstream, Received, Script

Event = tuple[str, dict[str, Any]]
SIGV4 = re.compile(
    r"AWS4-HMAC-SHA256 Credential=(?P<akid>[A-Z0-9]+)/(?P<date>\d{8})/(?P<region>[a-z0-9-]+)"
    r"/bedrock/aws4_request, SignedHeaders=(?P<signed>[a-z0-9;-]+), Signature=[0-9a-f]{64}"
)
USAGE = {
    "inputTokens": 11,
    "outputTokens": 7,
    "totalTokens": 28,
    "cacheReadInputTokens": 6,
    "cacheWriteInputTokens": 4,
}


def crc(data: bytes, value: int = 0) -> int:
    return binascii.crc32(data, value) & 0xFFFFFFFF


def header(name: str, value: str) -> bytes:
    raw_name, raw_value = name.encode(), value.encode()
    return (
        bytes([len(raw_name)]) + raw_name + b"\x07" + struct.pack(">H", len(raw_value)) + raw_value
    )


def message(headers: dict[str, str], payload: bytes) -> bytes:
    """One event-stream message."""
    raw_headers = b"".join(header(name, value) for name, value in headers.items())
    total = 12 + len(raw_headers) + len(payload) + 4
    prelude = struct.pack(">II", total, len(raw_headers))
    prelude += struct.pack(">I", crc(prelude))
    body = prelude + raw_headers + payload
    return body + struct.pack(">I", crc(body))


PADDING = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"


def event_message(event: str, payload: dict[str, Any]) -> bytes:
    """As Bedrock sends them: each payload padded with a `p` field of varying length (which
    hides the length of the text)."""
    headers = {":event-type": event, ":content-type": "application/json", ":message-type": "event"}
    pad = PADDING[: 1 + len(orjson.dumps(payload)) % len(PADDING)]
    return message(headers, orjson.dumps({**payload, "p": pad}))


def exception_message(name: str, text: str) -> bytes:
    headers = {
        ":exception-type": name,
        ":content-type": "application/json",
        ":message-type": "exception",
    }
    return message(headers, orjson.dumps({"message": text}))


def event_stream(events: list[Event]) -> bytes:
    return b"".join(event_message(name, payload) for name, payload in events)


def fixture_events(lines: list[dict[str, Any]]) -> list[Event]:
    """The recorded streams hold one `{"<eventType>": payload}` object a line."""
    events = []
    for line in lines:
        ((name, payload),) = line.items()
        events.append((name, payload))
    return events


def text_blocks(text: str, at: int = 0) -> list[Event]:
    half = len(text) // 2
    return [
        ("contentBlockDelta", {"contentBlockIndex": at, "delta": {"text": text[:half]}}),
        ("contentBlockDelta", {"contentBlockIndex": at, "delta": {"text": text[half:]}}),
        ("contentBlockStop", {"contentBlockIndex": at}),
    ]


def tool_blocks(at: int, call_id: str, name: str, arguments: str, stop: bool = True) -> list[Event]:
    start = {"toolUse": {"toolUseId": call_id, "name": name}}
    third = max(1, len(arguments) // 3)
    parts = [arguments[:third], arguments[third : 2 * third], arguments[2 * third :]]
    events: list[Event] = [("contentBlockStart", {"contentBlockIndex": at, "start": start})]
    events += [
        ("contentBlockDelta", {"contentBlockIndex": at, "delta": {"toolUse": {"input": part}}})
        for part in parts
        if part
    ]
    if stop:
        events.append(("contentBlockStop", {"contentBlockIndex": at}))
    return events


def stream_events(
    blocks: list[Event],
    stop_reason: str = "end_turn",
    usage: dict[str, Any] | None = USAGE,
    stop_sequence: str | None = None,
) -> list[Event]:
    stop: dict[str, Any] = {"stopReason": stop_reason}
    if stop_sequence is not None:
        stop["additionalModelResponseFields"] = {"delta": {"stop_sequence": stop_sequence}}
    events: list[Event] = [("messageStart", {"role": "assistant"}), *blocks, ("messageStop", stop)]
    if usage is not None:
        events.append(("metadata", {"usage": usage, "metrics": {"latencyMs": 12}}))
    return events


def converse_body(
    content: list[dict[str, Any]],
    stop_reason: str = "end_turn",
    usage: dict[str, Any] | None = USAGE,
    stop_sequence: str | None = None,
) -> bytes:
    body: dict[str, Any] = {
        "output": {"message": {"role": "assistant", "content": content}},
        "stopReason": stop_reason,
        "metrics": {"latencyMs": 12},
    }
    if usage is not None:
        body["usage"] = usage
    if stop_sequence is not None:
        body["additionalModelResponseFields"] = {"delta": {"stop_sequence": stop_sequence}}
    return orjson.dumps(body)


def error_reply(status: int, exception: str, text: str) -> Script:
    headers = {
        "x-amzn-ErrorType": f"{exception}:http://internal.amazon.com/coral/com.amazon.bedrock/"
    }
    return Script(status=status, body=orjson.dumps({"message": text}), headers=headers)


class BedrockUpstream(FakeUpstream):
    """Scripted per model id; `auth_failures` lists requests whose Authorization was wrong."""

    def __init__(self, region: str, bearer: str | None = None, token: str | None = None) -> None:
        super().__init__()
        self.region = region
        self.bearer = bearer  # the Bedrock API key a bearer request must carry
        self.token = token  # the session token a temporary credential's request must carry
        self.auth_failures: list[str] = []
        self.akids: list[str] = []
        self.raw_paths: list[str] = []  # as on the request line, percent-escapes and all

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_post("/model/{model_id}/converse", self.converse)
        app.router.add_post("/model/{model_id}/converse-stream", self.converse)
        app.router.add_post("/model/{model_id}/count-tokens", self.converse)  # CountTokens
        app.router.add_post("/model/{model_id}/invoke", self.converse)  # InvokeModel
        return app

    def _check_auth(self, request: web.Request) -> str | None:
        auth = request.headers.get("authorization", "")
        if auth.startswith("Bearer "):
            if self.bearer is None or auth != f"Bearer {self.bearer}":
                return "wrong bearer key"
            return None
        match = SIGV4.fullmatch(auth)
        if match is None:
            return "not a SigV4 Authorization header"
        if match["region"] != self.region:
            return "wrong region in the credential scope"
        date = request.headers.get("x-amz-date", "")
        if not re.fullmatch(r"\d{8}T\d{6}Z", date) or date[:8] != match["date"]:
            return "x-amz-date missing or not the scope's date"
        signed = match["signed"].split(";")
        if "host" not in signed or "x-amz-date" not in signed:
            return "host and x-amz-date are not signed"
        token = request.headers.get("x-amz-security-token")
        if self.token is not None and (token != self.token or "x-amz-security-token" not in signed):
            return "the session token is missing or not signed"
        self.akids.append(match["akid"])
        return None

    async def converse(self, request: web.Request) -> web.StreamResponse:
        raw = await request.read()
        self.raw_paths.append(request.raw_path)
        model = unquote(request.match_info["model_id"])
        problem = self._check_auth(request)
        if problem is not None:
            self.auth_failures.append(problem)
            body = orjson.dumps({"message": problem})
            headers = {"x-amzn-ErrorType": "UnrecognizedClientException:"}
            return web.Response(status=403, body=body, headers=headers)
        script = self.scripts.get(model)
        if script is None:
            return web.json_response({"message": f"unscripted {model}"}, status=599)
        self.received[model].append(Received(request.path, dict(request.headers), raw))
        following = self.sequences.get(model)
        if following:
            self.scripts[model] = following.pop(0)
        if script.body is None and "content-type" not in script.headers:
            script = Script(
                status=script.status,
                chunks=script.chunks,
                headers={"content-type": "application/vnd.amazon.eventstream", **script.headers},
                delay=script.delay,
                drop_after=script.drop_after,
            )
        return await self._play(request, script)


# --- a gateway stack in front of it ----------------------------------------------------------

REGION = "us-east-1"
BEARER_KEY = "bedrock-api-key-SECRET-0003"
POLICIES = ("withhold", "pass")


def gateway_settings(upstream_url: str, policy: str, audit_store: str) -> dict[str, Any]:
    common = {"base_url": upstream_url, "region": REGION, "timeout": 5, "retry": {"attempts": 1}}
    return {
        "providers": {
            "bedrock": {"kind": "bedrock", **common},
            "bedrock_key": {"kind": "bedrock", "api_key": BEARER_KEY, **common},
        },
        "routes": [
            {"match": "br-*", "provider": "bedrock"},
            {"match": "brk-*", "provider": "bedrock_key"},
            {"match": "arn:*", "provider": "bedrock"},
        ],
        "truncation": {"tool_calls": policy},
        "audit": {"store": audit_store},
        "circuit": {"failures": 0},
    }


class BedrockStack(LoopServers):
    """A Bedrock upstream and one gateway per truncation policy, on their own loop thread (so
    the sync SDK clients can drive them), as tests/conftest.py's stack does."""

    def __init__(self, audit_dir: Path) -> None:
        super().__init__()
        self.audit_dir = audit_dir
        self.upstream = BedrockUpstream(REGION, bearer=BEARER_KEY)
        self.upstream_url = ""
        self.urls: dict[str, str] = {}

    async def _start(self) -> None:
        self.upstream_url = await self._serve(self.upstream.app())
        for policy in POLICIES:
            store = f"sqlite:///{self.audit_dir / f'audit-{policy}.db'}"
            config = gateway_settings(self.upstream_url, policy, store)
            self.urls[policy] = await self._serve(build_app(parse_settings(config), env={}))

    def add_gateway(self, name: str, config: dict[str, Any]) -> str:
        app = build_app(parse_settings(config), env={})
        self.urls[name] = self.run(self._serve(app))
        return self.urls[name]

    def openai(self, policy: str = "withhold") -> openai.OpenAI:
        return openai.OpenAI(base_url=self.urls[policy] + "/v1", api_key="sk-client", max_retries=0)

    def anthropic(self, policy: str = "withhold") -> anthropic.Anthropic:
        return anthropic.Anthropic(base_url=self.urls[policy], api_key="sk-client", max_retries=0)
