"""Every native stop value of Bedrock Converse (botocore's `bedrock-runtime` StopReason), as each
client format sees it, streamed and not; and the loopback Bedrock upstream as boto3 reads it.

The documented list is botocore's service model: a value it gains and this file does not name
turns `test_every_documented_value_is_checked` red. Each value's meaning is written here, not
read from the gateway's table.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3  # type: ignore[import-untyped]
import botocore.session
import pytest

# botocore reads files as it loads; imported before any loop runs (blockbuster forbids it there)
import providers.bedrock  # noqa: F401
from gateway.app import build_app
from gateway.settings import parse_settings
from tests.bedrock_upstream import (
    BEARER_KEY,
    REGION,
    BedrockUpstream,
    converse_body,
    event_stream,
    stream_events,
    text_blocks,
    tool_blocks,
)
from tests.served import LoopServers
from tests.test_native_stops_clients import CLIENTS, STREAMED, chat_tool_calls, check, seen
from tests.upstream import Script

MEANING = {
    "end_turn": "stop",
    "tool_use": "tool_calls",
    "max_tokens": "length",
    "stop_sequence": "stop_sequence",
    "guardrail_intervened": "content_filter",
    "content_filtered": "content_filter",
    "malformed_model_output": "malformed",
    "malformed_tool_use": "malformed",
    "model_context_window_exceeded": "context_window",
}
MATCHED = "END"  # the stop sequence a `stop_sequence` answer names
CALL_ID = "tooluse_stops1"


def documented() -> list[str]:
    model = botocore.session.get_session().get_service_model("bedrock-runtime")
    return list(model.shape_for("StopReason").enum)


def answer(native: str, stream: bool, with_call: bool = False) -> Script:
    matched = MATCHED if native == "stop_sequence" else None
    if with_call or native == "tool_use":
        content: list[dict[str, Any]] = [
            {"toolUse": {"toolUseId": CALL_ID, "name": "get_weather", "input": {"city": "Bern"}}}
        ]
        blocks = tool_blocks(0, CALL_ID, "get_weather", '{"city": "Bern"}')
    else:
        content, blocks = [{"text": "ok"}], text_blocks("ok")
    if not stream:
        return Script(body=converse_body(content, native, stop_sequence=matched))
    events = stream_events(blocks, native, stop_sequence=matched)
    return Script(chunks=[event_stream(events)])


class StopsStack(LoopServers):
    def __init__(self, directory: Path) -> None:
        super().__init__()
        self.db = directory / "audit.db"
        self.upstream = BedrockUpstream(REGION, bearer=BEARER_KEY)
        self.upstream_url = ""
        self.url = ""

    async def _start(self) -> None:
        self.upstream_url = await self._serve(self.upstream.app())
        provider = {
            "kind": "bedrock",
            "region": REGION,
            "base_url": self.upstream_url,
            "api_key": BEARER_KEY,
            "timeout": 5,
            "retry": {"attempts": 1},
        }
        config = {
            "providers": {"bedrock": provider},
            "routes": [{"match": "br-*", "provider": "bedrock"}],
            "audit": {"store": f"sqlite:///{self.db}"},
            "circuit": {"failures": 0},
        }
        self.url = await self._serve(build_app(parse_settings(config, env={}), env={}))


@pytest.fixture(scope="module")
def stops(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StopsStack]:
    stack = StopsStack(tmp_path_factory.mktemp("bedrock-stops"))
    stack.start()
    yield stack
    stack.stop()


def test_every_documented_value_is_checked() -> None:
    assert list(MEANING) == documented()


@pytest.mark.parametrize("stream", STREAMED, ids=["whole", "streamed"])
@pytest.mark.parametrize("client", CLIENTS)
@pytest.mark.parametrize("native", list(MEANING))
def test_each_value_as_each_client_sees_it(
    stops: StopsStack, native: str, client: str, stream: bool
) -> None:
    model = f"br-{uuid.uuid4().hex[:12]}"
    stops.upstream.script(model, answer(native, stream))
    got = seen(client, stops.url, model, stream)
    check(client, got, MEANING[native], native, stops.db, model)


@pytest.mark.parametrize("stream", STREAMED, ids=["whole", "streamed"])
def test_a_malformed_tool_use_is_never_given_as_a_complete_call(
    stops: StopsStack, stream: bool
) -> None:
    """Bedrock says the model's tool use is malformed: an OpenAI client must not run it as a
    finished `tool_calls` answer; it is listed as withheld."""
    model = f"br-{uuid.uuid4().hex[:12]}"
    stops.upstream.script(model, answer("malformed_tool_use", stream, with_call=True))
    names, extension = chat_tool_calls(stops.url, model, stream)
    assert names == []
    assert extension["withheld_tool_calls"] == [{"id": CALL_ID, "name": "get_weather"}]


# --- the loopback upstream as boto3 reads it -----------------------------------------------------


@pytest.mark.parametrize("stream", STREAMED, ids=["whole", "streamed"])
@pytest.mark.parametrize("native", list(MEANING))
def test_boto3_reads_each_value(stops: StopsStack, native: str, stream: bool) -> None:
    """boto3's bedrock-runtime client, SigV4-signed with dummy credentials, parses what the
    loopback sends: the stop reason, the content, and a stop sequence's match."""
    model = f"sdk-{uuid.uuid4().hex[:12]}"
    stops.upstream.script(model, answer(native, stream))
    client = boto3.client(
        "bedrock-runtime",
        region_name=REGION,
        endpoint_url=stops.upstream_url,
        aws_access_key_id="AKIDSTOPSTEST",
        aws_secret_access_key="stops-secret",
    )
    messages: Any = [{"role": "user", "content": [{"text": "hi"}]}]
    if not stream:
        whole = client.converse(modelId=model, messages=messages)
        stop, fields = whole["stopReason"], whole.get("additionalModelResponseFields")
        content = whole["output"]["message"]["content"]
    else:
        events = list(client.converse_stream(modelId=model, messages=messages)["stream"])
        (end,) = [e["messageStop"] for e in events if "messageStop" in e]
        stop, fields = end["stopReason"], end.get("additionalModelResponseFields")
        starts = [e["contentBlockStart"]["start"] for e in events if "contentBlockStart" in e]
        texts = [
            e["contentBlockDelta"]["delta"].get("text", "")
            for e in events
            if "contentBlockDelta" in e
        ]
        content = starts or [{"text": "".join(texts)}]
    assert stop == native
    assert not stops.upstream.auth_failures
    if native == "tool_use":
        assert content[0]["toolUse"]["toolUseId"] == CALL_ID
    else:
        assert content == [{"text": "ok"}]
    if native == "stop_sequence":
        assert fields == {"delta": {"stop_sequence": MATCHED}}
