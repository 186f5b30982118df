"""Request translation to Bedrock Converse: Anthropic Messages field by field, and Chat
Completions and Responses through it, with what is dropped named in the client's terms."""

from __future__ import annotations

from typing import Any

import pytest

from gateway.errors import InvalidRequest
from gateway.translate.table import translate_request


def anthropic(body: dict[str, Any]) -> Any:
    return translate_request("anthropic", "bedrock", {"max_tokens": 10, **body}, "m")


HI = [{"role": "user", "content": "hi"}]
TOOL = {"name": "weather", "input_schema": {"type": "object"}}


def test_no_model_or_stream_in_the_body():
    got = anthropic({"model": "claude", "stream": True, "messages": HI})
    assert got.body == {
        "messages": [{"role": "user", "content": [{"text": "hi"}]}],
        "inferenceConfig": {"maxTokens": 10},
    }
    assert not got.dropped


def test_cache_control_becomes_a_cache_point_after_its_block():
    ephemeral = {"type": "ephemeral", "ttl": "1h"}
    got = anthropic(
        {
            "system": [{"type": "text", "text": "S", "cache_control": {"type": "ephemeral"}}],
            "messages": [
                {
                    "role": "user",
                    "content": [{"type": "text", "text": "long", "cache_control": ephemeral}],
                }
            ],
            "tools": [{**TOOL, "cache_control": {"type": "ephemeral"}}],
        }
    ).body
    assert got["system"] == [{"text": "S"}, {"cachePoint": {"type": "default"}}]
    assert got["messages"][0]["content"] == [
        {"text": "long"},
        {"cachePoint": {"type": "default", "ttl": "1h"}},
    ]
    assert got["toolConfig"]["tools"][1] == {"cachePoint": {"type": "default"}}


def test_tool_choices():
    def choice(value: Any) -> Any:
        return anthropic({"messages": HI, "tools": [TOOL], "tool_choice": value})

    assert choice({"type": "auto"}).body["toolConfig"]["toolChoice"] == {"auto": {}}
    assert choice({"type": "any"}).body["toolConfig"]["toolChoice"] == {"any": {}}
    named = choice({"type": "tool", "name": "weather"}).body["toolConfig"]["toolChoice"]
    assert named == {"tool": {"name": "weather"}}
    none = choice({"type": "none"})
    assert "toolConfig" not in none.body and not none.dropped
    parallel = choice({"type": "auto", "disable_parallel_tool_use": True})
    assert parallel.dropped.fields == ("tool_choice.disable_parallel_tool_use",)
    with pytest.raises(InvalidRequest):
        choice({"type": "sometimes"})


def test_tool_choice_none_keeps_the_tools_when_the_history_holds_tool_calls():
    messages = [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "a", "name": "weather"}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "a"}]},
    ]
    got = anthropic({"messages": messages, "tools": [TOOL], "tool_choice": {"type": "none"}})
    assert got.body["toolConfig"] == {
        "tools": [{"toolSpec": {"name": "weather", "inputSchema": {"json": {"type": "object"}}}}]
    }
    assert got.dropped.fields == ("tool_choice",)
    assert got.body["messages"][2]["content"] == [
        {"toolResult": {"toolUseId": "a", "content": [{"text": ""}]}}
    ]


def test_server_tools_and_unknown_blocks_are_dropped_by_name():
    got = anthropic(
        {
            "messages": [
                {
                    "role": "user",
                    "content": [
                        {"type": "text", "text": "x"},
                        {"type": "search_result", "source": "s", "title": "t", "content": []},
                    ],
                }
            ],
            "tools": [TOOL, {"type": "web_search_20250305", "name": "web_search"}],
            "metadata": {"user_id": "u"},
            "container": "c",
            "service_tier": "standard_only",
        }
    )
    assert got.dropped.tools == ("web_search_20250305",)
    assert got.dropped.items == {"search_result": 1}
    assert got.dropped.fields == ("container", "metadata", "service_tier")


