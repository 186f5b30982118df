"""Request translation to Gemini from every client format: what is carried, and how; what is
not, named (never a value)."""

from __future__ import annotations

from typing import Any

import pytest

from gateway.errors import InvalidRequest
from gateway.formats import gemini_ids
from gateway.translate.table import translate_request
from gateway.translate.translation import ToolOrigin

SCHEMA = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
SIGNATURE = "+vv8/f7/Z2F0ZXdheS10aG91Z2h0LXNpZ25hdHVy+/8="
SIGNED_ID = gemini_ids.mint("resp", 0, SIGNATURE)


def anthropic(**body: Any) -> Any:
    body.setdefault("max_tokens", 100)
    body.setdefault("messages", [{"role": "user", "content": "hi"}])
    return translate_request("anthropic", "gemini", body, "gemini-x")


def test_system_text_blocks_and_system_messages_become_the_system_instruction():
    out = anthropic(
        system=[{"type": "text", "text": "One.", "cache_control": {"type": "ephemeral"}}],
        messages=[
            {"role": "system", "content": "Two."},
            {"role": "user", "content": "hi"},
        ],
    ).body
    assert out["systemInstruction"] == {"parts": [{"text": "One."}, {"text": "Two."}]}
    assert out["contents"] == [{"role": "user", "parts": [{"text": "hi"}]}]


def test_roles_and_same_role_turns_are_merged():
    out = anthropic(
        messages=[
            {"role": "user", "content": "a"},
            {"role": "user", "content": [{"type": "text", "text": "b"}]},
            {"role": "assistant", "content": "c"},
        ]
    ).body
    assert out["contents"] == [
        {"role": "user", "parts": [{"text": "a"}, {"text": "b"}]},
        {"role": "model", "parts": [{"text": "c"}]},
    ]


def test_images_and_documents():
    content = [
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBO"}},
        {"type": "image", "source": {"type": "url", "url": "https://x.test/cat.jpg"}},
        {"type": "document", "source": {"type": "url", "url": "https://x.test/a.pdf"}},
        {"type": "document", "source": {"type": "text", "media_type": "text/plain", "data": "d"}},
        {"type": "document", "source": {"type": "file", "file_id": "file_1"}},
    ]
    translation = anthropic(messages=[{"role": "user", "content": content}])
    assert translation.body["contents"][0]["parts"] == [
        {"inlineData": {"mimeType": "image/png", "data": "iVBO"}},
        {"fileData": {"fileUri": "https://x.test/cat.jpg"}},
        {"fileData": {"fileUri": "https://x.test/a.pdf", "mimeType": "application/pdf"}},
        {"text": "d"},
    ]
    assert translation.dropped.items == {"document": 1}


def test_tool_use_and_results_with_names_and_signatures():
    messages = [
        {"role": "user", "content": "weather?"},
        {
            "role": "assistant",
            "content": [
                {"type": "thinking", "thinking": "Plan.", "signature": "c2ln"},
                {"type": "tool_use", "id": SIGNED_ID, "name": "weather", "input": {"city": "Z"}},
                {"type": "tool_use", "id": "toolu_other", "name": "time", "input": {}},
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": SIGNED_ID, "content": "sunny"},
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_other",
                    "is_error": True,
                    "content": [{"type": "text", "text": "no clock"}],
                },
            ],
        },
    ]
    out = anthropic(messages=messages).body
    assert out["contents"][1] == {
        "role": "model",
        "parts": [
            {"text": "Plan.", "thought": True, "thoughtSignature": "c2ln"},
            {
                "functionCall": {"name": "weather", "args": {"city": "Z"}},
                "thoughtSignature": SIGNATURE,
            },
            {"functionCall": {"name": "time", "args": {}}},
        ],
    }
    assert out["contents"][2] == {
        "role": "user",
        "parts": [
            {"functionResponse": {"name": "weather", "response": {"output": "sunny"}}},
            {"functionResponse": {"name": "time", "response": {"error": "no clock"}}},
        ],
    }


def test_a_result_for_a_call_not_in_the_history_is_refused():
    messages = [{"role": "user", "content": [{"type": "tool_result", "tool_use_id": "nope"}]}]
    with pytest.raises(InvalidRequest, match=r"messages\[0\].content\[0\].tool_use_id"):
        anthropic(messages=messages)


def test_tools_and_server_tools():
    translation = anthropic(
        tools=[
            {"name": "weather", "description": "Weather", "input_schema": SCHEMA},
            {"type": "web_search_20250305", "name": "web_search"},
        ]
    )
    assert translation.body["tools"] == [
        {
            "functionDeclarations": [
                {"name": "weather", "description": "Weather", "parametersJsonSchema": SCHEMA}
            ]
        }
    ]
    assert translation.dropped.tools == ("web_search_20250305",)


@pytest.mark.parametrize(
    ("choice", "config"),
    [
        ({"type": "auto"}, {"mode": "AUTO"}),
        ({"type": "any"}, {"mode": "ANY"}),
        ({"type": "none"}, {"mode": "NONE"}),
        ({"type": "tool", "name": "weather"}, {"mode": "ANY", "allowedFunctionNames": ["weather"]}),
    ],
)
def test_tool_choice(choice, config):
    out = anthropic(tools=[{"name": "weather", "input_schema": SCHEMA}], tool_choice=choice).body
    assert out["toolConfig"] == {"functionCallingConfig": config}


def test_disabling_parallel_calls_is_named_as_dropped():
    translation = anthropic(
        tools=[{"name": "weather", "input_schema": SCHEMA}],
        tool_choice={"type": "auto", "disable_parallel_tool_use": True},
    )
    assert "tool_choice.disable_parallel_tool_use" in translation.dropped.fields


