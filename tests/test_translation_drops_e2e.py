"""No silent drops, end to end: real SDK clients through a real gateway to the loopback upstream.

An OpenAI Chat client asking an Anthropic-wire model for JSON-schema output gets it asked of the
upstream as `output_config.format`; a field with no Anthropic counterpart (`seed`, `logprobs`) is
named in the response's `gateway.dropped_fields` and in the audit record. An Anthropic client on
an OpenAI-wire model has its `thinking` become `reasoning_effort` and its `output_config.format`
become `response_format`; what Chat cannot carry (top_k, a server tool, a document block) is
named or counted the same way. Both audit stores run (tests/audit_util.py).
"""

from __future__ import annotations

from typing import Any

import anthropic
import openai
import orjson
import pytest

from gateway.app import build_app
from gateway.audit.record import AuditRecord
from tests.audit_util import BACKENDS, open_backend
from tests.scenarios import Answer, script_for
from tests.test_audit_e2e import Servers, _parsed, gateway_settings, servers, wait_idle
from tests.upstream import FakeUpstream

__all__ = ["servers"]  # the fixture, shared with tests/test_audit_e2e.py

SCHEMA = {
    "type": "object",
    "properties": {"city": {"type": "string"}, "temp_c": {"type": "number"}},
    "required": ["city", "temp_c"],
    "additionalProperties": False,
}
ANSWER = Answer(text='{"city": "Paris", "temp_c": 18}')
PROMPT = [{"role": "user", "content": "Weather in Paris, as JSON"}]


async def _records(servers: Servers, runner: Any, backend: Any) -> list[AuditRecord]:
    await servers.stop(runner)  # flushes the audit writer
    return list(await backend.store().fetch())


def _gateway_of_stream(chunks: list[Any]) -> dict[str, Any]:
    found = [c.model_extra["gateway"] for c in chunks if (c.model_extra or {}).get("gateway")]
    assert len(found) == 1, "one chunk carries the gateway object"
    return dict(found[0])


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("kind", BACKENDS)
async def test_openai_sdk_json_schema_reaches_anthropic_and_drops_are_named(
    kind: str, stream: bool, tmp_path: Any, servers: Servers
) -> None:
    model = f"an-json-schema-{'stream' if stream else 'whole'}"
    async with open_backend(kind, tmp_path) as backend:
        upstream = FakeUpstream()
        upstream.script(model, script_for("anthropic", ANSWER, model, stream))
        _, upstream_url = await servers.start(upstream.app())
        app = build_app(gateway_settings(upstream_url, backend.url), env={})
        runner, base = await servers.start(app)

        client = openai.AsyncOpenAI(base_url=f"{base}/v1", api_key="sk-client", max_retries=0)
        async with client:
            raw = await client.chat.completions.with_raw_response.create(
                model=model,
                messages=PROMPT,  # type: ignore[arg-type]
                response_format={
                    "type": "json_schema",
                    "json_schema": {"name": "weather", "schema": SCHEMA, "strict": True},
                },
                reasoning_effort="minimal",
                seed=1234,
                logprobs=True,
                stream=stream,
            )
            parsed: Any = await _parsed(raw)
            if stream:
                chunks = [chunk async for chunk in parsed]
                text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
                ext = _gateway_of_stream(chunks)
            else:
                text = parsed.choices[0].message.content
                ext = orjson.loads(raw.http_response.content)["gateway"]
        request_id = raw.headers["x-request-id"]
        await wait_idle(app)
        records = await _records(servers, runner, backend)

    assert orjson.loads(text) == {"city": "Paris", "temp_c": 18}
    sent = upstream.last(model).json
    assert sent["output_config"] == {
        "format": {"type": "json_schema", "schema": SCHEMA},
        "effort": "low",
    }
    assert {"seed", "logprobs", "response_format", "reasoning_effort"}.isdisjoint(sent)
    assert ext["dropped_fields"] == ["logprobs", "seed"]
    assert "dropped" not in ext  # no tool, no input item was left out
    [record] = records
    assert record.id == request_id
    assert record.dropped_fields == ["logprobs", "seed"]
    assert (record.dropped_tools, record.dropped_input_items) == (0, 0)
    assert record.content is None  # names only: log_content is off
    assert "1234" not in orjson.dumps(record.as_dict()).decode()