def test_documents_thinking_and_redacted_thinking():
    got = anthropic(
        {
            "messages": [
                {
                    "role": "user",
                    "content": [
                        {
                            "type": "document",
                            "source": {
                                "type": "base64",
                                "media_type": "application/pdf",
                                "data": "JVBER",
                            },
                        },
                        {
                            "type": "document",
                            "source": {"type": "text", "media_type": "text/plain", "data": "abc"},
                        },
                    ],
                },
                {
                    "role": "assistant",
                    "content": [
                        {"type": "redacted_thinking", "data": "ZW5j"},
                        {"type": "text", "text": "ok"},
                    ],
                },
            ]
        }
    ).body
    assert got["messages"][0]["content"] == [
        {"document": {"format": "pdf", "name": "document-0", "source": {"bytes": "JVBER"}}},
        {"document": {"format": "txt", "name": "document-1", "source": {"text": "abc"}}},
    ]
    assert got["messages"][1]["content"][0] == {"reasoningContent": {"redactedContent": "ZW5j"}}


def test_an_image_by_url_is_refused():
    image = {"type": "image", "source": {"type": "url", "url": "https://example.test/a.png"}}
    with pytest.raises(InvalidRequest, match="by URL"):
        anthropic({"messages": [{"role": "user", "content": [image]}]})


def test_system_messages_inside_messages_join_the_system_blocks():
    got = anthropic({"system": "A", "messages": [{"role": "system", "content": "B"}, *HI]}).body
    assert got["system"] == [{"text": "A"}, {"text": "B"}]
    assert got["messages"] == [{"role": "user", "content": [{"text": "hi"}]}]


def test_output_config_becomes_converse_output_config():
    schema = {"type": "object", "properties": {"a": {"type": "string"}}}
    got = anthropic(
        {
            "messages": HI,
            "output_config": {
                "effort": "high",
                "format": {"type": "json_schema", "schema": schema},
            },
        }
    ).body
    assert got["outputConfig"]["effort"] == "high"
    fmt = got["outputConfig"]["textFormat"]
    assert fmt["type"] == "json_schema"
    assert (
        fmt["structure"]["jsonSchema"]["schema"]
        == '{"type":"object","properties":{"a":{"type":"string"}}}'
    )


def test_openai_without_a_budget_sends_none_and_names_drops_in_openai_terms():
    got = translate_request(
        "openai",
        "bedrock",
        {
            "messages": HI,
            "safety_identifier": "s",
            "parallel_tool_calls": False,
            "tools": [{"type": "function", "function": {"name": "w", "parameters": {}}}],
            "temperature": 0.5,
        },
        "m",
    )
    assert "maxTokens" not in got.body.get("inferenceConfig", {})
    assert got.body["inferenceConfig"] == {"temperature": 0.5}
    assert got.dropped.fields == ("parallel_tool_calls", "safety_identifier")


def test_responses_through_anthropic():
    got = translate_request(
        "responses",
        "bedrock",
        {
            "input": [
                {"role": "user", "content": "hi"},
                {"type": "function_call", "call_id": "c1", "name": "w", "arguments": "{}"},
                {"type": "function_call_output", "call_id": "c1", "output": "sunny"},
            ],
            "instructions": "Be brief.",
            "max_output_tokens": 20,
            "tools": [{"type": "function", "name": "w", "parameters": {"type": "object"}}],
            "user": "u",
        },
        "m",
    )
    body = got.body
    assert body["system"] == [{"text": "Be brief."}]
    assert body["inferenceConfig"] == {"maxTokens": 20}
    assert [m["role"] for m in body["messages"]] == ["user", "assistant", "user"]
    assert body["messages"][1]["content"] == [
        {"toolUse": {"toolUseId": "c1", "name": "w", "input": {}}}
    ]
    assert body["messages"][2]["content"][0]["toolResult"]["toolUseId"] == "c1"
    assert got.dropped.fields == ("user",)
