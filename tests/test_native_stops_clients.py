"""What a client of each format sees of a stop, read through its real SDK, streamed and not;
shared by the per-provider native stop tests (tests/test_native_stops_*.py).

`EXPECTED` is DESIGN.md §4 written out once more, by normalized reason: the OpenAI Chat
`finish_reason`, the Anthropic `stop_reason` and the Responses `status[/reason]`. It is not read
from gateway.formats.stop_reasons, so a table that drifts from the contract turns these tests red.
"""

from __future__ import annotations

import contextlib
import sqlite3
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anthropic
import openai

CLIENTS = ("openai", "anthropic", "responses")
STREAMED = (False, True)
MESSAGES: Any = [{"role": "user", "content": "hi"}]

# normalized reason -> (OpenAI Chat, Anthropic, Responses) as DESIGN.md §4 has them
EXPECTED: dict[str, tuple[str, str, str]] = {
    "stop": ("stop", "end_turn", "completed"),
    "tool_calls": ("tool_calls", "tool_use", "completed"),
    "length": ("length", "max_tokens", "incomplete/max_output_tokens"),
    "stop_sequence": ("stop", "stop_sequence", "completed"),
    "content_filter": ("content_filter", "refusal", "incomplete/content_filter"),
    "pause": ("stop", "pause_turn", "completed"),
    "context_window": (
        "length",
        "model_context_window_exceeded",
        "incomplete/max_output_tokens",
    ),
    "malformed": ("stop", "end_turn", "failed"),
    "unknown": ("stop", "end_turn", "completed"),
}


def expected(client: str, normalized: str) -> str:
    return EXPECTED[normalized][CLIENTS.index(client)]


@dataclass(frozen=True)
class Seen:
    stop: str  # the client's own stop value, as above
    gateway: dict[str, Any]  # the `gateway` extension beside it
    native_finish_reason: str | None = None  # OpenAI Chat choices only


def seen(client: str, url: str, model: str, stream: bool) -> Seen:
    """One exchange of `client` with the gateway at `url`, and what its SDK reads of the stop."""
    if client == "openai":
        return _chat(
            openai.OpenAI(base_url=url + "/v1", api_key="sk-client", max_retries=0), model, stream
        )
    if client == "anthropic":
        return _messages(
            anthropic.Anthropic(base_url=url, api_key="sk-client", max_retries=0), model, stream
        )
    return _responses(
        openai.OpenAI(base_url=url + "/v1", api_key="sk-client", max_retries=0), model, stream
    )


def _chat(client: openai.OpenAI, model: str, stream: bool) -> Seen:
    if not stream:
        whole: dict[str, Any] = client.chat.completions.create(
            model=model, messages=MESSAGES
        ).to_dict()
        choice = whole["choices"][0]
        return Seen(choice["finish_reason"], whole["gateway"], choice.get("native_finish_reason"))
    last: dict[str, Any] | None = None
    for chunk in client.chat.completions.create(model=model, messages=MESSAGES, stream=True):
        raw: dict[str, Any] = chunk.to_dict()
        if raw.get("choices") and raw["choices"][0].get("finish_reason"):
            last = raw
    assert last is not None, "no chunk carried a finish_reason"
    choice = last["choices"][0]
    return Seen(choice["finish_reason"], last["gateway"], choice.get("native_finish_reason"))


def _messages(client: anthropic.Anthropic, model: str, stream: bool) -> Seen:
    if not stream:
        whole: dict[str, Any] = client.messages.create(
            model=model, max_tokens=64, messages=MESSAGES
        ).to_dict()
        return Seen(str(whole["stop_reason"]), whole["gateway"])
    delta: dict[str, Any] | None = None
    for event in client.messages.create(model=model, max_tokens=64, messages=MESSAGES, stream=True):
        if event.type == "message_delta":
            delta = event.to_dict()
    assert delta is not None, "no message_delta event"
    return Seen(str(delta["delta"]["stop_reason"]), delta["gateway"])


def _responses(client: openai.OpenAI, model: str, stream: bool) -> Seen:
    if not stream:
        whole: dict[str, Any] = client.responses.create(model=model, input="hi").to_dict()
    else:
        terminal = ("response.completed", "response.incomplete", "response.failed")
        ends = [e for e in client.responses.create(model=model, input="hi", stream=True)]
        last = [e for e in ends if e.type in terminal]
        assert len(last) == 1, [e.type for e in ends]
        whole = last[0].to_dict()["response"]  # type: ignore[assignment]
    reason = (whole.get("incomplete_details") or {}).get("reason")
    return Seen(whole["status"] + (f"/{reason}" if reason else ""), whole["gateway"])


def chat_tool_calls(url: str, model: str, stream: bool) -> tuple[list[str], dict[str, Any]]:
    """The names of the tool calls an OpenAI Chat client was given, and the `gateway` object."""
    client = openai.OpenAI(base_url=url + "/v1", api_key="sk-client", max_retries=0)
    if not stream:
        whole: dict[str, Any] = client.chat.completions.create(
            model=model, messages=MESSAGES
        ).to_dict()
        calls = whole["choices"][0]["message"].get("tool_calls") or []
        return [c["function"]["name"] for c in calls], whole["gateway"]
    names: list[str] = []
    extension: dict[str, Any] = {}
    for chunk in client.chat.completions.create(model=model, messages=MESSAGES, stream=True):
        raw: dict[str, Any] = chunk.to_dict()
        for choice in raw.get("choices") or ():
            for call in (choice.get("delta") or {}).get("tool_calls") or ():
                if (call.get("function") or {}).get("name"):
                    names.append(call["function"]["name"])
        extension = raw.get("gateway", extension)
    return names, extension


def record(db: Path, model: str) -> dict[str, Any]:
    """The one audit record of `model`'s exchange, once the writer wrote it."""
    deadline = time.monotonic() + 10
    while True:
        with contextlib.closing(sqlite3.connect(db)) as conn:
            conn.row_factory = sqlite3.Row
            with contextlib.suppress(sqlite3.OperationalError):  # not created yet
                rows = conn.execute("SELECT * FROM audit_records WHERE model = ?", (model,))
                found = [dict(row) for row in rows.fetchall()]
                if found:
                    assert len(found) == 1, found
                    return found[0]
        assert time.monotonic() < deadline, f"no audit record for {model}"
        time.sleep(0.02)


def check(client: str, got: Seen, normalized: str, native: str, db: Path, model: str) -> None:
    """The client's stop, its extension and the record, for an upstream that sent `native`."""
    assert got.stop == expected(client, normalized), (client, native, got)
    assert got.gateway["stop_reason"] == normalized, (client, native, got)
    assert got.gateway["native_stop_reason"] == native, (client, native, got)
    if client == "openai":
        assert got.native_finish_reason == native, (native, got)
    row = record(db, model)
    assert (row["stop_reason"], row["native_stop_reason"]) == (normalized, native), row


def test_every_normalized_reason_a_client_can_see_has_its_three_values() -> None:
    from gateway.events import StopReason

    broken = {StopReason.ERROR, StopReason.ABORTED, StopReason.REFUSAL}  # no upstream here says it
    assert set(EXPECTED) == {reason.value for reason in StopReason} - {r.value for r in broken}