@pytest.mark.parametrize(
    ("thinking", "effort", "config"),
    [
        (
            {"type": "enabled", "budget_tokens": 5000},
            None,
            {"includeThoughts": True, "thinkingBudget": 5000},
        ),
        ({"type": "adaptive"}, None, {"includeThoughts": True, "thinkingBudget": -1}),
        ({"type": "adaptive"}, "low", {"includeThoughts": True, "thinkingBudget": 1024}),
        (None, "high", {"thinkingBudget": 24576}),
        ({"type": "disabled"}, None, None),
    ],
)
def test_thinking_and_effort(thinking, effort, config):
    body: dict[str, Any] = {}
    if thinking is not None:
        body["thinking"] = thinking
    if effort is not None:
        body["output_config"] = {"effort": effort}
    out = anthropic(**body).body
    assert out["generationConfig"].get("thinkingConfig") == config


def test_structured_output():
    out = anthropic(output_config={"format": {"type": "json_schema", "schema": SCHEMA}}).body
    assert out["generationConfig"]["responseMimeType"] == "application/json"
    assert out["generationConfig"]["responseJsonSchema"] == SCHEMA


@pytest.mark.parametrize("key", ["safety_settings", "safetySettings"])
def test_safety_settings_pass_through(key):
    settings = [{"category": "HARM_CATEGORY_HARASSMENT", "threshold": "BLOCK_NONE"}]
    translation = anthropic(**{key: settings})
    assert translation.body["safetySettings"] == settings
    assert not translation.dropped.fields


def test_what_is_not_carried_is_named_never_valued():
    translation = anthropic(
        metadata={"user_id": "u-SECRET"},
        service_tier="auto",
        my_own_field="SECRET",
        messages=[
            {
                "role": "user",
                "content": [{"type": "text", "text": "hi"}, {"type": "search_result", "x": 1}],
            },
        ],
    )
    assert translation.dropped.fields == ("(unknown field)", "metadata", "service_tier")
    assert translation.dropped.items == {"search_result": 1}
    assert "SECRET" not in repr(translation.dropped)


# --- from the OpenAI formats, through Anthropic ----------------------------------------------


def test_openai_chat_to_gemini():
    body = {
        "model": "m",
        "messages": [
            {"role": "system", "content": "Be brief."},
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "What is this?"},
                    {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBO"}},
                ],
            },
        ],
        "max_completion_tokens": 64,
        "stop": "END",
        "reasoning_effort": "medium",
        "response_format": {"type": "json_schema", "json_schema": {"name": "o", "schema": SCHEMA}},
        "tools": [{"type": "function", "function": {"name": "weather", "parameters": SCHEMA}}],
        "tool_choice": "required",
        "seed": 3,
        "user": "u-1",
    }
    translation = translate_request("openai", "gemini", body, "gemini-x")
    out = translation.body
    assert out["systemInstruction"] == {"parts": [{"text": "Be brief."}]}
    assert out["contents"][0]["parts"] == [
        {"text": "What is this?"},
        {"inlineData": {"mimeType": "image/png", "data": "iVBO"}},
    ]
    assert out["generationConfig"] == {
        "maxOutputTokens": 64,
        "stopSequences": ["END"],
        "thinkingConfig": {"thinkingBudget": 8192},
        "responseMimeType": "application/json",
        "responseJsonSchema": SCHEMA,
    }
    assert out["toolConfig"] == {"functionCallingConfig": {"mode": "ANY"}}
    assert translation.dropped.fields == ("seed", "user")  # Gemini has no user id


def test_openai_chat_tool_round_trip_to_gemini():
    body = {
        "model": "m",
        "messages": [
            {"role": "user", "content": "w?"},
            {
                "role": "assistant",
                "tool_calls": [
                    {
                        "id": SIGNED_ID,
                        "type": "function",
                        "function": {"name": "weather", "arguments": '{"city": "Z"}'},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": SIGNED_ID, "content": "sunny"},
        ],
    }
    out = translate_request("openai", "gemini", body, "gemini-x").body
    assert out["contents"][1]["parts"] == [
        {"functionCall": {"name": "weather", "args": {"city": "Z"}}, "thoughtSignature": SIGNATURE}
    ]
    assert out["contents"][2]["parts"] == [
        {"functionResponse": {"name": "weather", "response": {"output": "sunny"}}}
    ]


def test_responses_to_gemini_keeps_dropped_and_tool_origins():
    body = {
        "model": "m",
        "instructions": "Be brief.",
        "input": [
            {"role": "user", "content": "hi"},
            {"type": "reasoning", "id": "rs_1", "summary": []},
        ],
        "tools": [
            {
                "type": "namespace",
                "name": "agents",
                "description": "d",
                "tools": [{"type": "function", "name": "spawn", "parameters": SCHEMA}],
            },
            {"type": "web_search"},
        ],
        "max_output_tokens": 77,
        "top_logprobs": 2,
    }
    translation = translate_request("responses", "gemini", body, "gemini-x")
    out = translation.body
    assert out["systemInstruction"] == {"parts": [{"text": "Be brief."}]}
    assert out["generationConfig"]["maxOutputTokens"] == 77
    [declarations] = [t["functionDeclarations"] for t in out["tools"]]
    [name] = [d["name"] for d in declarations]
    assert translation.tools[name] == ToolOrigin("spawn", "agents")
    assert "web_search" in translation.dropped.tools
    assert "top_logprobs" in translation.dropped.fields
    assert translation.dropped.items.get("reasoning") == 1


def test_a_responses_request_without_a_budget_sends_none():
    out = translate_request("responses", "gemini", {"model": "m", "input": "hi"}, "g").body
    assert "generationConfig" not in out
