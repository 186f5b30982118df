"""What the recovery tests share: a gateway in front of tests/recovery_upstream.py on every wire,
the three clients driven by the real SDKs, and readers of the record and the upstream requests.

    rstack = RecoveryStack(tmp_dir); rstack.start()
    model = rstack.scripted("rc", "anthropic", Stream(TEXT, cut_at=40), Stream(TEXT[40:]))
    seen = CLIENTS["chat"](rstack, model)       # the text and `gateway` object the client saw
    record = rstack.record(model)
"""

from __future__ import annotations

import contextlib
import http.client
import json
import sqlite3
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import anthropic
import openai
import orjson

import providers.bedrock  # noqa: F401  botocore reads files as it loads: not inside a loop
from gateway.app import build_app
from gateway.settings import parse_settings
from tests.fault_upstream import Request
from tests.recovery_upstream import RecoveryUpstream, Stream
from tests.served import LoopServers

TEXT = "The quick brown fox jumps over the lazy dog, then it runs far away into the green hills."
AT = 37  # 40% of the text, near enough: a break in the middle of a word ("the la|zy dog")
assert TEXT[AT - 1] != " " and TEXT[AT] != " "
AFTER_SPACE = 40  # "the lazy |dog": the text sent ends with a space a prefill must not
assert TEXT[AFTER_SPACE - 1] == " "

# The upstream wires, by the short name of the provider that speaks each.
WIRES = {
    "openai": "oa",
    "anthropic": "an",
    "openai_responses": "rs",
    "gemini": "gm",
    "bedrock": "br",
}
KINDS = {
    "oa": "openai",
    "an": "anthropic",
    "rs": "openai_responses",
    "gm": "gemini",
    "br": "bedrock",
}
SUFFIX = {"openai": "/v1", "openai_responses": "/v1"}
BOTH = {"mid_stream": "continue", "max_tokens": "continue"}


def recovery_settings(upstream: str, db: Path, recovery: bool = True) -> dict[str, Any]:
    """The stack's configuration; without `recovery`, not one [recovery] key: the default."""
    providers: dict[str, Any] = {}
    for short, kind in KINDS.items():
        provider = {
            "kind": kind,
            "base_url": upstream + SUFFIX.get(kind, ""),
            "api_key": "sk-upstream-recovery",
            "connect_timeout": 5,
            "first_byte_timeout": 10,
            "idle_timeout": 1.0,  # a stall past it is a break
            "retry": {"attempts": 2, "backoff": 0.01},
        }
        if kind == "bedrock":
            provider["region"] = "us-east-1"
        providers[short] = provider
    routes: list[dict[str, Any]] = []
    for short in KINDS:
        routes.append({"match": f"rc-{short}-*", "provider": short, "recovery": BOTH})
        routes.append({"match": f"mid-{short}-*", "provider": short})  # the top-level table's
        routes.append(
            {"match": f"off-{short}-*", "provider": short, "recovery": {"mid_stream": "off"}}
        )
    # The OpenAI target first; an Anthropic one (prefill) and a Gemini one as fallbacks.
    fallbacks = [
        {"provider": "oa"},
        {"provider": "an", "weight": 0},
        {"provider": "gm", "weight": 0},
    ]
    routes.append({"match": "fb-*", "targets": fallbacks, "recovery": BOTH})
    settings = {
        "providers": providers,
        "routes": routes,
        "recovery": {"mid_stream": "continue"},
        "audit": {"store": f"sqlite:///{db}"},
        "circuit": {"failures": 0},
    }
    if not recovery:
        del settings["recovery"]
        for route in routes:
            route.pop("recovery", None)
    return settings


class RecoveryStack(LoopServers):
    def __init__(self, audit_dir: Path, recovery: bool = True) -> None:
        super().__init__()
        self.recovery = recovery
        self.db = audit_dir / "audit-recovery.db"
        self.upstream = RecoveryUpstream()
        self.url = ""

    async def _start(self) -> None:
        config = parse_settings(recovery_settings(self.upstream.url, self.db, self.recovery))
        self.url = await self._serve(build_app(config, env={}))

    def start(self) -> None:
        self.upstream.start()
        super().start()

    def stop(self) -> None:
        super().stop()
        self.upstream.stop()

    def scripted(self, route: str, wire: str, *streams: Stream) -> str:
        """A fresh model of `route` ("rc", "mid", "off" or "fb") on `wire`, answered by
        `streams`."""
        short = WIRES[wire]
        model = (
            f"{route}-{short}-{uuid.uuid4().hex[:10]}"
            if route != "fb"
            else f"fb-{uuid.uuid4().hex[:10]}"
        )
        self.upstream.script(model, *streams)
        return model

    def requests(self, model: str) -> list[Request]:
        return self.upstream.requests(model)

    def record(self, model: str) -> dict[str, Any]:
        deadline = time.monotonic() + 10
        while True:
            with contextlib.closing(sqlite3.connect(self.db)) as conn:
                conn.row_factory = sqlite3.Row
                rows = conn.execute("SELECT * FROM audit_records WHERE model = ?", (model,))
                found = [dict(row) for row in rows.fetchall()]
            if found:
                assert len(found) == 1, found
                row = found[0]
                for name in ("attempts", "recovered", "withheld_tool_calls"):
                    if row[name] is not None:
                        row[name] = json.loads(row[name])
                return row
            assert time.monotonic() < deadline, f"no audit record for {model}"
            time.sleep(0.01)

    def openai(self) -> openai.OpenAI:
        return openai.OpenAI(base_url=self.url + "/v1", api_key="sk-client", max_retries=0)

    def anthropic(self) -> anthropic.Anthropic:
        return anthropic.Anthropic(base_url=self.url, api_key="sk-client", max_retries=0)


