"""OpenAI-compatible servers' departures as quirk flags (`[providers.X.quirks]`).

The loopback server at /compat (tests/azure_upstream.py) rejects what real servers reject:
`max_completion_tokens` with Mistral's 422, `stream_options` and `parallel_tool_calls` with
vLLM's 400. Route `cp-*` reaches it without flags (so each case fails there), `cq-*` with them
(so it answers), `co-*` the same server taking every field, for what needs no flag. Its own
finish reasons, streams without `[DONE]`, calls without ids, and the recorded DeepSeek, Groq,
Mistral and xAI streams are read through the real openai and anthropic SDKs.
"""

from __future__ import annotations

import re
import tomllib
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anthropic
import openai
import orjson
import pytest

from gateway.events import Stop, StopReason
from gateway.formats.registry import wire_for
from gateway.formats.sse import SSEFrame
from gateway.settings import ConfigError, parse_settings
from providers.quirks import OpenAIQuirks
from tests.azure_upstream import AzureStack, Script, body, chunk, sse, usage_chunk
from tests.fixtures_util import payload_lines, stream_body

ROOT = Path(__file__).resolve().parent.parent
MESSAGES = [{"role": "user", "content": "Weather in Paris?"}]
SCHEMA = {"type": "object", "properties": {"city": {"type": "string"}}}


@pytest.fixture(scope="module")
def compat(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AzureStack]:
    stack = AzureStack(Path(tmp_path_factory.mktemp("compat")))
    stack.start()
    yield stack
    stack.stop()


def name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def oai(stack: AzureStack) -> openai.OpenAI:
    return openai.OpenAI(base_url=stack.url + "/v1", api_key="sk-client", max_retries=0)


def ant(stack: AzureStack) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=stack.url, api_key="sk-client", max_retries=0)


def text_stream(text: str = "Sunny.", finish: str = "stop", done: bool = True) -> Script:
    return Script(
        chunks=sse(
            [chunk({"role": "assistant", "content": text}), chunk({}, finish), usage_chunk()],
            done=done,
        )
    )


def sent(stack: AzureStack, model: str) -> dict[str, Any]:
    return stack.upstream.received[model][-1].body


def collect(stream: Any) -> tuple[str, str | None, Any]:
    text, finish, ext = "", None, None
    for event in stream:
        extra = getattr(event, "gateway", None)
        ext = extra if extra is not None else ext
        for choice in event.choices:
            text += choice.delta.content or ""
            finish = choice.finish_reason or finish
    return text, finish, ext


# --- request-side flags: what the upstream receives ---------------------------------------------


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
def test_max_tokens_field_renames_the_budget(compat: AzureStack, stream: bool) -> None:
    """The anthropic client's max_tokens is translated to max_completion_tokens, which the
    server refuses with 422 (stream_options too, when streamed) unless the flags apply."""
    for prefix in ("cp", "cq"):
        model = name(prefix)
        compat.upstream.script(
            model, text_stream() if stream else Script(body=body({"content": "Sunny."}, "stop"))
        )
        kwargs: dict[str, Any] = {"model": model, "max_tokens": 64, "messages": MESSAGES}
        if prefix == "cp":
            with pytest.raises(anthropic.APIStatusError) as caught:
                if stream:
                    with ant(compat).messages.stream(**kwargs) as events:
                        events.get_final_message()
                else:
                    ant(compat).messages.create(**kwargs)
            assert caught.value.status_code == 422
            continue
        if stream:
            with ant(compat).messages.stream(**kwargs) as events:
                message = events.get_final_message()
        else:
            message = ant(compat).messages.create(**kwargs)
        assert message.content[0].type == "text" and message.content[0].text == "Sunny."
        got = sent(compat, model)
        assert got["max_tokens"] == 64 and "max_completion_tokens" not in got
        assert "stream_options" not in got


