"""Request translation between OpenAI Chat Completions and Anthropic Messages, both directions."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest

from gateway.errors import InvalidRequest
from gateway.translate.anthropic_openai import translate_request as to_openai
from gateway.translate.openai_anthropic import translate_request as to_anthropic

FIXTURES = Path(__file__).resolve().parent / "fixtures"

PNG_B64 = "iVBORw0KGgoAAAANSUhEUg=="
WEATHER_SCHEMA = {
    "type": "object",
    "properties": {"city": {"type": "string"}},
    "required": ["city"],
}


def fixture_body(name: str) -> dict[str, Any]:
    path = FIXTURES / "openai_chat" / name
    assert path.is_file(), f"fixture {path} is absent"
    return orjson.loads(path.read_bytes())


def user(content: Any) -> dict[str, Any]:
    return {"role": "user", "content": content}


def text(value: str) -> dict[str, Any]:
    return {"type": "text", "text": value}


def oa(messages: list[dict[str, Any]], **fields: Any) -> dict[str, Any]:
    return to_anthropic({"model": "gpt-4o", "messages": messages, **fields}, "claude-up").body


def ao(messages: list[dict[str, Any]], **fields: Any) -> dict[str, Any]:
    body = {"model": "claude-x", "max_tokens": 256, "messages": messages, **fields}
    return to_openai(body, "gpt-up").body


def weather_call(call_id: str, city: str) -> dict[str, Any]:
    arguments = orjson.dumps({"city": city}).decode()
    return {
        "id": call_id,
        "type": "function",
        "function": {"name": "weather", "arguments": arguments},
    }


# --- OpenAI -> Anthropic: messages -----------------------------------------------------------


def test_oa_minimal_body_sets_model_default_max_tokens_and_nothing_else() -> None:
    assert oa([user("hi")]) == {
        "model": "claude-up",
        "max_tokens": 4096,
        "messages": [{"role": "user", "content": [text("hi")]}],
    }


def test_oa_system_and_developer_messages_are_all_folded_into_system() -> None:
    out = oa(
        [
            {"role": "system", "content": "You are terse."},
            user("hi"),
            {"role": "developer", "content": [text("Rule one."), text("Rule two.")]},
            {"role": "assistant", "content": "hello"},
            {"role": "system", "content": "Late note."},
            user("again"),
        ]
    )
    assert out["system"] == "You are terse.\n\nRule one.\nRule two.\n\nLate note."
    assert [m["role"] for m in out["messages"]] == ["user", "assistant", "user"]
    assert out["messages"][2]["content"] == [text("again")]


def test_oa_empty_system_message_adds_no_system_field() -> None:
    assert "system" not in oa([{"role": "system", "content": ""}, user("hi")])


def test_oa_user_parts_text_and_both_image_kinds() -> None:
    out = oa(
        [
            user(
                [
                    text("What is in these?"),
                    {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG_B64}"}},
                    {
                        "type": "image_url",
                        "image_url": {"url": "https://example.com/cat.jpg", "detail": "high"},
                    },
                ]
            )
        ]
    )
    assert out["messages"][0]["content"] == [
        text("What is in these?"),
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG_B64}},
        {"type": "image", "source": {"type": "url", "url": "https://example.com/cat.jpg"}},
    ]


@pytest.mark.parametrize(
    "url", ["data:image/png,notbase64", "data:;base64,AAAA", "ftp://example.com/x.png"]
)
def test_oa_bad_image_url_is_rejected_with_its_path(url: str) -> None:
    part = {"type": "image_url", "image_url": {"url": url}}
    with pytest.raises(InvalidRequest) as info:
        oa([user([text("look"), part])])
    assert info.value.param == "messages[0].content[1].image_url.url"


def test_oa_unsupported_user_part_is_rejected_with_its_path() -> None:
    audio = {"type": "input_audio", "input_audio": {"data": "AAAA", "format": "wav"}}
    with pytest.raises(InvalidRequest) as info:
        oa([user([text("listen"), audio])])
    assert info.value.param == "messages[0].content[1].type"
    assert "input_audio" in info.value.message


def test_oa_multi_turn_parallel_tool_calls_and_results() -> None:
    out = oa(
        [
            {"role": "system", "content": "Use tools."},
            user("Weather in Paris and Oslo?"),
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [weather_call("call_Ab1", "Paris"), weather_call("call_Zz9", "Oslo")],
            },
            {"role": "tool", "tool_call_id": "call_Ab1", "content": "18C"},
            {"role": "tool", "tool_call_id": "call_Zz9", "content": [text("9C"), text("rain")]},
            user("And tomorrow?"),
            {
                "role": "assistant",
                "content": "Checking.",
                "tool_calls": [weather_call("c3", "Oslo")],
            },
            {"role": "tool", "tool_call_id": "c3", "content": "10C"},
        ]
    )
    assert out["system"] == "Use tools."
    assert out["messages"] == [
        {"role": "user", "content": [text("Weather in Paris and Oslo?")]},
        {
            "role": "assistant",
            "content": [
                {
                    "type": "tool_use",
                    "id": "call_Ab1",
                    "name": "weather",
                    "input": {"city": "Paris"},
                },
                {
                    "type": "tool_use",
                    "id": "call_Zz9",
                    "name": "weather",
                    "input": {"city": "Oslo"},
                },
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "call_Ab1", "content": "18C"},
                {
                    "type": "tool_result",
                    "tool_use_id": "call_Zz9",
                    "content": [text("9C"), text("rain")],
                },
                text("And tomorrow?"),
            ],
        },
        {
            "role": "assistant",
            "content": [
                text("Checking."),
                {"type": "tool_use", "id": "c3", "name": "weather", "input": {"city": "Oslo"}},
            ],
        },
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "c3", "content": "10C"}],
        },
    ]


def test_oa_tool_results_lead_their_user_turn_even_after_user_text() -> None:
    out = oa(
        [
            {"role": "assistant", "content": "", "tool_calls": [weather_call("call_1", "Rome")]},
            user("note first"),
            {"role": "tool", "tool_call_id": "call_1", "content": ""},
        ]
    )
    assert out["messages"][1]["content"] == [
        {"type": "tool_result", "tool_use_id": "call_1"},
        text("note first"),
    ]
    assert out["messages"][0]["content"] == [
        {"type": "tool_use", "id": "call_1", "name": "weather", "input": {"city": "Rome"}}
    ]


@pytest.mark.parametrize("arguments", ["", "  ", None])
def test_oa_empty_or_missing_arguments_become_empty_input(arguments: str | None) -> None:
    function: dict[str, Any] = {"name": "now"}
    if arguments is not None:
        function["arguments"] = arguments
    call = {"id": "call_n", "type": "function", "function": function}
    out = oa([user("time?"), {"role": "assistant", "content": None, "tool_calls": [call]}])
    assert out["messages"][1]["content"] == [
        {"type": "tool_use", "id": "call_n", "name": "now", "input": {}}
    ]


@pytest.mark.parametrize("arguments", ['{"city": "Par', '["Paris"]', '"Paris"', "42"])
def test_oa_arguments_that_are_not_a_json_object_are_rejected(arguments: str) -> None:
    bad = {"id": "call_b", "type": "function", "function": {"name": "w", "arguments": arguments}}
    messages = [
        user("a"),
        {"role": "assistant", "content": None, "tool_calls": [weather_call("call_a", "Paris")]},
        {"role": "tool", "tool_call_id": "call_a", "content": "ok"},
        {"role": "assistant", "content": None, "tool_calls": [bad]},
    ]
    with pytest.raises(InvalidRequest) as info:
        oa(messages)
    assert info.value.param == "messages[3].tool_calls[0].function.arguments"
    assert arguments not in info.value.message
    error = info.value
    chained = error.__cause__ or (None if error.__suppress_context__ else error.__context__)
    assert chained is None  # a JSONDecodeError's message would quote the arguments


def test_oa_legacy_function_call_and_function_message() -> None:
    out = oa(
        [
            user("time?"),
            {
                "role": "assistant",
                "content": None,
                "function_call": {"name": "now", "arguments": ""},
            },
            {"role": "function", "name": "now", "content": "12:00"},
        ]
    )
    call_id = out["messages"][1]["content"][0]["id"]
    assert out["messages"][1]["content"] == [
        {"type": "tool_use", "id": call_id, "name": "now", "input": {}}
    ]
    assert out["messages"][2]["content"] == [
        {"type": "tool_result", "tool_use_id": call_id, "content": "12:00"}
    ]


def test_oa_function_message_without_a_call_is_rejected() -> None:
    with pytest.raises(InvalidRequest) as info:
        oa([user("x"), {"role": "function", "name": "now", "content": "12:00"}])
    assert info.value.param == "messages[1]"


def test_oa_consecutive_same_role_messages_are_merged_and_empty_text_dropped() -> None:
    out = oa(
        [
            user("one"),
            {"role": "assistant", "content": ""},
            user(""),
            user([text("two"), text("")]),
            {"role": "assistant", "content": "three"},
            {"role": "assistant", "content": [text("four"), {"type": "refusal", "refusal": "no"}]},
            user("five"),
        ]
    )
    assert out["messages"] == [
        {"role": "user", "content": [text("one"), text("two")]},
        {"role": "assistant", "content": [text("three"), text("four"), text("no")]},
        {"role": "user", "content": [text("five")]},
    ]


@pytest.mark.parametrize(
    ("messages", "param"),
    [
        ("hello", "messages"),
        ([], "messages"),
        (["hello"], "messages[0]"),
        ([{"role": "robot", "content": "x"}], "messages[0].role"),
        ([{"content": "x"}], "messages[0].role"),
        ([user(42)], "messages[0].content"),
        ([{"role": "tool", "content": "x"}], "messages[0].tool_call_id"),
        (
            [{"role": "assistant", "tool_calls": [{"type": "function"}]}],
            "messages[0].tool_calls[0].id",
        ),
        ([{"role": "system", "content": [{"type": "image_url"}]}], "messages[0].content[0].type"),
        (
            [{"role": "system", "content": [{"type": "refusal", "refusal": "x"}]}],
            "messages[0].content[0].type",
        ),
    ],
)
def test_oa_malformed_messages_are_rejected_with_the_field_named(messages: Any, param: str) -> None:
    with pytest.raises(InvalidRequest) as info:
        to_anthropic({"model": "m", "messages": messages}, "claude-up")
    assert info.value.param == param
    assert param in info.value.message


# --- OpenAI -> Anthropic: parameters and tools -----------------------------------------------


def test_oa_tools_are_mapped_and_missing_parameters_get_an_empty_object_schema() -> None:
    tools = [
        {
            "type": "function",
            "function": {
                "name": "weather",
                "description": "Get weather",
                "parameters": WEATHER_SCHEMA,
            },
        },
        {"type": "function", "function": {"name": "now"}},
    ]
    assert oa([user("x")], tools=tools)["tools"] == [
        {"name": "weather", "description": "Get weather", "input_schema": WEATHER_SCHEMA},
        {"name": "now", "input_schema": {"type": "object", "properties": {}}},
    ]


def test_oa_non_function_tool_is_rejected() -> None:
    tools = [{"type": "custom", "custom": {"name": "grammar"}}]
    with pytest.raises(InvalidRequest) as info:
        oa([user("x")], tools=tools)
    assert info.value.param == "tools[0]"


NOW_TOOL = [{"type": "function", "function": {"name": "now"}}]


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        ({"tool_choice": "none"}, {"type": "none"}),
        ({"tool_choice": "auto"}, {"type": "auto"}),
        ({"tool_choice": "required"}, {"type": "any"}),
        (
            {"tool_choice": {"type": "function", "function": {"name": "now"}}},
            {"type": "tool", "name": "now"},
        ),
        ({"parallel_tool_calls": False}, {"type": "auto", "disable_parallel_tool_use": True}),
        (
            {"tool_choice": "required", "parallel_tool_calls": False},
            {"type": "any", "disable_parallel_tool_use": True},
        ),
        (
            {
                "tool_choice": {"type": "function", "function": {"name": "now"}},
                "parallel_tool_calls": False,
            },
            {"type": "tool", "name": "now", "disable_parallel_tool_use": True},
        ),
        ({"tool_choice": "none", "parallel_tool_calls": False}, {"type": "none"}),
        ({"tool_choice": "auto", "parallel_tool_calls": True}, {"type": "auto"}),
    ],
)
def test_oa_tool_choice_table(fields: dict[str, Any], expected: dict[str, Any]) -> None:
    assert oa([user("x")], tools=NOW_TOOL, **fields)["tool_choice"] == expected


def test_oa_no_tool_choice_and_parallel_default_adds_no_tool_choice() -> None:
    out = oa([user("x")], tools=NOW_TOOL, parallel_tool_calls=True)
    assert "tool_choice" not in out
    assert out["tools"] == [{"name": "now", "input_schema": {"type": "object", "properties": {}}}]


@pytest.mark.parametrize("choice", ["sometimes", {"type": "allowed_tools"}, 3])
def test_oa_unknown_tool_choice_is_rejected(choice: Any) -> None:
    with pytest.raises(InvalidRequest) as info:
        oa([user("x")], tools=NOW_TOOL, tool_choice=choice)
    assert info.value.param == "tool_choice"


@pytest.mark.parametrize(
    ("stop", "expected"),
    [("END", ["END"]), (["END", "\n\nHuman:"], ["END", "\n\nHuman:"])],
)
def test_oa_stop_string_or_list_becomes_stop_sequences(stop: Any, expected: list[str]) -> None:
    assert oa([user("x")], stop=stop)["stop_sequences"] == expected


def test_oa_stop_null_adds_nothing_and_bad_stop_is_rejected() -> None:
    assert "stop_sequences" not in oa([user("x")], stop=None)
    with pytest.raises(InvalidRequest) as info:
        oa([user("x")], stop=[1])
    assert info.value.param == "stop"


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        ({"max_completion_tokens": 300, "max_tokens": 100}, 300),
        ({"max_tokens": 100}, 100),
        ({"max_completion_tokens": 77}, 77),
        ({}, 4096),
    ],
)
def test_oa_max_tokens_spellings(fields: dict[str, Any], expected: int) -> None:
    assert oa([user("x")], **fields)["max_tokens"] == expected


def test_oa_default_max_tokens_is_configurable() -> None:
    body = {"model": "m", "messages": [user("x")]}
    assert to_anthropic(body, "claude-up", default_max_tokens=1234).body["max_tokens"] == 1234


def test_oa_bad_max_tokens_is_rejected() -> None:
    with pytest.raises(InvalidRequest) as info:
        oa([user("x")], max_completion_tokens="many")
    assert info.value.param == "max_completion_tokens"


def test_oa_n_greater_than_one_is_rejected_and_n_one_is_fine() -> None:
    with pytest.raises(InvalidRequest) as info:
        oa([user("x")], n=2)
    assert info.value.param == "n"
    assert "n" not in oa([user("x")], n=1)


def test_oa_sampling_user_and_stream_are_copied_and_openai_only_fields_named_as_dropped() -> None:
    body = {
        "model": "gpt-4o",
        "messages": [user("x")],
        "temperature": 0.2,
        "top_p": 0.9,
        "user": "user-42",
        "stream": True,
        "stream_options": {"include_usage": True},
        "response_format": {"type": "json_object"},
        "seed": 7,
        "logprobs": True,
        "top_logprobs": 2,
        "presence_penalty": 0.5,
        "frequency_penalty": 0.5,
        "store": True,
        "metadata": {"team": "a"},
        "service_tier": "flex",
        "logit_bias": {"1": 2},
    }
    translation = to_anthropic(body, "claude-up")
    assert translation.body == {
        "model": "claude-up",
        "max_tokens": 4096,
        "messages": [{"role": "user", "content": [text("x")]}],
        "temperature": 0.2,
        "top_p": 0.9,
        "metadata": {"user_id": "user-42"},
        "stream": True,
    }
    assert translation.dropped.fields == (
        "frequency_penalty",
        "logit_bias",
        "logprobs",
        "metadata",
        "presence_penalty",
        "response_format",
        "seed",
        "service_tier",
        "store",
        "top_logprobs",
    )


def test_oa_stream_false_is_copied_as_false() -> None:
    assert oa([user("x")], stream=False)["stream"] is False


def test_oa_envoy_chat_tools_fixture() -> None:
    body = fixture_body("envoy__chat-tools.request.json")
    out = to_anthropic(body, "claude-sonnet-4-5").body
    assert out == {
        "model": "claude-sonnet-4-5",
        "max_tokens": 4096,
        "messages": [
            {"role": "user", "content": [text("What is the weather like in Boston today?")]}
        ],
        "tools": [
            {
                "name": "get_current_weather",
                "description": "Get the current weather in a given location",
                "input_schema": body["tools"][0]["function"]["parameters"],
            }
        ],
        "tool_choice": {"type": "auto"},
    }
    assert out["tools"][0]["input_schema"]["required"] == ["location"]


def test_oa_envoy_chat_streaming_fixture() -> None:
    body = fixture_body("envoy__chat-streaming.request.json")
    assert to_anthropic(body, "claude-haiku").body == {
        "model": "claude-haiku",
        "max_tokens": 4096,
        "messages": [{"role": "user", "content": [text("Hello!")]}],
        "stream": True,
    }


# --- Anthropic -> OpenAI ---------------------------------------------------------------------


def test_ao_minimal_body() -> None:
    assert ao([user("hi")]) == {
        "model": "gpt-up",
        "messages": [{"role": "user", "content": "hi"}],
        "max_completion_tokens": 256,
    }


def test_ao_system_blocks_with_cache_control_become_one_leading_system_message() -> None:
    system = [
        {"type": "text", "text": "You are Claude Code."},
        {"type": "text", "text": "Be careful.", "cache_control": {"type": "ephemeral"}},
    ]
    out = ao([user("hi")], system=system)
    assert out["messages"][0] == {
        "role": "system",
        "content": "You are Claude Code.\n\nBe careful.",
    }
    assert b"cache_control" not in orjson.dumps(out)


def test_ao_system_string() -> None:
    assert ao([user("hi")], system="Be brief.")["messages"][0] == {
        "role": "system",
        "content": "Be brief.",
    }


def test_ao_user_blocks_images_both_kinds_and_dropped_blocks() -> None:
    out = ao(
        [
            user(
                [
                    text("Compare"),
                    {
                        "type": "image",
                        "source": {"type": "base64", "media_type": "image/png", "data": PNG_B64},
                    },
                    {
                        "type": "image",
                        "source": {"type": "url", "url": "https://example.com/a.jpg"},
                    },
                    {"type": "image", "source": {"type": "file", "file_id": "file_1"}},
                    {"type": "document", "source": {"type": "text", "data": "doc"}},
                    {"type": "brand_new_block", "payload": 1},
                    text(""),
                ]
            )
        ]
    )
    assert out["messages"] == [
        {
            "role": "user",
            "content": [
                text("Compare"),
                {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG_B64}"}},
                {"type": "image_url", "image_url": {"url": "https://example.com/a.jpg"}},
            ],
        }
    ]


def test_ao_multi_turn_parallel_tool_use_and_results() -> None:
    out = ao(
        [
            user("Weather in Paris and Oslo?"),
            {
                "role": "assistant",
                "content": [
                    {"type": "thinking", "thinking": "two calls", "signature": "sig"},
                    text("Let me check "),
                    text("both."),
                    {
                        "type": "tool_use",
                        "id": "toolu_01A",
                        "name": "weather",
                        "input": {"city": "Paris"},
                    },
                    {
                        "type": "tool_use",
                        "id": "toolu_01B",
                        "name": "weather",
                        "input": {"city": "Oslo"},
                    },
                ],
            },
            user(
                [
                    {"type": "tool_result", "tool_use_id": "toolu_01A", "content": "18C"},
                    {
                        "type": "tool_result",
                        "tool_use_id": "toolu_01B",
                        "content": [text("service down"), text("retry later")],
                        "is_error": True,
                    },
                    text("Summarize."),
                ]
            ),
        ]
    )
    assert out["messages"] == [
        {"role": "user", "content": "Weather in Paris and Oslo?"},
        {
            "role": "assistant",
            "content": "Let me check both.",
            "tool_calls": [
                {
                    "id": "toolu_01A",
                    "type": "function",
                    "function": {"name": "weather", "arguments": '{"city":"Paris"}'},
                },
                {
                    "id": "toolu_01B",
                    "type": "function",
                    "function": {"name": "weather", "arguments": '{"city":"Oslo"}'},
                },
            ],
        },
        {"role": "tool", "tool_call_id": "toolu_01A", "content": "18C"},
        {
            "role": "tool",
            "tool_call_id": "toolu_01B",
            "content": "Error: service down\nretry later",
        },
        {"role": "user", "content": [text("Summarize.")]},
    ]


def test_ao_tool_results_come_before_text_placed_earlier_in_the_turn() -> None:
    out = ao(
        [
            user(
                [
                    text("before"),
                    {"type": "tool_result", "tool_use_id": "toolu_X", "is_error": True},
                    {"type": "redacted_thinking", "data": "opaque"},
                ]
            )
        ]
    )
    assert out["messages"] == [
        {"role": "tool", "tool_call_id": "toolu_X", "content": "Error: "},
        {"role": "user", "content": [text("before")]},
    ]


def test_ao_assistant_with_only_tool_use_has_null_content_and_empty_input() -> None:
    out = ao(
        [
            user("t?"),
            {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "now"}]},
        ]
    )
    assert out["messages"][1] == {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": "t1", "type": "function", "function": {"name": "now", "arguments": "{}"}}
        ],
    }


def test_ao_assistant_string_and_thinking_only_content() -> None:
    out = ao(
        [
            user("a"),
            {"role": "assistant", "content": "plain"},
            user("b"),
            {
                "role": "assistant",
                "content": [{"type": "thinking", "thinking": "", "signature": "s"}],
            },
        ]
    )
    assert out["messages"][1] == {"role": "assistant", "content": "plain"}
    assert out["messages"][3] == {"role": "assistant", "content": ""}


def test_ao_role_system_inside_messages_becomes_a_system_message_in_place() -> None:
    out = ao(
        [
            user("hi"),
            {"role": "system", "content": [{"type": "text", "text": "Reminder: be safe."}]},
            {"role": "system", "content": "Plain reminder."},
        ],
        system="Top.",
    )
    assert out["messages"] == [
        {"role": "system", "content": "Top."},
        {"role": "user", "content": "hi"},
        {"role": "system", "content": "Reminder: be safe."},
        {"role": "system", "content": "Plain reminder."},
    ]


def test_ao_tools_custom_kept_server_tools_dropped() -> None:
    tools = [
        {"name": "weather", "description": "Get weather", "input_schema": WEATHER_SCHEMA},
        {"type": "custom", "name": "now", "input_schema": {"type": "object"}},
        {"type": "web_search_20250305", "name": "web_search", "max_uses": 3},
        {"type": "bash_20250124", "name": "bash"},
        {"name": "bare"},
    ]
    assert ao([user("x")], tools=tools)["tools"] == [
        {
            "type": "function",
            "function": {
                "name": "weather",
                "description": "Get weather",
                "parameters": WEATHER_SCHEMA,
            },
        },
        {"type": "function", "function": {"name": "now", "parameters": {"type": "object"}}},
        {
            "type": "function",
            "function": {"name": "bare", "parameters": {"type": "object", "properties": {}}},
        },
    ]


WEATHER_TOOL = [{"name": "weather", "input_schema": WEATHER_SCHEMA}]


@pytest.mark.parametrize(
    ("choice", "expected"),
    [
        ({"type": "auto"}, "auto"),
        ({"type": "any"}, "required"),
        ({"type": "none"}, "none"),
        (
            {"type": "tool", "name": "weather"},
            {"type": "function", "function": {"name": "weather"}},
        ),
    ],
)
def test_ao_tool_choice_table(choice: dict[str, Any], expected: Any) -> None:
    out = ao([user("x")], tools=WEATHER_TOOL, tool_choice=choice)
    assert out["tool_choice"] == expected
    assert "parallel_tool_calls" not in out


def test_ao_disable_parallel_tool_use_maps_to_parallel_tool_calls_false() -> None:
    choice = {"type": "any", "disable_parallel_tool_use": True}
    out = ao([user("x")], tools=WEATHER_TOOL, tool_choice=choice)
    assert (out["tool_choice"], out["parallel_tool_calls"]) == ("required", False)


def test_ao_tool_choice_is_dropped_when_no_tool_survives() -> None:
    tools = [{"type": "web_search_20250305", "name": "web_search"}]
    out = ao(
        [user("x")], tools=tools, tool_choice={"type": "auto", "disable_parallel_tool_use": True}
    )
    assert {"tools", "tool_choice", "parallel_tool_calls"}.isdisjoint(out)


def test_ao_unknown_tool_choice_is_rejected() -> None:
    with pytest.raises(InvalidRequest) as info:
        ao([user("x")], tools=WEATHER_TOOL, tool_choice={"type": "sometimes"})
    assert info.value.param == "tool_choice"


def test_ao_parameters_are_mapped_and_anthropic_only_fields_named_as_dropped() -> None:
    body = {
        "model": "claude-x",
        "max_tokens": 256,
        "messages": [user("x")],
        "stop_sequences": ["END", "STOP"],
        "temperature": 0.3,
        "top_p": 0.8,
        "top_k": 5,
        "metadata": {"user_id": "user_abc_account_123"},
        "context_management": {"edits": []},
        "container": "cont_1",
        "mcp_servers": [{"type": "url", "url": "https://mcp.example.com", "name": "m"}],
        "stream": False,
    }
    translation = to_openai(body, "gpt-up")
    assert translation.body == {
        "model": "gpt-up",
        "messages": [{"role": "user", "content": "x"}],
        "max_completion_tokens": 256,
        "temperature": 0.3,
        "top_p": 0.8,
        "stop": ["END", "STOP"],
        "user": "user_abc_account_123",
        "stream": False,
    }
    assert translation.dropped.fields == ("container", "context_management", "mcp_servers", "top_k")


def test_ao_stream_true_asks_for_usage() -> None:
    out = ao([user("x")], stream=True)
    assert out["stream"] is True
    assert out["stream_options"] == {"include_usage": True}


def test_ao_claude_code_style_body() -> None:
    cache = {"type": "ephemeral"}
    body = {
        "model": "claude-sonnet-4-5",
        "max_tokens": 32000,
        "stream": True,
        "thinking": {"type": "adaptive"},
        "output_config": {"effort": "medium"},
        "context_management": {"edits": [{"type": "clear_thinking_20251015"}]},
        "metadata": {"user_id": "user_0f3a_account__session_9b1c"},
        "system": [
            {"type": "text", "text": "x-anthropic-billing-header: cc_version=2.1"},
            {"type": "text", "text": "You are Claude Code.", "cache_control": cache},
        ],
        "tools": [
            {
                "name": "Bash",
                "description": "Run a command",
                "input_schema": {"type": "object", "properties": {"command": {"type": "string"}}},
            }
        ],
        "messages": [
            {
                "role": "user",
                "content": [{"type": "text", "text": "list files", "cache_control": cache}],
            },
            {
                "role": "assistant",
                "content": [
                    {"type": "thinking", "thinking": "ls", "signature": "EqQ"},
                    {
                        "type": "tool_use",
                        "id": "toolu_01Q",
                        "name": "Bash",
                        "input": {"command": "ls"},
                    },
                ],
            },
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": "toolu_01Q",
                        "content": [{"type": "text", "text": "a.py\nb.py"}],
                        "cache_control": cache,
                    }
                ],
            },
            {"role": "system", "content": "<system-reminder>todo list empty</system-reminder>"},
        ],
    }
    translation = to_openai(body, "gpt-5")
    assert translation.dropped.fields == ("context_management",)
    assert translation.dropped.items == {"thinking": 1}
    assert translation.body == {
        "model": "gpt-5",
        "messages": [
            {
                "role": "system",
                "content": "x-anthropic-billing-header: cc_version=2.1\n\nYou are Claude Code.",
            },
            {"role": "user", "content": [text("list files")]},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "toolu_01Q",
                        "type": "function",
                        "function": {"name": "Bash", "arguments": '{"command":"ls"}'},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "toolu_01Q", "content": "a.py\nb.py"},
            {"role": "system", "content": "<system-reminder>todo list empty</system-reminder>"},
        ],
        "max_completion_tokens": 32000,
        "user": "user_0f3a_account__session_9b1c",
        "stream": True,
        "stream_options": {"include_usage": True},
        "reasoning_effort": "medium",
        "tools": [
            {
                "type": "function",
                "function": {
                    "name": "Bash",
                    "description": "Run a command",
                    "parameters": {"type": "object", "properties": {"command": {"type": "string"}}},
                },
            }
        ],
    }


@pytest.mark.parametrize(
    ("body", "param"),
    [
        ({"messages": "hi"}, "messages"),
        ({"messages": [3]}, "messages[0]"),
        ({"messages": [{"role": "tool", "content": "x"}]}, "messages[0].role"),
        ({"messages": [user(5)]}, "messages[0].content"),
        ({"messages": [user([{"text": "no type"}])]}, "messages[0].content[0]"),
        ({"messages": [user([{"type": "tool_result"}])]}, "messages[0].content[0].tool_use_id"),
        (
            {
                "messages": [
                    {
                        "role": "assistant",
                        "content": [{"type": "tool_use", "id": "t", "name": "n", "input": "x"}],
                    }
                ]
            },
            "messages[0].content[0].input",
        ),
        ({"messages": [], "system": 7}, "system"),
        ({"messages": [], "tools": {"name": "x"}}, "tools"),
    ],
)
def test_ao_malformed_bodies_are_rejected_with_the_field_named(
    body: dict[str, Any], param: str
) -> None:
    with pytest.raises(InvalidRequest) as info:
        to_openai({"model": "m", "max_tokens": 5, **body}, "gpt-up")
    assert info.value.param == param
    assert param in info.value.message


def test_round_trip_keeps_tool_ids_arguments_and_order() -> None:
    openai_body = {
        "model": "gpt-4o",
        "messages": [
            user("Weather?"),
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [weather_call("call_Ab1", "Paris"), weather_call("call_Zz9", "Oslo")],
            },
            {"role": "tool", "tool_call_id": "call_Ab1", "content": "18C"},
            {"role": "tool", "tool_call_id": "call_Zz9", "content": "9C"},
        ],
    }
    back = to_openai(to_anthropic(openai_body, "claude-up").body, "gpt-4o").body
    assert back["messages"] == [
        {"role": "user", "content": [text("Weather?")]},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [weather_call("call_Ab1", "Paris"), weather_call("call_Zz9", "Oslo")],
        },
        {"role": "tool", "tool_call_id": "call_Ab1", "content": "18C"},
        {"role": "tool", "tool_call_id": "call_Zz9", "content": "9C"},
    ]


def test_an_allowed_tools_choice_sends_only_those_tools_to_anthropic():
    from gateway.translate.responses_anthropic import translate_request as responses_to_anthropic

    tools = [{"type": "function", "function": {"name": n}} for n in ("a", "b", "c")]
    allowed = {"mode": "required", "tools": [{"type": "function", "function": {"name": "b"}}]}
    body = {
        "messages": [{"role": "user", "content": "hi"}],
        "tools": tools,
        "tool_choice": {"type": "allowed_tools", "allowed_tools": allowed},
    }
    out = to_anthropic(body, "claude-x").body
    assert [t["name"] for t in out["tools"]] == ["b"]
    assert out["tool_choice"] == {"type": "any"}

    responses = {
        "model": "m",
        "input": "hi",
        "tools": [{"type": "function", "name": n} for n in ("a", "b")],
        "tool_choice": {"type": "allowed_tools", "mode": "auto", "tools": [
            {"type": "function", "name": "a"}]},
    }  # fmt: skip
    out = responses_to_anthropic(responses, "claude-x").body
    assert [t["name"] for t in out["tools"]] == ["a"]
    assert out["tool_choice"] == {"type": "auto"}