@dataclass
class Observed:
    """What a client saw of a streamed answer: its text, its stop, the `gateway` object."""

    text: str
    stop: str | None
    gateway: dict[str, Any] | None
    error: str | None = None  # the SDK raised (an error event ended the stream)
    endings: int = 1  # finish reasons (chat) or text blocks (messages) the client got


def chat(rstack: RecoveryStack, model: str, max_tokens: int | None = None) -> Observed:
    text, stop, ext, finishes = "", None, None, 0
    extra = {} if max_tokens is None else {"max_tokens": max_tokens}
    try:
        stream = rstack.openai().chat.completions.create(
            model=model, messages=[{"role": "user", "content": "Tell me"}], stream=True, **extra
        )
        for chunk in stream:
            if chunk.choices:
                text += chunk.choices[0].delta.content or ""
                stop = chunk.choices[0].finish_reason or stop
                finishes += chunk.choices[0].finish_reason is not None
            ext = (chunk.model_extra or {}).get("gateway") or ext
    except openai.APIError as exc:
        return Observed(text, stop, ext, type(exc).__name__, finishes)
    return Observed(text, stop, ext, endings=finishes)


def messages(rstack: RecoveryStack, model: str, max_tokens: int = 256) -> Observed:
    ext = None
    try:
        with rstack.anthropic().messages.stream(
            model=model, max_tokens=max_tokens, messages=[{"role": "user", "content": "Tell me"}]
        ) as stream:
            for event in stream:
                if event.type == "message_delta":
                    ext = (event.model_extra or {}).get("gateway")
            message = stream.get_final_message()
    except anthropic.APIError as exc:
        return Observed("", None, ext, type(exc).__name__)
    texts = [block.text for block in message.content if block.type == "text"]
    return Observed("".join(texts), message.stop_reason, ext, endings=len(texts))


def responses(rstack: RecoveryStack, model: str, max_tokens: int | None = None) -> Observed:
    extra = {} if max_tokens is None else {"max_output_tokens": max_tokens}
    terminal = ("response.completed", "response.incomplete", "response.failed")
    response = None
    try:
        with rstack.openai().responses.stream(model=model, input="Tell me", **extra) as stream:
            for event in stream:  # the SDK keeps only a completed response as the final one
                if event.type in terminal:
                    response = event.response
    except openai.APIError as exc:
        return Observed("", None, None, type(exc).__name__)
    assert response is not None
    reason = response.incomplete_details.reason if response.incomplete_details else None
    return Observed(
        response.output_text, reason or response.status, response.model_extra.get("gateway")
    )


CLIENTS: dict[str, Callable[..., Observed]] = {
    "chat": chat,
    "messages": messages,
    "responses": responses,
}
COMPLETE = {"chat": "stop", "messages": "end_turn", "responses": "completed"}


PATHS = {"chat": "/v1/chat/completions", "messages": "/v1/messages", "responses": "/v1/responses"}


def request_body(client: str, model: str, max_tokens: int = 256) -> dict[str, Any]:
    if client == "responses":
        return {"model": model, "input": "Tell me", "stream": True, "max_output_tokens": max_tokens}
    body = {"model": model, "messages": [{"role": "user", "content": "Tell me"}], "stream": True}
    return {**body, "max_tokens": max_tokens}


def raw_stream(
    rstack: RecoveryStack, client: str, model: str, **extra: Any
) -> tuple[dict[str, str], bytes]:
    """The response's headers and body bytes, as the gateway sent them (no SDK between);
    `extra` fields join the request body."""
    url = urlsplit(rstack.url)
    conn = http.client.HTTPConnection(url.hostname or "", url.port, timeout=30)
    try:
        headers = {"content-type": "application/json", "authorization": "Bearer sk-client"}
        if client == "messages":
            headers["anthropic-version"] = "2023-06-01"
        body = {**request_body(client, model), **extra}
        conn.request("POST", PATHS[client], orjson.dumps(body), headers)
        response = conn.getresponse()
        return {k.lower(): v for k, v in response.getheaders()}, response.read()
    finally:
        conn.close()


def data_objects(body: bytes) -> list[dict[str, Any]]:
    """The JSON `data:` of every SSE event of a body ([DONE] left out)."""
    out = []
    for event in body.split(b"\n\n"):
        for line in event.split(b"\n"):
            if line.startswith(b"data: ") and line != b"data: [DONE]":
                out.append(orjson.loads(line[6:]))
    return out


def last_turns(seen: Request) -> list[tuple[str, str]]:
    """The last two turns of a request upstream, as (role, text), whatever its wire."""
    body = seen.body
    if seen.wire == "gemini":
        turns = [
            (c["role"], "".join(p.get("text", "") for p in c["parts"])) for c in body["contents"]
        ]
    elif seen.wire == "openai_responses":
        items = body["input"] if isinstance(body["input"], list) else [body["input"]]
        turns = [(item["role"], _text(item["content"])) for item in items if "role" in item]
    else:
        turns = [(m["role"], _text(m["content"])) for m in body["messages"]]
    return [("model" if role == "model" else role, text) for role, text in turns[-2:]]


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    return "".join(part.get("text", "") for part in content if isinstance(part, dict))


def assistant_role(wire: str) -> str:
    return "model" if wire == "gemini" else "assistant"


def expected_continuation(wire: str, sent: str) -> list[tuple[str, str]]:
    """The continuation request's last turns: the prefill alone (Anthropic), else the text sent
    and the request to go on."""
    from gateway.translate.continuation import CONTINUE_INSTRUCTION

    if wire == "anthropic":
        return [("user", "Tell me"), ("assistant", sent.rstrip())]
    return [(assistant_role(wire), sent), ("user", CONTINUE_INSTRUCTION)]
