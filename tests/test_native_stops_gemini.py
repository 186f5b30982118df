"""Every native stop value of Gemini and Vertex AI (google-genai's `FinishReason` and
`BlockedReason`), as each client format sees it, streamed and not.

The documented list is the installed google-genai's own: a value the SDK gains and this file does
not name turns `test_every_documented_value_is_checked` red. Each value's meaning is written
here from the SDK's docstring, not read from the gateway's table. The loopback Gemini upstream
is then checked against google-genai itself: each value, sent by it, decodes in the SDK as the
SDK's own enum member, streamed and not (Vertex answers with the same messages).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from google import genai
from google.genai import types

from gateway.app import build_app
from gateway.settings import parse_settings
from tests.gemini_upstream import GeminiUpstream, blocked, call, chunk, gemini_sse, text
from tests.served import LoopServers
from tests.test_native_stops_clients import CLIENTS, STREAMED, chat_tool_calls, check, seen
from tests.upstream import Script
from tests.vertex_upstream import TokenEndpoint, VertexUpstream

BLOCKED = "blockReason:"
# FinishReason -> its normalized reason, by the docstring's meaning
FINISH_MEANING = {
    "FINISH_REASON_UNSPECIFIED": "unknown",
    "STOP": "stop",  # natural stopping point or a configured stop sequence
    "MAX_TOKENS": "length",
    "SAFETY": "content_filter",
    "RECITATION": "content_filter",
    "LANGUAGE": "content_filter",  # flagged for an unsupported language
    "OTHER": "unknown",  # "a reason not otherwise specified"
    "BLOCKLIST": "content_filter",
    "PROHIBITED_CONTENT": "content_filter",
    "SPII": "content_filter",
    "MALFORMED_FUNCTION_CALL": "malformed",  # a call that can't be parsed
    "IMAGE_SAFETY": "content_filter",
    "IMAGE_PROHIBITED_CONTENT": "content_filter",
    "IMAGE_OTHER": "unknown",
    "NO_IMAGE": "unknown",
    "IMAGE_RECITATION": "content_filter",
    "UNEXPECTED_TOOL_CALL": "malformed",  # a call semantically invalid
    "TOO_MANY_TOOL_CALLS": "pause",  # the server-side tool loop stopped before a final answer
    "MISSING_THOUGHT_SIGNATURE": "malformed",  # the request lacked a thought signature
    "MALFORMED_RESPONSE": "malformed",
    "ESCALATION": "content_filter",  # filtered by an escalation rule
    "PUP_LIMITED_DISABLED": "content_filter",  # account limited for Prohibited Use Policy
    "CONTINUATION": "length",  # per-request token limit reached, generation not complete
    "MODEL_ARMOR": "content_filter",
}
# A prompt blocked before any candidate: a content filter whatever the BlockedReason.
BLOCK_REASONS = [reason.value for reason in types.BlockedReason]
VALUES = [*FINISH_MEANING, *(BLOCKED + reason for reason in BLOCK_REASONS)]
TOOL_CALL = "STOP+functionCall"  # tool calls end with STOP: the gateway's TOOL_CALLS
PROVIDERS = ("gemini", "vertex")
PROJECT, REGION = "proj-stops", "europe-west4"


def meaning(native: str) -> str:
    if native == TOOL_CALL:
        return "tool_calls"
    return "content_filter" if native.startswith(BLOCKED) else FINISH_MEANING[native]


def answer(native: str, stream: bool, with_call: bool = False) -> Script:
    """What Gemini (and Vertex) send for `native`: text (or a function call) then the finish
    on a last chunk."""
    if native.startswith(BLOCKED):
        feedback = blocked(native.removeprefix(BLOCKED))
        return (
            Script(chunks=gemini_sse([feedback])) if stream else Script(body=orjson.dumps(feedback))
        )
    finish = "STOP" if native == TOOL_CALL else native
    with_call = with_call or native == TOOL_CALL
    parts = [call("get_weather", {"city": "Bern"})] if with_call else [text("ok")]
    if not stream:
        return Script(body=orjson.dumps(chunk(parts, finish)))
    return Script(chunks=gemini_sse([chunk(parts, usage=None), chunk([text("")], finish)]))


class StopsStack(LoopServers):
    def __init__(self, directory: Path) -> None:
        super().__init__()
        self.db = directory / "audit.db"
        self.gemini = GeminiUpstream()
        self.vertex = VertexUpstream(TokenEndpoint())
        self.gemini_url = ""
        self.url = ""

    async def _start(self) -> None:
        self.gemini_url = await self._serve(self.gemini.app())
        vertex_url = await self._serve(self.vertex.app())
        common = {"timeout": 5, "retry": {"attempts": 1}}
        config = {
            "providers": {
                "gemini": {
                    "kind": "gemini",
                    "base_url": self.gemini_url,
                    "api_key": "AIza-g",
                    **common,
                },
                "vertex": {
                    "kind": "vertex",
                    "project": PROJECT,
                    "region": REGION,
                    "base_url": vertex_url,
                    "api_key": "AIza-v",
                    **common,
                },
            },
            "routes": [{"match": f"{p}-*", "provider": p} for p in PROVIDERS],
            "audit": {"store": f"sqlite:///{self.db}"},
            "circuit": {"failures": 0},
        }
        self.url = await self._serve(build_app(parse_settings(config, env={}), env={}))

    def script(self, provider: str, model: str, script: Script) -> None:
        (self.gemini if provider == "gemini" else self.vertex).script(model, script)


@pytest.fixture(scope="module")
def stops(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StopsStack]:
    stack = StopsStack(tmp_path_factory.mktemp("gemini-stops"))
    stack.start()
    yield stack
    stack.stop()


def test_every_documented_value_is_checked() -> None:
    assert list(FINISH_MEANING) == [reason.value for reason in types.FinishReason]
    assert BLOCK_REASONS  # the SDK's own list, read above


@pytest.mark.parametrize("stream", STREAMED, ids=["whole", "streamed"])
@pytest.mark.parametrize("client", CLIENTS)
@pytest.mark.parametrize("provider", PROVIDERS)
@pytest.mark.parametrize("native", [*VALUES, TOOL_CALL])
def test_each_value_as_each_client_sees_it(
    stops: StopsStack, native: str, provider: str, client: str, stream: bool
) -> None:
    model = f"{provider}-{uuid.uuid4().hex[:12]}"
    stops.script(provider, model, answer(native, stream))
    got = seen(client, stops.url, model, stream)
    check(client, got, meaning(native), "STOP" if native == TOOL_CALL else native, stops.db, model)


@pytest.mark.parametrize("stream", STREAMED, ids=["whole", "streamed"])
@pytest.mark.parametrize("native", ["MALFORMED_FUNCTION_CALL", "UNEXPECTED_TOOL_CALL"])
def test_a_call_gemini_calls_invalid_is_never_given_as_a_complete_one(
    stops: StopsStack, native: str, stream: bool
) -> None:
    """Gemini says the call it gave is unparsable or not one of the declared functions: an
    OpenAI client must not run it as a finished `tool_calls` answer; it is listed as withheld."""
    model = f"gemini-{uuid.uuid4().hex[:12]}"
    stops.gemini.script(model, answer(native, stream, with_call=True))
    names, extension = chat_tool_calls(stops.url, model, stream)
    assert names == []
    assert [call["name"] for call in extension["withheld_tool_calls"]] == ["get_weather"]


# --- the loopback upstream as google-genai reads it ---------------------------------------------


def sdk_reads(stops: StopsStack, native: str, stream: bool) -> Any:
    """The google-genai response (the last chunk of a stream) for the upstream sending `native`."""
    model = f"sdk-{uuid.uuid4().hex[:12]}"
    stops.gemini.script(model, answer(native, stream))
    # the API version the gateway speaks (the SDK's default is v1, which Gemini serves alike)
    options = types.HttpOptions(base_url=stops.gemini_url, api_version="v1beta")
    client = genai.Client(api_key="AIza-sdk", http_options=options)
    if not stream:
        return client.models.generate_content(model=model, contents="hi")
    chunks = list(client.models.generate_content_stream(model=model, contents="hi"))
    assert chunks
    return chunks[-1]


@pytest.mark.parametrize("stream", STREAMED, ids=["whole", "streamed"])
@pytest.mark.parametrize("native", VALUES)
def test_google_genai_reads_each_value_as_its_own_enum(
    stops: StopsStack, native: str, stream: bool
) -> None:
    response = sdk_reads(stops, native, stream)
    if native.startswith(BLOCKED):
        assert not response.candidates
        got = response.prompt_feedback.block_reason
        assert isinstance(got, types.BlockedReason)
        assert got == types.BlockedReason(native.removeprefix(BLOCKED))
        return
    got = response.candidates[0].finish_reason
    assert isinstance(got, types.FinishReason)
    assert got == types.FinishReason(native)
    assert response.text == ("" if stream else "ok")