@pytest.mark.parametrize("kind", BACKENDS)
async def test_anthropic_sdk_thinking_and_format_reach_openai_and_drops_are_named(
    kind: str, tmp_path: Any, servers: Servers
) -> None:
    model = "oa-thinking-format"
    async with open_backend(kind, tmp_path) as backend:
        upstream = FakeUpstream()
        upstream.script(model, script_for("openai", ANSWER, model, stream=False))
        _, upstream_url = await servers.start(upstream.app())
        app = build_app(gateway_settings(upstream_url, backend.url), env={})
        runner, base = await servers.start(app)

        document = {"type": "document", "source": {"type": "text", "media_type": "text/plain"}}
        document["source"]["data"] = "Paris: 18C"  # type: ignore[index]
        client = anthropic.AsyncAnthropic(base_url=base, api_key="sk-client", max_retries=0)
        async with client:
            raw = await client.messages.with_raw_response.create(
                model=model,
                max_tokens=20000,
                messages=[
                    {
                        "role": "user",
                        "content": [document, {"type": "text", "text": PROMPT[0]["content"]}],
                    }
                ],  # type: ignore[list-item]
                thinking={"type": "enabled", "budget_tokens": 10000},
                output_config={"format": {"type": "json_schema", "schema": SCHEMA}},
                tools=[
                    {"type": "web_search_20250305", "name": "web_search"},
                    {"name": "lookup", "input_schema": {"type": "object", "properties": {}}},
                ],
                extra_body={"top_k": 5},
            )
            message: Any = await _parsed(raw)
        request_id = raw.headers["x-request-id"]
        ext = orjson.loads(raw.http_response.content)["gateway"]
        await wait_idle(app)
        records = await _records(servers, runner, backend)

    assert orjson.loads(message.content[0].text) == {"city": "Paris", "temp_c": 18}
    sent = upstream.last(model).json
    assert sent["reasoning_effort"] == "medium"  # a 10,000-token budget
    assert sent["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "output", "schema": SCHEMA, "strict": True},
    }
    assert [t["function"]["name"] for t in sent["tools"]] == ["lookup"]
    text_part = {"type": "text", "text": PROMPT[0]["content"]}
    assert sent["messages"] == [{"role": "user", "content": [text_part]}]  # the document: counted
    assert {"top_k", "thinking", "output_config"}.isdisjoint(sent)
    assert ext["dropped_fields"] == ["top_k"]
    assert ext["dropped"] == {"tools": ["web_search_20250305"], "input_items": {"document": 1}}
    [record] = records
    assert record.id == request_id
    assert record.dropped_fields == ["top_k"]
    assert (record.dropped_tools, record.dropped_input_items) == (1, 1)
    assert "Paris: 18C" not in orjson.dumps(record.as_dict()).decode()


async def test_same_format_traffic_drops_nothing_and_records_none(
    tmp_path: Any, servers: Servers
) -> None:
    model = "oa-passthrough-seed"
    async with open_backend("sqlite", tmp_path) as backend:
        upstream = FakeUpstream()
        upstream.script(model, script_for("openai", ANSWER, model, stream=False))
        _, upstream_url = await servers.start(upstream.app())
        app = build_app(gateway_settings(upstream_url, backend.url), env={})
        runner, base = await servers.start(app)
        client = openai.AsyncOpenAI(base_url=f"{base}/v1", api_key="sk-client", max_retries=0)
        async with client:
            raw = await client.chat.completions.with_raw_response.create(
                model=model,
                messages=PROMPT,  # type: ignore[arg-type]
                seed=7,
            )
        ext = orjson.loads(raw.http_response.content)["gateway"]
        await wait_idle(app)
        [record] = await _records(servers, runner, backend)
    assert upstream.last(model).json["seed"] == 7  # relayed as sent
    assert "dropped_fields" not in ext
    assert (record.dropped_fields, record.dropped_tools, record.dropped_input_items) == (None, 0, 0)
