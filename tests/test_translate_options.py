"""Request options carried across wires (structured output, reasoning, service tier, legacy
functions, strict tools), and what each translator names as dropped: every field it does not
carry, by name, never by value; server tools by type; content blocks counted by type."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from gateway.errors import InvalidRequest
from gateway.translate.anthropic_openai import translate_request as to_openai
from gateway.translate.drops import UNKNOWN_FIELD, UNKNOWN_KIND
from gateway.translate.openai_anthropic import translate_request as to_anthropic
from gateway.translate.table import translate_request
from gateway.translate.translation import Dropped, Translation

SCHEMA = {
    "type": "object",
    "properties": {"city": {"type": "string"}, "temp_c": {"type": "number"}},
    "required": ["city", "temp_c"],
    "additionalProperties": False,
}
USER = [{"role": "user", "content": "Weather in Paris as JSON"}]


def oa(**fields: Any) -> Translation:
    return to_anthropic({"model": "gpt-4o", "messages": USER, **fields}, "claude-up")


def ao(**fields: Any) -> Translation:
    body = {"model": "claude-x", "max_tokens": 2048, "messages": USER, **fields}
    return to_openai(body, "gpt-up")


def no_value_echoed(error: InvalidRequest, *values: str) -> None:
    for value in values:
        assert value not in error.message


# --- Chat -> Anthropic: structured output ------------------------------------------------------


def test_oa_json_schema_becomes_output_config_format_exactly() -> None:
    response_format = {
        "type": "json_schema",
        "json_schema": {"name": "weather", "schema": SCHEMA, "strict": True},
    }
    translation = oa(response_format=response_format)
    assert translation.body == {
        "model": "claude-up",
        "max_tokens": 4096,
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": "Weather in Paris as JSON"}]}
        ],
        "output_config": {"format": {"type": "json_schema", "schema": SCHEMA}},
    }
    assert translation.dropped == Dropped()


def test_oa_json_schema_description_is_named_and_strict_false_still_sends_the_schema() -> None:
    spec = {"name": "w", "description": "The weather", "schema": SCHEMA, "strict": False}
    translation = oa(response_format={"type": "json_schema", "json_schema": spec})
    assert translation.body["output_config"] == {
        "format": {"type": "json_schema", "schema": SCHEMA}
    }
    assert translation.dropped.fields == ("response_format.json_schema.description",)


def test_oa_json_object_has_no_anthropic_counterpart_and_is_named() -> None:
    translation = oa(response_format={"type": "json_object"})
    assert "output_config" not in translation.body
    assert translation.dropped.fields == ("response_format",)


def test_oa_text_format_is_the_default_and_not_a_drop() -> None:
    translation = oa(response_format={"type": "text"})
    assert "output_config" not in translation.body
    assert translation.dropped == Dropped()


@pytest.mark.parametrize(
    ("response_format", "param"),
    [
        ("json-please", "response_format"),
        ({"json_schema": {}}, "response_format"),
        ({"type": "json_schema"}, "response_format.json_schema"),
        (
            {"type": "json_schema", "json_schema": {"name": "x"}},
            "response_format.json_schema.schema",
        ),
        (
            {"type": "json_schema", "json_schema": {"name": "x", "schema": "secret-schema"}},
            "response_format.json_schema.schema",
        ),
    ],
)
def test_oa_malformed_response_format_is_refused_by_path(response_format: Any, param: str) -> None:
    with pytest.raises(InvalidRequest) as info:
        oa(response_format=response_format)
    assert info.value.param == param
    no_value_echoed(info.value, "json-please", "secret-schema")


# --- Chat -> Anthropic: reasoning, tier, identity, sampling -------------------------------------


@pytest.mark.parametrize(
    ("effort", "expected"),
    [
        ("minimal", "low"),
        ("low", "low"),
        ("medium", "medium"),
        ("high", "high"),
        ("xhigh", "xhigh"),
        ("max", "max"),
        ("turbo-9000", "turbo-9000"),  # enums are open: the upstream answers for it
    ],
)
def test_oa_reasoning_effort_becomes_output_config_effort(effort: str, expected: str) -> None:
    translation = oa(reasoning_effort=effort)
    assert translation.body["output_config"] == {"effort": expected}
    assert "thinking" not in translation.body
    assert translation.dropped == Dropped()


def test_oa_reasoning_effort_none_sends_no_effort_and_drops_nothing() -> None:
    translation = oa(reasoning_effort="none")
    assert "output_config" not in translation.body
    assert translation.dropped == Dropped()


def test_oa_effort_and_schema_share_one_output_config() -> None:
    spec = {"name": "w", "schema": SCHEMA}
    translation = oa(
        reasoning_effort="high", response_format={"type": "json_schema", "json_schema": spec}
    )
    assert translation.body["output_config"] == {
        "format": {"type": "json_schema", "schema": SCHEMA},
        "effort": "high",
    }


def test_oa_non_string_reasoning_effort_is_refused() -> None:
    with pytest.raises(InvalidRequest) as info:
        oa(reasoning_effort=3)
    assert info.value.param == "reasoning_effort"


@pytest.mark.parametrize(
    ("tier", "expected", "dropped"),
    [
        ("auto", "auto", ()),
        ("priority", "auto", ()),
        ("default", "standard_only", ()),
        ("flex", None, ("service_tier",)),
        ("scale", None, ("service_tier",)),
    ],
)
def test_oa_service_tier_table(tier: str, expected: str | None, dropped: tuple[str, ...]) -> None:
    translation = oa(service_tier=tier)
    assert translation.body.get("service_tier") == expected
    assert translation.dropped.fields == dropped


def test_oa_top_k_extension_is_copied() -> None:
    assert oa(top_k=40).body["top_k"] == 40


def test_oa_safety_identifier_wins_over_user_which_is_named() -> None:
    translation = oa(safety_identifier="sid-1", user="user-1")
    assert translation.body["metadata"] == {"user_id": "sid-1"}
    assert translation.dropped.fields == ("user",)
    assert oa(safety_identifier="sid-2").body["metadata"] == {"user_id": "sid-2"}


def test_oa_non_string_user_is_refused() -> None:
    with pytest.raises(InvalidRequest) as info:
        oa(user=42)
    assert info.value.param == "user"


# --- Chat -> Anthropic: tools -------------------------------------------------------------------


def test_oa_legacy_functions_and_function_call_become_tools_and_tool_choice() -> None:
    functions = [
        {"name": "weather", "description": "Get weather", "parameters": SCHEMA},
        {"name": "now"},
    ]
    translation = oa(functions=functions, function_call={"name": "weather"})
    assert translation.body["tools"] == [
        {"name": "weather", "description": "Get weather", "input_schema": SCHEMA},
        {"name": "now", "input_schema": {"type": "object", "properties": {}}},
    ]
    assert translation.body["tool_choice"] == {"type": "tool", "name": "weather"}
    assert translation.dropped == Dropped()
    assert oa(functions=functions, function_call="none").body["tool_choice"] == {"type": "none"}
    assert "tool_choice" not in oa(functions=functions).body


def test_oa_legacy_functions_beside_tools_are_named() -> None:
    tools = [{"type": "function", "function": {"name": "now"}}]
    translation = oa(tools=tools, functions=[{"name": "old"}], function_call="auto")
    assert [t["name"] for t in translation.body["tools"]] == ["now"]
    assert translation.dropped.fields == ("function_call", "functions")


def test_oa_bad_function_call_is_refused() -> None:
    with pytest.raises(InvalidRequest) as info:
        oa(functions=[{"name": "now"}], function_call="always")
    assert info.value.param == "function_call"


def test_oa_strict_function_tool_keeps_strict() -> None:
    tools = [{"type": "function", "function": {"name": "w", "parameters": SCHEMA, "strict": True}}]
    assert oa(tools=tools).body["tools"] == [{"name": "w", "input_schema": SCHEMA, "strict": True}]


def test_oa_tool_choice_forcing_a_tool_without_tools_is_named() -> None:
    assert oa(tool_choice="required").dropped.fields == ("tool_choice",)
    assert oa(tool_choice="auto", parallel_tool_calls=False).dropped == Dropped()


# --- Chat -> Anthropic: what is named as dropped ------------------------------------------------


def test_oa_every_unmapped_field_is_named_and_no_value_leaves() -> None:
    body = {
        "model": "gpt-4o",
        "messages": USER,
        "seed": 1234567,
        "logprobs": True,
        "top_logprobs": 3,
        "presence_penalty": 0.4,
        "frequency_penalty": 0.3,
        "logit_bias": {"50256": -100},
        "store": True,
        "metadata": {"team": "secret-team"},
        "verbosity": "low",
        "prompt_cache_key": "secret-cache-key",
        "modalities": ["text", "audio"],
        "audio": {"voice": "alloy", "format": "wav"},
        "prediction": {"type": "content", "content": "secret-prediction"},
        "web_search_options": {},
        "parallel_tool_calls": True,
        "stream_options": {"include_usage": True},
        "max_tokens": 100,
        "my-Secret key: sk-12345": "x",
    }
    translation = to_anthropic(body, "claude-up")
    assert translation.dropped.fields == (
        UNKNOWN_FIELD,
        "audio",
        "frequency_penalty",
        "logit_bias",
        "logprobs",
        "metadata",
        "modalities",
        "prediction",
        "presence_penalty",
        "prompt_cache_key",
        "seed",
        "store",
        "top_logprobs",
        "verbosity",
        "web_search_options",
    )
    assert translation.dropped.tools == () and translation.dropped.items == {}
    assert translation.body == {
        "model": "claude-up",
        "max_tokens": 100,
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": "Weather in Paris as JSON"}]}
        ],
    }
    names = orjson.dumps(translation.dropped.fields).decode()
    for secret in ("secret", "sk-12345", "1234567", "alloy"):
        assert secret not in names


def test_oa_default_values_and_nulls_ask_for_nothing_and_are_not_drops() -> None:
    translation = oa(
        n=1,
        logprobs=False,
        presence_penalty=0.0,
        frequency_penalty=0,
        logit_bias={},
        store=False,
        metadata={},
        modalities=["text"],
        seed=None,
        response_format=None,
        reasoning_effort=None,
    )
    assert translation.dropped == Dropped()


def test_oa_a_seed_of_zero_still_asks_for_something() -> None:
    assert oa(seed=0).dropped.fields == ("seed",)
    assert oa(presence_penalty=True).dropped.fields == ("presence_penalty",)


# --- Anthropic -> Chat: structured output -------------------------------------------------------


EXPECTED_FORMAT = {
    "type": "json_schema",
    "json_schema": {"name": "output", "schema": SCHEMA, "strict": True},
}


def test_ao_output_config_format_becomes_response_format_exactly() -> None:
    translation = ao(output_config={"format": {"type": "json_schema", "schema": SCHEMA}})
    assert translation.body == {
        "model": "gpt-up",
        "messages": [{"role": "user", "content": "Weather in Paris as JSON"}],
        "max_completion_tokens": 2048,
        "response_format": EXPECTED_FORMAT,
    }
    assert translation.dropped == Dropped()


def test_ao_beta_output_format_is_read_and_output_config_wins_over_it() -> None:
    beta = {"type": "json_schema", "schema": {"type": "object", "additionalProperties": False}}
    assert (
        ao(output_format={"type": "json_schema", "schema": SCHEMA}).body["response_format"]
        == EXPECTED_FORMAT
    )
    both = ao(
        output_config={"format": {"type": "json_schema", "schema": SCHEMA}}, output_format=beta
    )
    assert both.body["response_format"] == EXPECTED_FORMAT
    assert both.dropped.fields == ("output_format",)


def test_ao_unknown_output_format_type_and_other_output_config_parts_are_named() -> None:
    translation = ao(
        output_config={"format": {"type": "regex", "pattern": "x"}, "task_budget": {"total": 9}}
    )
    assert "response_format" not in translation.body
    assert translation.dropped.fields == ("output_config.format", "output_config.task_budget")
    assert ao(output_config={"Secret-Key": 1}).dropped.fields == ("output_config",)


@pytest.mark.parametrize(
    ("fields", "param"),
    [
        ({"output_config": "json"}, "output_config"),
        ({"output_config": {"format": "json"}}, "output_config.format"),
        ({"output_config": {"format": {"type": "json_schema"}}}, "output_config.format.schema"),
        ({"output_format": {"type": "json_schema", "schema": []}}, "output_format.schema"),
        ({"output_config": {"effort": 5}}, "output_config.effort"),
        ({"thinking": "on"}, "thinking"),
        ({"thinking": {"type": "enabled"}}, "thinking.budget_tokens"),
        ({"thinking": {"type": "enabled", "budget_tokens": "lots"}}, "thinking.budget_tokens"),
    ],
)
def test_ao_malformed_options_are_refused_by_path(fields: dict[str, Any], param: str) -> None:
    with pytest.raises(InvalidRequest) as info:
        ao(**fields)
    assert info.value.param == param
    no_value_echoed(info.value, "lots", "json")


# --- Anthropic -> Chat: reasoning ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("budget", "effort"),
    [
        (1024, "low"),
        (4000, "low"),
        (4096, "medium"),
        (10000, "medium"),
        (16384, "high"),
        (31999, "high"),
    ],
)
def test_ao_thinking_budget_becomes_reasoning_effort(budget: int, effort: str) -> None:
    translation = ao(thinking={"type": "enabled", "budget_tokens": budget})
    assert translation.body["reasoning_effort"] == effort
    assert translation.dropped == Dropped()


@pytest.mark.parametrize(
    ("thinking", "config", "expected", "dropped"),
    [
        ({"type": "adaptive"}, None, None, ()),
        ({"type": "adaptive", "display": "omitted"}, {"effort": "high"}, "high", ()),
        ({"type": "disabled"}, None, "none", ()),
        ({"type": "disabled"}, {"effort": "low"}, "none", ("output_config.effort",)),
        ({"type": "enabled", "budget_tokens": 2000}, {"effort": "xhigh"}, "xhigh", ()),
        (None, {"effort": "max"}, "max", ()),
        (None, {"effort": "medium"}, "medium", ()),
        ({"type": "between_tools"}, None, None, ()),
        ({"type": "telepathic"}, None, None, ("thinking",)),
    ],
)
def test_ao_thinking_and_effort_table(
    thinking: Any, config: Any, expected: str | None, dropped: tuple[str, ...]
) -> None:
    fields: dict[str, Any] = {}
    if thinking is not None:
        fields["thinking"] = thinking
    if config is not None:
        fields["output_config"] = config
    translation = ao(**fields)
    assert translation.body.get("reasoning_effort") == expected
    assert translation.dropped.fields == dropped


@pytest.mark.parametrize(
    ("tier", "expected", "dropped"),
    [("auto", "auto", ()), ("standard_only", "default", ()), ("batch", None, ("service_tier",))],
)
def test_ao_service_tier_table(tier: str, expected: str | None, dropped: tuple[str, ...]) -> None:
    translation = ao(service_tier=tier)
    assert translation.body.get("service_tier") == expected
    assert translation.dropped.fields == dropped


# --- Anthropic -> Chat: tools, blocks, names ----------------------------------------------------


def test_ao_strict_custom_tool_keeps_strict() -> None:
    tools = [{"name": "w", "input_schema": SCHEMA, "strict": True}]
    assert ao(tools=tools).body["tools"] == [
        {"type": "function", "function": {"name": "w", "parameters": SCHEMA, "strict": True}}
    ]


def test_ao_server_tools_are_named_by_type_and_a_forced_choice_without_tools_is_named() -> None:
    tools = [
        {"type": "web_search_20250305", "name": "web_search", "max_uses": 3},
        {"type": "bash_20250124", "name": "bash"},
        {"type": "Secret Tool Type!", "name": "x"},
    ]
    translation = ao(tools=tools, tool_choice={"type": "any"})
    assert {"tools", "tool_choice"}.isdisjoint(translation.body)
    assert translation.dropped.tools == ("web_search_20250305", "bash_20250124", UNKNOWN_KIND)
    assert translation.dropped.fields == ("tool_choice",)
    assert ao(tools=tools[:1], tool_choice={"type": "auto"}).dropped.fields == ()


def test_ao_blocks_chat_cannot_carry_are_counted_by_type() -> None:
    image_file = {"type": "image", "source": {"type": "file", "file_id": "file_1"}}
    document = {"type": "document", "source": {"type": "text", "data": "secret doc"}}
    messages = [
        {
            "role": "user",
            "content": [{"type": "text", "text": "hi"}, image_file, document, document],
        },
        {
            "role": "assistant",
            "content": [
                {"type": "thinking", "thinking": "hmm", "signature": "sig"},
                {"type": "redacted_thinking", "data": "opaque"},
                {"type": "server_tool_use", "id": "srv_1", "name": "web_search", "input": {}},
                {"type": "tool_use", "id": "t1", "name": "now", "input": {}},
            ],
        },
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "t1",
                    "content": [{"type": "text", "text": "noon"}, image_file],
                },
                {"type": "my secret block", "x": 1},
            ],
        },
    ]
    system = [{"type": "text", "text": "Be brief."}, {"type": "search_result", "source": "s"}]
    translation = to_openai(
        {"model": "c", "max_tokens": 10, "messages": messages, "system": system}, "gpt-up"
    )
    assert translation.dropped.items == {
        "search_result": 1,
        "image": 2,
        "document": 2,
        "thinking": 1,
        "redacted_thinking": 1,
        "server_tool_use": 1,
        UNKNOWN_KIND: 1,
    }
    assert translation.body["messages"][3] == {
        "role": "tool",
        "tool_call_id": "t1",
        "content": "noon",
    }


def test_ao_every_unmapped_field_is_named_and_no_value_leaves() -> None:
    body = {
        "model": "claude-x",
        "max_tokens": 64,
        "messages": USER,
        "top_k": 5,
        "container": "secret-container",
        "context_management": {"edits": [{"type": "clear_thinking_20251015"}]},
        "mcp_servers": [{"type": "url", "url": "https://secret.example.com", "name": "m"}],
        "inference_geo": "eu",
        "speed": "fast",
        "diagnostics": {"x": 1},
        "cache_control": {"type": "ephemeral"},  # OpenAI caches prefixes by itself
        "Secret-Field sk-999": True,
    }
    translation = to_openai(body, "gpt-up")
    assert translation.dropped.fields == (
        UNKNOWN_FIELD,
        "container",
        "context_management",
        "diagnostics",
        "inference_geo",
        "mcp_servers",
        "speed",
        "top_k",
    )
    assert translation.body == {
        "model": "gpt-up",
        "messages": [{"role": "user", "content": "Weather in Paris as JSON"}],
        "max_completion_tokens": 64,
    }
    names = orjson.dumps(translation.dropped.fields).decode()
    assert "secret" not in names.lower() and "sk-999" not in names


def test_ao_defaults_ask_for_nothing() -> None:
    assert ao(mcp_servers=[], speed="standard", top_k=None).dropped == Dropped()


# --- the table ----------------------------------------------------------------------------------


def test_the_table_returns_what_each_translator_dropped() -> None:
    chat = {"model": "m", "messages": USER, "seed": 1}
    assert translate_request("openai", "anthropic", chat, "claude-up").dropped.fields == ("seed",)
    messages = {"model": "m", "max_tokens": 5, "messages": USER, "top_k": 1}
    assert translate_request("anthropic", "openai", messages, "gpt-up").dropped.fields == ("top_k",)
