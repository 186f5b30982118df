"""Request translation into the OpenAI Responses wire: from Chat Completions and from Messages,
with the names of what each could not carry."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from gateway.errors import InvalidRequest
from gateway.translate.anthropic_responses import translate_request as from_anthropic
from gateway.translate.openai_responses import translate_request as from_chat
from gateway.translate.table import TRANSLATORS, translate_request
from gateway.translate.translation import Dropped, Translation

SCHEMA = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
PNG = "data:image/png;base64,iVBORw0KGgo="


def chat(messages: list[dict[str, Any]], **fields: Any) -> Translation:
    return from_chat({"model": "gpt-client", "messages": messages, **fields}, "gpt-up")


def messages(turns: list[dict[str, Any]], **fields: Any) -> Translation:
    body = {"model": "claude-x", "max_tokens": 256, "messages": turns, **fields}
    return from_anthropic(body, "gpt-up")


def user_item(*parts: dict[str, Any]) -> dict[str, Any]:
    return {"type": "message", "role": "user", "content": list(parts)}


def text(value: str) -> dict[str, Any]:
    return {"type": "input_text", "text": value}


def test_the_table_has_both_rows():
    assert TRANSLATORS[("openai", "openai_responses")] is from_chat
    assert TRANSLATORS[("anthropic", "openai_responses")] is from_anthropic
    out = translate_request(
        "openai", "openai_responses", {"messages": [{"role": "user", "content": "x"}]}, "m"
    )
    assert out.body["model"] == "m"


# --- Chat Completions -> Responses -----------------------------------------------------------


def test_chat_minimal_body_is_stateless_and_drops_nothing():
    out = chat([{"role": "user", "content": "hi"}])
    assert out.body == {"model": "gpt-up", "input": [user_item(text("hi"))], "store": False}
    assert out.dropped == Dropped()


def test_chat_roles_and_parts_become_items_in_order():
    out = chat(
        [
            {"role": "system", "content": "Be terse."},
            {"role": "developer", "content": [{"type": "text", "text": "Rule."}]},
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "Look:"},
                    {"type": "image_url", "image_url": {"url": PNG, "detail": "low"}},
                    {"type": "file", "file": {"file_id": "file-1", "filename": "a.pdf"}},
                    {"type": "input_audio", "input_audio": {"data": "AAA=", "format": "wav"}},
                ],
            },
            {"role": "assistant", "content": "Seen.", "refusal": None},
            {"role": "assistant", "content": [{"type": "refusal", "refusal": "No."}]},
        ]
    )
    assert out.body["input"] == [
        {"type": "message", "role": "system", "content": [text("Be terse.")]},
        {"type": "message", "role": "developer", "content": [text("Rule.")]},
        user_item(
            text("Look:"),
            {"type": "input_image", "image_url": PNG, "detail": "low"},
            {"type": "input_file", "file_id": "file-1", "filename": "a.pdf"},
            {"type": "input_audio", "input_audio": {"data": "AAA=", "format": "wav"}},
        ),
        {
            "type": "message",
            "role": "assistant",
            "content": [{"type": "output_text", "text": "Seen."}],
        },
        {
            "type": "message",
            "role": "assistant",
            "content": [{"type": "refusal", "refusal": "No."}],
        },
    ]


def test_chat_tool_calls_and_results_keep_their_ids_and_arguments_text():
    arguments = '{"city": "Zürich"}'
    out = chat(
        [
            {"role": "user", "content": "weather?"},
            {
                "role": "assistant",
                "content": "Checking.",
                "tool_calls": [
                    {
                        "id": "call_1",
                        "type": "function",
                        "function": {"name": "w", "arguments": arguments},
                    },
                    {
                        "id": "call_2",
                        "type": "function",
                        "function": {"name": "t", "arguments": ""},
                    },
                    {"id": "call_3", "type": "custom", "custom": {"name": "patch", "input": "raw"}},
                ],
            },
            {"role": "tool", "tool_call_id": "call_1", "content": "sunny"},
            {
                "role": "tool",
                "tool_call_id": "call_2",
                "content": [{"type": "text", "text": "noon"}],
            },
        ]
    )
    assert out.body["input"][1:] == [
        {
            "type": "message",
            "role": "assistant",
            "content": [{"type": "output_text", "text": "Checking."}],
        },
        {"type": "function_call", "call_id": "call_1", "name": "w", "arguments": arguments},
        {"type": "function_call", "call_id": "call_2", "name": "t", "arguments": "{}"},
        {"type": "custom_tool_call", "call_id": "call_3", "name": "patch", "input": "raw"},
        {"type": "function_call_output", "call_id": "call_1", "output": "sunny"},
        {"type": "function_call_output", "call_id": "call_2", "output": "noon"},
    ]


def test_chat_legacy_function_call_and_result_get_a_shared_id():
    out = chat(
        [
            {"role": "user", "content": "x"},
            {
                "role": "assistant",
                "content": None,
                "function_call": {"name": "f", "arguments": "{}"},
            },
            {"role": "function", "name": "f", "content": "done"},
        ]
    )
    call, result = out.body["input"][1:]
    assert call["type"] == "function_call" and result["type"] == "function_call_output"
    assert call["call_id"] == result["call_id"]
    assert out.dropped.fields == ("messages.name",)


def test_chat_tools_tool_choice_and_parameters():
    out = chat(
        [{"role": "user", "content": "x"}],
        tools=[
            {
                "type": "function",
                "function": {
                    "name": "w",
                    "description": "Weather",
                    "parameters": SCHEMA,
                    "strict": True,
                },
            },
            {"type": "function", "function": {"name": "n"}},
            {"type": "custom", "custom": {"name": "patch", "format": {"type": "text"}}},
        ],
        tool_choice={"type": "function", "function": {"name": "w"}},
        parallel_tool_calls=False,
        max_completion_tokens=300,
        max_tokens=9,
        temperature=0.2,
        top_p=0.9,
        stream=True,
        stream_options={"include_usage": True},
        response_format={
            "type": "json_schema",
            "json_schema": {"name": "out", "schema": SCHEMA, "strict": True},
        },
        reasoning_effort="high",
        verbosity="low",
        user="u-1",
        safety_identifier="s-1",
        prompt_cache_key="k",
        service_tier="flex",
        metadata={"a": "b"},
        store=False,
        n=1,
    )
    body = out.body
    assert body["tools"] == [
        {
            "type": "function",
            "name": "w",
            "description": "Weather",
            "parameters": SCHEMA,
            "strict": True,
        },
        {
            "type": "function",
            "name": "n",
            "parameters": {"type": "object", "properties": {}},
            "strict": False,
        },
        {"type": "custom", "name": "patch", "format": {"type": "text"}},
    ]
    assert body["tool_choice"] == {"type": "function", "name": "w"}
    assert body["parallel_tool_calls"] is False
    assert body["max_output_tokens"] == 300  # max_completion_tokens wins
    assert (body["temperature"], body["top_p"], body["stream"]) == (0.2, 0.9, True)
    assert "stream_options" not in body  # Responses streams always carry usage
    assert body["text"] == {
        "format": {"type": "json_schema", "name": "out", "schema": SCHEMA, "strict": True},
        "verbosity": "low",
    }
    assert body["reasoning"] == {"effort": "high"}
    assert (body["user"], body["safety_identifier"], body["prompt_cache_key"]) == (
        "u-1",
        "s-1",
        "k",
    )
    assert (body["service_tier"], body["metadata"], body["store"]) == ("flex", {"a": "b"}, False)
    assert out.dropped == Dropped()


@pytest.mark.parametrize(
    ("choice", "expected"),
    [
        ("auto", "auto"),
        ("none", "none"),
        ("required", "required"),
        ({"type": "custom", "custom": {"name": "patch"}}, {"type": "custom", "name": "patch"}),
        (
            {
                "type": "allowed_tools",
                "allowed_tools": {
                    "mode": "required",
                    "tools": [{"type": "function", "function": {"name": "w"}}],
                },
            },
            {
                "type": "allowed_tools",
                "mode": "required",
                "tools": [{"type": "function", "name": "w"}],
            },
        ),
    ],
)
def test_chat_tool_choice_table(choice, expected):
    tools = [{"type": "function", "function": {"name": "w"}}]
    assert (
        chat([{"role": "user", "content": "x"}], tools=tools, tool_choice=choice).body[
            "tool_choice"
        ]
        == expected
    )


def test_chat_fields_without_a_responses_place_are_named_never_their_values():
    out = chat(
        [{"role": "user", "content": "x", "name": "SECRET-NAME"}],
        stop=["SECRET-STOP"],
        seed=7,
        frequency_penalty=0.5,
        presence_penalty=0.1,
        logit_bias={"50256": -100},
        logprobs=True,
        top_logprobs=2,
        store=True,
        modalities=["text"],
        prediction={"type": "content", "content": "SECRET"},
        web_search_options={},
        tools=[{"type": "web_search"}],
        tool_choice="required",
        x_unknown_field={"y": 1},
        seed_null=None,
    )
    assert out.dropped.fields == (
        "messages.name",
        "store",
        "tool_choice",
        "stop",
        "seed",
        "frequency_penalty",
        "presence_penalty",
        "logit_bias",
        "logprobs",
        "top_logprobs",
        "modalities",
        "prediction",
        "web_search_options",
        "x_unknown_field",
    )
    assert out.dropped.tools == ("web_search",)
    assert out.body["store"] is False
    assert "tools" not in out.body and "tool_choice" not in out.body
    assert b"SECRET" not in orjson.dumps(out.dropped.fields)


@pytest.mark.parametrize(
    ("body", "param"),
    [
        ({"messages": []}, "messages"),
        ({"messages": [{"role": "robot", "content": "x"}]}, "messages[0].role"),
        ({"messages": [{"role": "user", "content": 5}]}, "messages[0].content"),
        (
            {"messages": [{"role": "user", "content": [{"type": "video"}]}]},
            "messages[0].content[0].type",
        ),
        ({"messages": [{"role": "tool", "content": "x"}]}, "messages[0].tool_call_id"),
        (
            {
                "messages": [
                    {
                        "role": "assistant",
                        "tool_calls": [{"id": "c", "function": {"name": "f", "arguments": {}}}],
                    }
                ]
            },
            "messages[0].tool_calls[0].function.arguments",
        ),
        ({"messages": [{"role": "user", "content": "x"}], "n": 2}, "n"),
        ({"messages": [{"role": "user", "content": "x"}], "max_tokens": "9"}, "max_tokens"),
        (
            {"messages": [{"role": "user", "content": "x"}], "response_format": {"type": "yaml"}},
            "response_format.type",
        ),
        (
            {
                "messages": [{"role": "user", "content": "x"}],
                "tools": [{"type": "function", "function": {"name": "f"}}],
                "tool_choice": {"type": "f"},
            },
            "tool_choice",
        ),
    ],
)
def test_chat_malformed_bodies_are_refused_naming_the_field(body, param):
    with pytest.raises(InvalidRequest) as info:
        from_chat(body, "gpt-up")
    assert info.value.param == param


# --- Anthropic Messages -> Responses ---------------------------------------------------------


def test_messages_minimal_body():
    out = messages([{"role": "user", "content": "hi"}])
    assert out.body == {
        "model": "gpt-up",
        "store": False,
        "input": [user_item(text("hi"))],
        "max_output_tokens": 256,
    }
    assert out.dropped == Dropped()


def test_messages_system_becomes_instructions_and_inner_system_entries_stay_in_place():
    out = messages(
        [
            {"role": "user", "content": "hi"},
            {"role": "system", "content": "Late note."},
            {"role": "user", "content": "again"},
        ],
        system=[{"type": "text", "text": "One."}, {"type": "text", "text": "Two."}],
    )
    assert out.body["instructions"] == "One.\n\nTwo."
    assert [(i["role"], i["content"][0]["text"]) for i in out.body["input"]] == [
        ("user", "hi"),
        ("system", "Late note."),
        ("user", "again"),
    ]


def test_messages_tool_use_and_results_keep_ids_results_lead_their_turn():
    out = messages(
        [
            {"role": "user", "content": "weather and time?"},
            {
                "role": "assistant",
                "content": [
                    {"type": "thinking", "thinking": "SECRET-THOUGHT", "signature": "sig"},
                    {"type": "text", "text": "Checking."},
                    {"type": "tool_use", "id": "toolu_1", "name": "w", "input": {"city": "Zürich"}},
                    {"type": "tool_use", "id": "toolu_2", "name": "t", "input": {}},
                ],
            },
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "Here:"},
                    {"type": "tool_result", "tool_use_id": "toolu_1", "content": "sunny"},
                    {
                        "type": "tool_result",
                        "tool_use_id": "toolu_2",
                        "is_error": True,
                        "content": [{"type": "text", "text": "no clock"}],
                    },
                ],
            },
        ]
    )
    assert out.body["input"][1:] == [
        {
            "type": "message",
            "role": "assistant",
            "content": [{"type": "output_text", "text": "Checking."}],
        },
        {
            "type": "function_call",
            "call_id": "toolu_1",
            "name": "w",
            "arguments": '{"city":"Zürich"}',
        },
        {"type": "function_call", "call_id": "toolu_2", "name": "t", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "toolu_1", "output": "sunny"},
        {"type": "function_call_output", "call_id": "toolu_2", "output": "Error: no clock"},
        user_item(text("Here:")),
    ]
    assert out.dropped.items == {"thinking": 1}
    assert b"SECRET" not in orjson.dumps(out.body)


def test_messages_images_documents_and_image_results():
    out = messages(
        [
            {
                "role": "user",
                "content": [
                    {
                        "type": "image",
                        "source": {
                            "type": "base64",
                            "media_type": "image/png",
                            "data": "iVBORw0KGgo=",
                        },
                    },
                    {"type": "image", "source": {"type": "url", "url": "https://x.test/a.png"}},
                    {"type": "image", "source": {"type": "file", "file_id": "file_1"}},
                    {
                        "type": "document",
                        "source": {
                            "type": "base64",
                            "media_type": "application/pdf",
                            "data": "JVBE",
                        },
                        "title": "a.pdf",
                    },
                    {
                        "type": "document",
                        "source": {"type": "text", "media_type": "text/plain", "data": "plain"},
                    },
                    {"type": "document", "source": {"type": "url", "url": "https://x.test/b.pdf"}},
                    {
                        "type": "tool_result",
                        "tool_use_id": "toolu_1",
                        "content": [
                            {"type": "text", "text": "chart:"},
                            {
                                "type": "image",
                                "source": {"type": "url", "url": "https://x.test/c.png"},
                            },
                        ],
                    },
                    {"type": "search_result", "source": "s", "title": "t", "content": []},
                ],
            }
        ]
    )
    result, message = out.body["input"]
    assert result == {
        "type": "function_call_output",
        "call_id": "toolu_1",
        "output": [
            text("chart:"),
            {"type": "input_image", "image_url": "https://x.test/c.png", "detail": "auto"},
        ],
    }
    assert message["content"] == [
        {"type": "input_image", "image_url": PNG, "detail": "auto"},
        {"type": "input_image", "image_url": "https://x.test/a.png", "detail": "auto"},
        {
            "type": "input_file",
            "file_data": "data:application/pdf;base64,JVBE",
            "filename": "a.pdf",
        },
        text("plain"),
        {"type": "input_file", "file_url": "https://x.test/b.pdf"},
    ]
    assert out.dropped.items == {"image": 1, "search_result": 1}


def test_messages_tools_choice_thinking_and_user_id():
    user_id = "user_" + "a" * 70 + "_account__session_x"
    out = messages(
        [{"role": "user", "content": "x"}],
        tools=[
            {
                "name": "w",
                "description": "Weather",
                "input_schema": SCHEMA,
                "cache_control": {"type": "ephemeral"},
            },
            {"type": "custom", "name": "n", "input_schema": SCHEMA, "strict": True},
            {"type": "web_search_20250305", "name": "web_search"},
            {"type": "bash_20250124", "name": "bash"},
        ],
        tool_choice={"type": "tool", "name": "w", "disable_parallel_tool_use": True},
        thinking={"type": "enabled", "budget_tokens": 2048},
        metadata={"user_id": user_id},
        temperature=1,
        stream=True,
    )
    body = out.body
    assert body["tools"] == [
        {
            "type": "function",
            "name": "w",
            "description": "Weather",
            "parameters": SCHEMA,
            "strict": False,
        },
        {"type": "function", "name": "n", "parameters": SCHEMA, "strict": True},
    ]
    assert body["tool_choice"] == {"type": "function", "name": "w"}
    assert body["parallel_tool_calls"] is False
    assert body["reasoning"] == {"summary": "auto", "effort": "low"}
    assert len(body["safety_identifier"]) == 64 and user_id not in orjson.dumps(body).decode()
    assert (body["temperature"], body["stream"]) == (1, True)
    assert out.dropped.tools == ("web_search_20250305", "bash_20250124")
    assert out.dropped.fields == ("cache_control",)


@pytest.mark.parametrize(
    ("fields", "reasoning", "dropped"),
    [
        (
            {"thinking": {"type": "enabled", "budget_tokens": 1024}},
            {"summary": "auto", "effort": "low"},
            (),
        ),
        (
            {"thinking": {"type": "enabled", "budget_tokens": 8000}},
            {"summary": "auto", "effort": "medium"},
            (),
        ),
        (
            {"thinking": {"type": "enabled", "budget_tokens": 32000}},
            {"summary": "auto", "effort": "high"},
            (),
        ),
        ({"thinking": {"type": "adaptive"}}, {"summary": "auto"}, ()),
        (
            {"thinking": {"type": "adaptive"}, "output_config": {"effort": "max"}},
            {"summary": "auto", "effort": "xhigh"},
            (),
        ),
        (
            {"output_config": {"effort": "low", "task_budget": 5}},
            {"effort": "low"},
            ("output_config",),
        ),
        ({"thinking": {"type": "disabled"}}, None, ("thinking",)),
    ],
)
def test_messages_thinking_and_effort(fields, reasoning, dropped):
    out = messages([{"role": "user", "content": "x"}], **fields)
    assert out.body.get("reasoning") == reasoning
    assert out.dropped.fields == dropped


def test_messages_output_format_becomes_text_format():
    config = {"format": {"type": "json_schema", "schema": SCHEMA}}
    out = messages([{"role": "user", "content": "x"}], output_config=config)
    assert out.body["text"] == {
        "format": {"type": "json_schema", "name": "response", "schema": SCHEMA}
    }


@pytest.mark.parametrize(
    ("choice", "expected"),
    [({"type": "auto"}, "auto"), ({"type": "any"}, "required"), ({"type": "none"}, "none")],
)
def test_messages_tool_choice_table(choice, expected):
    tools = [{"name": "w", "input_schema": SCHEMA}]
    out = messages([{"role": "user", "content": "x"}], tools=tools, tool_choice=choice)
    assert out.body["tool_choice"] == expected
    assert "parallel_tool_calls" not in out.body


def test_messages_anthropic_only_fields_are_named():
    out = messages(
        [
            {
                "role": "user",
                "content": [{"type": "text", "text": "x", "cache_control": {"type": "ephemeral"}}],
            }
        ],
        stop_sequences=["SECRET"],
        top_k=5,
        service_tier="auto",
        container="c",
        context_management={"edits": []},
        mcp_servers=[],
        tools=[{"type": "web_search_20250305", "name": "web_search"}],
        tool_choice={"type": "auto"},
    )
    assert out.dropped.fields == (
        "cache_control",
        "tool_choice",
        "stop_sequences",
        "top_k",
        "service_tier",
        "container",
        "context_management",
        "mcp_servers",
    )
    assert "tools" not in out.body and "tool_choice" not in out.body


@pytest.mark.parametrize(
    ("turns", "param"),
    [
        ("x", "messages"),
        ([{"role": "robot", "content": "x"}], "messages[0].role"),
        ([{"role": "user", "content": 3}], "messages[0].content"),
        ([{"role": "user", "content": [{"text": "no type"}]}], "messages[0].content[0]"),
        (
            [
                {
                    "role": "assistant",
                    "content": [{"type": "tool_use", "id": "t", "name": "f", "input": "x"}],
                }
            ],
            "messages[0].content[0].input",
        ),
        (
            [{"role": "user", "content": [{"type": "tool_result"}]}],
            "messages[0].content[0].tool_use_id",
        ),
        (
            [{"role": "user", "content": [{"type": "image", "source": "x"}]}],
            "messages[0].content[0].source",
        ),
    ],
)
def test_messages_malformed_bodies_are_refused_naming_the_field(turns, param):
    with pytest.raises(InvalidRequest) as info:
        messages(turns)
    assert info.value.param == param


def test_messages_bad_tool_choice_is_refused():
    with pytest.raises(InvalidRequest) as info:
        messages(
            [{"role": "user", "content": "x"}], tools=[{"name": "w"}], tool_choice={"type": "best"}
        )
    assert info.value.param == "tool_choice"