def test_stream_options_false_drops_it_and_the_stream_may_lack_usage(
    compat: AzureStack,
) -> None:
    for prefix in ("cp", "cq"):
        model = name(prefix)
        objects = [chunk({"role": "assistant", "content": "Sunny."}), chunk({}, "stop")]
        compat.upstream.script(model, Script(chunks=sse(objects)))  # no usage chunk
        kwargs: dict[str, Any] = {
            "model": model,
            "messages": MESSAGES,
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        if prefix == "cp":
            with pytest.raises(openai.BadRequestError):
                oai(compat).chat.completions.create(**kwargs)
            continue
        assert collect(oai(compat).chat.completions.create(**kwargs))[:2] == ("Sunny.", "stop")
        assert "stream_options" not in sent(compat, model)
        record = compat.record(model)
        # No usage came: the counts stay unknown and unpriced, and the key's budget still
        # counts the exchange by an estimate kept apart, about four characters a token: the
        # request as the gateway built it (before the flag dropped `stream_options`, so a
        # little over what arrived) and "Sunny." (2).
        assert record["input_tokens"] is None and record["output_tokens"] is None
        assert record["cost_usd"] is None
        arrived = -(-compat.upstream.received[model][-1].size // 4)
        assert arrived + 2 <= record["estimated_tokens"] <= arrived + 2 + 16
        assert record["truncated"] == 0


def test_strip_fields_drops_what_the_server_rejects(compat: AzureStack) -> None:
    tools = [{"type": "function", "function": {"name": "weather", "parameters": SCHEMA}}]
    for prefix in ("cp", "cq"):
        model = name(prefix)
        compat.upstream.script(model, Script(body=body({"content": "Sunny."}, "stop")))
        kwargs: dict[str, Any] = {
            "model": model,
            "messages": MESSAGES,
            "tools": tools,
            "parallel_tool_calls": False,
        }
        if prefix == "cp":
            with pytest.raises(openai.BadRequestError):
                oai(compat).chat.completions.create(**kwargs)
            continue
        done = oai(compat).chat.completions.create(**kwargs)
        assert done.choices[0].message.content == "Sunny."
        got = sent(compat, model)
        assert "parallel_tool_calls" not in got and got["tools"] == tools


def test_no_flag_leaves_the_clients_bytes_alone() -> None:
    raw = b'{"model":"m",  "max_completion_tokens":5,"stream_options":{"include_usage":true}}'
    assert OpenAIQuirks().rewrite_body(raw) is raw
    assert OpenAIQuirks(strip_fields=("store",)).rewrite_body(raw) is raw  # nothing to strip
    rewritten = OpenAIQuirks(max_tokens_field="max_tokens", stream_options=False).rewrite_body(raw)
    assert orjson.loads(rewritten) == {"model": "m", "max_tokens": 5}


# --- decode-side: the server's own finish reasons -----------------------------------------------


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
def test_own_finish_reasons_are_read_by_the_flag(compat: AzureStack, stream: bool) -> None:
    """`max_new_tokens` (a TGI-style value) is LENGTH with the flag, UNKNOWN without it (and
    then goes through to the OpenAI client as the upstream sent it)."""
    expected = {"cq": ("length", "length", True), "co": ("max_new_tokens", "unknown", False)}
    for prefix, (finish_seen, stop_recorded, truncated) in expected.items():
        model = name(prefix)
        if stream:
            compat.upstream.script(model, text_stream("It is sunny and", "max_new_tokens"))
            text, finish, ext = collect(
                oai(compat).chat.completions.create(
                    model=model,
                    messages=MESSAGES,  # type: ignore[arg-type]
                    stream=True,
                )
            )
        else:
            script = Script(body=body({"content": "It is sunny and"}, "max_new_tokens"))
            compat.upstream.script(model, script)
            done = oai(compat).chat.completions.create(model=model, messages=MESSAGES)  # type: ignore[arg-type]
            text, finish = done.choices[0].message.content or "", done.choices[0].finish_reason
            ext = done.gateway  # type: ignore[attr-defined]
        assert (text, finish) == ("It is sunny and", finish_seen)
        assert (ext["stop_reason"], ext["native_stop_reason"]) == (stop_recorded, "max_new_tokens")
        assert ext["truncated"] is truncated
        record = compat.record(model)
        assert (record["stop_reason"], record["native_stop_reason"]) == (
            stop_recorded,
            "max_new_tokens",
        )
        assert bool(record["truncated"]) is truncated


def test_own_finish_reasons_reach_the_anthropic_client(compat: AzureStack) -> None:
    model = name("cq")
    compat.upstream.script(model, text_stream("It is sunny and", "max_new_tokens"))
    with ant(compat).messages.stream(model=model, max_tokens=64, messages=MESSAGES) as events:  # type: ignore[arg-type]
        message = events.get_final_message()
    assert message.stop_reason == "max_tokens"


def test_wire_with_stop_reasons_reads_streams_and_bodies() -> None:
    wire = wire_for("openai").with_stop_reasons({"eos": StopReason.STOP})
    assert wire_for("openai").with_stop_reasons({}) is wire_for("openai")
    assert wire.stop_reason("eos") is StopReason.STOP and wire.stop_reason("length") is (
        StopReason.LENGTH
    )
    frame = SSEFrame(None, orjson.dumps(chunk({}, "eos")))
    stops = [e for e in wire.stream_decoder().decode(frame)[1] if isinstance(e, Stop)]
    assert [(s.reason, s.native) for s in stops] == [(StopReason.STOP, "eos")]
    whole = orjson.loads(body({"content": "x"}, "eos"))
    stops = [e for e in wire.body_events(whole) if isinstance(e, Stop)]
    assert [(s.reason, s.native) for s in stops] == [(StopReason.STOP, "eos")]
    plain = [e for e in wire_for("openai").body_events(whole) if isinstance(e, Stop)]
    assert plain[0].reason is StopReason.UNKNOWN


# --- what needs no flag -------------------------------------------------------------------------


def test_a_stream_without_done_is_complete_once_every_choice_finished(compat: AzureStack) -> None:
    """Servers that omit `data: [DONE]` (some llama.cpp and Ollama builds): no flag needed."""
    model = name("co")
    compat.upstream.script(model, text_stream(done=False))
    stream = oai(compat).chat.completions.create(model=model, messages=MESSAGES, stream=True)  # type: ignore[arg-type]
    text, finish, ext = collect(stream)
    assert (text, finish, ext["truncated"]) == ("Sunny.", "stop", False)
    record = compat.record(model)
    assert (record["terminator_seen"], record["truncated"], record["stop_reason"]) == (
        0,
        0,
        "stop",
    )


def test_a_stream_without_done_or_finish_reason_is_cut(compat: AzureStack) -> None:
    model = name("co")
    compat.upstream.script(
        model, Script(chunks=sse([chunk({"role": "assistant", "content": "Sun"})], done=False))
    )
    stream = oai(compat).chat.completions.create(model=model, messages=MESSAGES, stream=True)  # type: ignore[arg-type]
    with pytest.raises(openai.APIError):
        collect(stream)
    record = compat.record(model)
    assert (record["truncated"], record["cut_reason"]) == (1, "missing_terminator")


def test_a_tool_call_without_id_gets_a_minted_one(compat: AzureStack) -> None:
    model = name("co")
    call = {"index": 0, "type": "function", "function": {"name": "weather", "arguments": "{}"}}
    compat.upstream.script(
        model,
        Script(
            chunks=sse(
                [
                    chunk({"role": "assistant", "tool_calls": [call]}),
                    chunk({}, "tool_calls"),
                ]
            )
        ),
    )
    tools = [{"type": "function", "function": {"name": "weather", "parameters": SCHEMA}}]
    ids = []
    stream = oai(compat).chat.completions.create(
        model=model,
        messages=MESSAGES,  # type: ignore[arg-type]
        tools=tools,  # type: ignore[arg-type]
        stream=True,
    )
    for event in stream:
        for choice in event.choices:
            ids += [c.id for c in choice.delta.tool_calls or () if c.id]
    assert ids == ["call_gw_0"]


# --- the recorded streams of OpenAI-compatible servers -------------------------------------------

RECORDED = [
    ("other/vercel_ai__deepseek-tool-call.chunks.jsonl", "tool_calls", "tool_use"),
    ("other/vercel_ai__groq-tool-call.chunks.jsonl", "tool_calls", "tool_use"),
    ("other/vercel_ai__mistral-tool-call.chunks.jsonl", "tool_calls", "tool_use"),
    ("other/vercel_ai__mistral-text.chunks.jsonl", "stop", "end_turn"),
    ("other/vercel_ai__xai-tool-call.chunks.jsonl", "tool_calls", "tool_use"),
]


@pytest.mark.parametrize("done", [True, False], ids=["with-done", "without-done"])
@pytest.mark.parametrize(("fixture", "finish", "anthropic_stop"), RECORDED)
def test_recorded_compatible_streams_through_the_gateway(
    compat: AzureStack, fixture: str, finish: str, anthropic_stop: str, done: bool
) -> None:
    objects = [orjson.loads(line) for line in payload_lines(fixture)]
    raw = stream_body(fixture) if done else b"".join(sse(objects, done=False))
    tools = [{"type": "function", "function": {"name": "weather", "parameters": SCHEMA}}]
    model = name("co")
    compat.upstream.script(model, Script(chunks=[raw]))
    stream = oai(compat).chat.completions.create(
        model=model,
        messages=MESSAGES,  # type: ignore[arg-type]
        tools=tools,  # type: ignore[arg-type]
        stream=True,
    )
    _, seen, ext = collect(stream)
    assert (seen, ext["stop_reason"], ext["truncated"]) == (finish, finish, False)
    record = compat.record(model)
    assert (record["stop_reason"], record["native_stop_reason"]) == (finish, finish)
    assert record["terminator_seen"] == (1 if done else 0)
    # The anthropic client's translated request carries max_completion_tokens and
    # stream_options, which /compat refuses: it goes through `cq`'s flags.
    model = name("cq")
    compat.upstream.script(model, Script(chunks=[raw]))
    kwargs: dict[str, Any] = {
        "model": model,
        "max_tokens": 64,
        "messages": MESSAGES,
        "tools": [{"name": "weather", "input_schema": SCHEMA}],
    }
    with ant(compat).messages.stream(**kwargs) as events:
        assert events.get_final_message().stop_reason == anthropic_stop


# --- settings and the example entries ------------------------------------------------------------


@pytest.mark.parametrize(
    ("quirks", "kind", "message"),
    [
        ({"bogus": True}, "openai", "providers.x.quirks.bogus: unknown key"),
        ({"finish_reasons": {"eos": "nope"}}, "openai", "providers.x.quirks.finish_reasons.eos"),
        ({"max_tokens_field": "budget"}, "openai", "providers.x.quirks.max_tokens_field"),
        ({"stream_options": False}, "anthropic", 'quirks: kind "anthropic" takes none'),
    ],
)
def test_quirk_settings_are_typed(quirks: dict[str, Any], kind: str, message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_settings({"providers": {"x": {"kind": kind, "quirks": quirks}}})
    assert message in str(caught.value)


SERVERS = ("groq", "mistral", "deepseek", "xai", "ollama", "vllm", "llamacpp", "openrouter")


def test_the_example_entries_load() -> None:
    path = ROOT / "config" / "providers.example.toml"
    data = tomllib.loads(path.read_text(encoding="utf-8"))
    settings = parse_settings(data, str(path))
    assert set(SERVERS) <= set(settings.providers)
    assert settings.providers["mistral"].quirks.max_tokens_field == "max_tokens"
    assert settings.providers["azure"].kind == "azure_openai"
    assert settings.providers["azure_v1"].api_version == "v1"


def test_the_readme_examples_load() -> None:
    text = (ROOT / "docs" / "providers" / "azure_openai.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```toml\n(.*?)```", text, re.S)
    names = set()
    for block in blocks:
        names |= set(parse_settings(tomllib.loads(block)).providers)
    assert {"azure", "azure_v1", *SERVERS} <= names
