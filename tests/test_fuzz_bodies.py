"""Structurally malformed bodies never reach a 500: a refusal is a 4xx in the endpoint's format.

Hypothesis builds bodies with the right top-level keys and wrong types and shapes at every level
(messages, Responses input items, content blocks, tools, tool choices, stop sequences, numbers,
unicode, lone surrogates, NaN and huge numbers, nesting up to past the JSON parser's limit),
and now and then a top-level value that is no object at all, and sends them, as raw HTTP, to
the three endpoints (Chat Completions, Messages, Responses), streaming or not, on every kind of
route of the test stack: same-format (`oa-*` from an OpenAI client, `an-*` from an Anthropic
one), cross-format (every Responses route), a same-format route that renames the model, and the
mock. The upstream plays a valid answer for whatever passes validation, so anything but a 2xx
(a JSON object, or a stream that ends with its format's terminal event) or a 4xx in the
endpoint's own error JSON is a gateway bug.

GATEWAY_FUZZ_EXAMPLES=5000 GATEWAY_FUZZ_RANDOM=1 runs a longer, randomized search.
"""

from __future__ import annotations

import copy
import http.client
import json
import os
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import orjson
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from tests.scenarios import Answer, script_for
from tests.test_bad_input import assert_error

OA = "/v1/chat/completions"
AN = "/v1/messages"
RS = "/v1/responses"
ERRORS = {OA: "openai", AN: "anthropic", RS: "openai"}  # the shape of each one's error JSON
EXAMPLES = int(os.environ.get("GATEWAY_FUZZ_EXAMPLES", "800"))
RANDOM = os.environ.get("GATEWAY_FUZZ_RANDOM") == "1"

FIELDS = [
    "model", "messages", "role", "content", "type", "text", "tools", "tool_choice", "function",
    "name", "parameters", "input_schema", "arguments", "input", "id", "tool_calls",
    "tool_call_id", "tool_use_id", "system", "stop", "stop_sequences", "max_tokens",
    "metadata", "user_id", "stream", "stream_options", "include_usage", "thinking", "source",
    "image_url", "url", "media_type", "data", "is_error", "cache_control", "description",
    "input", "instructions", "max_output_tokens", "call_id", "output", "summary", "reasoning",
    "include", "store", "previous_response_id", "strict", "format",
]  # fmt: skip
ROLES = ["user", "assistant", "system", "developer", "tool", "function", "model", ""]
BLOCKS = ["text", "image", "image_url", "tool_use", "tool_result", "thinking", "document", ""]
ITEMS = ["message", "function_call", "function_call_output", "reasoning", "input_text"]
ITEMS += ["output_text", "input_image", "custom_tool_call", "web_search_call", ""]


@dataclass(frozen=True)
class Deep:
    """A value nested `depth` levels, written into the JSON text as it is sent."""

    depth: int
    kind: str  # "[" or "{"

    def text(self) -> str:
        if self.kind == "[":
            return "[" * self.depth + "]" * self.depth
        return '{"a":' * self.depth + "1" + "}" * self.depth


def deep_json(depth: int, kind: str) -> str:
    return Deep(depth, kind).text()


ints = st.one_of(
    st.integers(-(2**70), 2**70),
    st.sampled_from([0, -1, 1, 2**31, 2**53 + 1, 2**63 - 1, 2**63, 2**64 - 1, 2**64, 10**30]),
)
floats = st.one_of(
    st.floats(allow_nan=False, allow_infinity=False),
    st.sampled_from([1e308, -1e308, 5e-324, -0.0, 0.5, 1.5]),
)
texts = st.one_of(
    st.text(max_size=12),
    st.sampled_from(["\x00", "\u202e", "😀", "null", "{}", "[]", "data:", "http://"]),
    st.sampled_from(FIELDS + ROLES + BLOCKS),
)
deeps = st.builds(Deep, st.integers(100, 1000), st.sampled_from(["[", "{"]))
# Not JSON at all once written: rare, or they would hide everything else.
not_json = st.one_of(
    st.sampled_from([float("nan"), float("inf"), "\ud800", "a\udfffb"]),
    st.builds(Deep, st.integers(1025, 1100), st.sampled_from(["[", "{"])),
)
scalars = st.one_of(st.none(), st.booleans(), ints, floats, texts, texts, ints)
junk = st.recursive(
    st.one_of(scalars, scalars, scalars, scalars, scalars, deeps, not_json),
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.dictionaries(st.one_of(st.sampled_from(FIELDS), st.text(max_size=6)), inner, max_size=4),
    ),
    max_leaves=10,
)


def maybe(strategy: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """Mostly the shaped value, sometimes anything at all."""
    return st.one_of(strategy, strategy, junk)


arguments = st.one_of(
    texts,
    junk.map(lambda v: encode(v).decode("utf-8", "surrogatepass")),
    st.builds(deep_json, st.integers(100, 1100), st.sampled_from(["[", "{"])),
    st.just('{"city": "Paris"}'),
    junk,
)
schema = st.one_of(junk, deeps, st.just({"type": "object", "properties": {}}))
source = st.fixed_dictionaries(
    {},
    optional={
        "type": maybe(st.sampled_from(["base64", "url", "file"])),
        "media_type": maybe(texts),
        "data": maybe(texts),
        "url": maybe(st.sampled_from(["https://x.test/a.png", "data:image/png;base64,AAAA"])),
    },
)
block = st.fixed_dictionaries(
    {"type": maybe(st.sampled_from(BLOCKS))},
    optional={
        "text": maybe(texts),
        "source": maybe(source),
        "image_url": maybe(st.fixed_dictionaries({}, optional={"url": maybe(texts)})),
        "id": maybe(texts),
        "name": maybe(texts),
        "input": maybe(st.one_of(junk, deeps, st.just({}))),
        "tool_use_id": maybe(texts),
        "content": maybe(st.one_of(texts, st.lists(junk, max_size=3))),
        "is_error": junk,
        "cache_control": junk,
        "citations": junk,
    },
)
content = st.one_of(texts, st.lists(maybe(block), max_size=4), junk)
function = st.fixed_dictionaries(
    {}, optional={"name": maybe(texts), "arguments": arguments, "parameters": schema}
)
tool_call = st.fixed_dictionaries(
    {}, optional={"id": maybe(texts), "type": maybe(texts), "function": maybe(function)}
)
message = st.fixed_dictionaries(
    {},
    optional={
        "role": maybe(st.sampled_from(ROLES)),
        "content": content,
        "tool_calls": maybe(st.lists(maybe(tool_call), max_size=3)),
        "tool_call_id": maybe(texts),
        "function_call": maybe(function),
        "name": maybe(texts),
    },
)
tool = st.fixed_dictionaries(
    {},
    optional={
        "type": maybe(st.sampled_from(["function", "custom", "web_search_20250305", "bash"])),
        "name": maybe(texts),
        "description": junk,
        "input_schema": schema,
        "function": maybe(function),
    },
)
tool_choice = st.one_of(
    st.sampled_from(["auto", "none", "required", "any"]),
    st.fixed_dictionaries(
        {},
        optional={
            "type": maybe(st.sampled_from(["auto", "any", "tool", "none", "function"])),
            "name": maybe(texts),
            "function": maybe(st.fixed_dictionaries({}, optional={"name": maybe(texts)})),
            "disable_parallel_tool_use": junk,
        },
    ),
    junk,
)
body = st.fixed_dictionaries(
    {"messages": maybe(st.lists(maybe(message), max_size=5))},
    optional={
        "tools": maybe(st.lists(maybe(tool), max_size=3)),
        "tool_choice": tool_choice,
        "parallel_tool_calls": junk,
        "stop": maybe(st.one_of(texts, st.lists(texts, max_size=3))),
        "stop_sequences": maybe(st.lists(texts, max_size=3)),
        "max_tokens": maybe(ints),
        "max_completion_tokens": maybe(ints),
        "temperature": maybe(floats),
        "top_p": maybe(floats),
        "n": maybe(ints),
        "user": maybe(texts),
        "metadata": maybe(st.fixed_dictionaries({}, optional={"user_id": maybe(texts)})),
        "system": maybe(st.one_of(texts, st.lists(maybe(block), max_size=3))),
        "thinking": maybe(st.fixed_dictionaries({}, optional={"type": texts})),
        "stream": st.one_of(st.booleans(), junk),
        "stream_options": maybe(st.fixed_dictionaries({}, optional={"include_usage": junk})),
        "response_format": junk,
    },
)
ROUTES = ["oa", "an", "oa-renamed", "mock-text", "mock-agent", "mock-parallel-tools"]

WEATHER = {
    "type": "object",
    "properties": {"city": {"type": "string"}},
    "required": ["city"],
}
OPENAI_BASE: dict[str, Any] = {
    "max_tokens": 64,
    "temperature": 0.5,
    "top_p": 1,
    "stop": ["END"],
    "user": "u1",
    "stream_options": {"include_usage": True},
    "parallel_tool_calls": False,
    "tool_choice": {"type": "function", "function": {"name": "get_weather"}},
    "tools": [
        {
            "type": "function",
            "function": {"name": "get_weather", "description": "d", "parameters": WEATHER},
        }
    ],
    "messages": [
        {"role": "system", "content": "Be brief."},
        {"role": "developer", "content": [{"type": "text", "text": "dev"}]},
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "Weather?"},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}},
                {"type": "image_url", "image_url": "https://x.test/a.png"},
            ],
        },
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": [{"type": "text", "text": "Sun"}]},
        {"role": "assistant", "content": None, "function_call": {"name": "f", "arguments": "{}"}},
        {"role": "function", "name": "f", "content": "done"},
        {"role": "assistant", "content": [{"type": "refusal", "refusal": "no"}]},
        {"role": "user", "content": "thanks"},
    ],
}
ANTHROPIC_BASE: dict[str, Any] = {
    "max_tokens": 64,
    "system": [{"type": "text", "text": "Be brief.", "cache_control": {"type": "ephemeral"}}],
    "temperature": 0.5,
    "top_k": 5,
    "stop_sequences": ["END"],
    "metadata": {"user_id": "u1"},
    "thinking": {"type": "enabled", "budget_tokens": 1024},
    "tools": [
        {"name": "get_weather", "description": "d", "input_schema": WEATHER},
        {"type": "web_search_20250305", "name": "web_search"},
    ],
    "tool_choice": {"type": "tool", "name": "get_weather", "disable_parallel_tool_use": True},
    "messages": [
        {"role": "system", "content": "Claude Code puts these here"},
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "Weather?"},
                {
                    "type": "image",
                    "source": {"type": "base64", "media_type": "image/png", "data": "AAAA"},
                },
                {"type": "image", "source": {"type": "url", "url": "https://x.test/a.png"}},
            ],
        },
        {
            "role": "assistant",
            "content": [
                {"type": "thinking", "thinking": "hmm", "signature": "s"},
                {"type": "text", "text": "Let me check."},
                {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"a": 1}},
            ],
        },
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_1",
                    "content": [{"type": "text", "text": "Sunny"}],
                    "is_error": True,
                },
                {"type": "document", "source": {"type": "text", "data": "x"}},
            ],
        },
        {"role": "assistant", "content": "It is sunny."},
        {"role": "user", "content": "thanks"},
    ],
}


RESPONSES_BASE: dict[str, Any] = {
    "instructions": "Be brief.",
    "max_output_tokens": 64,
    "temperature": 0.5,
    "top_p": 1,
    "store": False,
    "parallel_tool_calls": True,
    "reasoning": {"effort": "low", "summary": "auto"},
    "include": ["reasoning.encrypted_content"],
    "text": {"format": {"type": "text"}},
    "tool_choice": {"type": "function", "name": "get_weather"},
    "tools": [
        {"type": "function", "name": "get_weather", "description": "d", "parameters": WEATHER},
        {"type": "web_search_preview"},
    ],
    "input": [
        {"role": "developer", "content": "dev"},
        {
            "role": "user",
            "content": [
                {"type": "input_text", "text": "Weather?"},
                {"type": "input_image", "image_url": "data:image/png;base64,AAAA"},
            ],
        },
        {"type": "reasoning", "id": "rs_1", "summary": []},
        {
            "type": "message",
            "role": "assistant",
            "content": [{"type": "output_text", "text": "On it."}],
        },
        {
            "type": "function_call",
            "call_id": "call_1",
            "name": "get_weather",
            "arguments": '{"city": "Paris"}',
        },
        {"type": "function_call_output", "call_id": "call_1", "output": "Sun"},
        {"role": "user", "content": "thanks"},
    ],
}
BASES = {OA: OPENAI_BASE, AN: ANTHROPIC_BASE, RS: RESPONSES_BASE}


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [prefix]
    if isinstance(value, dict):
        for key, child in value.items():
            out += _paths(child, (*prefix, key))
    elif isinstance(value, list):
        for index, child in enumerate(value):
            out += _paths(child, (*prefix, index))
    return out


def _at(value: Any, path: tuple[Any, ...]) -> Any:
    for part in path:
        value = value[part]
    return value


@st.composite
def mutated(draw: st.DrawFn, base: dict[str, Any]) -> dict[str, Any]:
    """A valid body with one to three of its values, at any depth, broken."""
    out = copy.deepcopy(base)
    for _ in range(draw(st.integers(1, 3))):
        paths = _paths(out)[1:]
        if not paths:
            break
        # A level first, then a path at that level: the top-level fields are hit as often as
        # the deepest ones.
        level = draw(st.integers(1, max(len(p) for p in paths)))
        path = draw(st.sampled_from([p for p in paths if len(p) == level] or paths))
        parent, key = _at(out, path[:-1]), path[-1]
        op = draw(st.sampled_from(["replace", "replace", "delete", "wrap", "add"]))
        if op == "replace":
            parent[key] = draw(st.one_of(scalars, junk))
        elif op == "delete":
            del parent[key]
        elif op == "wrap":
            parent[key] = draw(st.sampled_from([[parent[key]], {"x": parent[key]}]))
        elif isinstance(parent[key], dict):
            parent[key][draw(st.sampled_from(FIELDS))] = draw(junk)
        elif isinstance(parent[key], list):
            parent[key].insert(draw(st.integers(0, len(parent[key]))), draw(junk))
    return out


@st.composite
def top_level(draw: st.DrawFn, base: dict[str, Any]) -> dict[str, Any]:
    """A valid body with one top-level field of the wrong type."""
    out = copy.deepcopy(base)
    key = draw(st.sampled_from([*base, "stop", "n", "user", "stream_options"]))
    out[key] = draw(st.one_of(scalars, junk))
    return out


@st.composite
def cases(draw: st.DrawFn) -> tuple[str, str, Any]:
    path = draw(st.sampled_from([OA, AN, RS]))
    route = draw(st.sampled_from(ROUTES))
    if draw(st.integers(0, 19)) == 19:  # not an object at all
        return path, "none", draw(st.one_of(scalars, st.lists(junk, max_size=3), junk))
    own = BASES[path]
    other = BASES[draw(st.sampled_from([p for p in BASES if p != path]))]
    payload = draw(
        st.one_of(
            mutated(own), mutated(own), top_level(own), mutated(other), top_level(other), body
        )
    )
    if draw(st.integers(0, 9)) == 9:
        payload["stream"] = draw(junk)
    elif "stream" not in payload or draw(st.booleans()):
        payload["stream"] = draw(st.booleans())
    stream = payload.get("stream") is True
    # Mostly a routable model (hypothesis favours small integers: 0 is the usual case).
    payload["model"] = model_name(route, stream) if draw(st.integers(0, 9)) < 9 else draw(junk)
    return path, route, payload


def model_name(route: str, stream: bool) -> str:
    if route.startswith("mock-"):
        return route
    if route == "oa-renamed" and not stream:
        return "oa-renamed"
    return f"{route[:2]}-fuzz-{'s' if stream else 'w'}"


def encode(value: Any) -> bytes:
    """JSON text (stdlib: NaN, huge integers and lone surrogates as Python writes them), with
    each Deep placeholder replaced by its nested text."""
    deeps: list[Deep] = []

    def default(obj: Any) -> Any:
        if isinstance(obj, Deep):
            deeps.append(obj)
            return f"\x00DEEP{len(deeps) - 1}\x00"
        raise TypeError(type(obj).__name__)

    text = json.dumps(value, default=default)
    for n, deep in enumerate(deeps):
        text = text.replace(json.dumps(f"\x00DEEP{n}\x00"), deep.text(), 1)
    return text.encode("utf-8", "surrogatepass")


@pytest.fixture(scope="module")
def scripted(stack: Any) -> Any:
    for wire, prefix in (("openai", "oa"), ("anthropic", "an")):
        for stream in (False, True):
            model = model_name(prefix, stream)
            stack.upstream.script(model, script_for(wire, Answer(text="ok"), model, stream))
    renamed = "oa-renamed-target"
    stack.upstream.script(renamed, script_for("openai", Answer(text="ok"), renamed, False))
    return stack


def send(base: str, path: str, raw: bytes) -> tuple[int, dict[str, str], bytes]:
    url = urlsplit(base)
    conn = http.client.HTTPConnection(url.hostname, url.port, timeout=20)
    headers = {"content-type": "application/json"}
    if path == AN:
        headers["anthropic-version"] = "2023-06-01"
    try:
        conn.request("POST", path, body=raw, headers=headers)
        resp = conn.getresponse()
        return resp.status, {k.lower(): v for k, v in resp.getheaders()}, resp.read()
    finally:
        conn.close()


# The event that ends a stream of each endpoint: its normal end, or its error event.
TERMINAL = {
    OA: lambda kind, data: data == b"[DONE]" or b'"error"' in data[:10],
    AN: lambda kind, data: kind in (b"message_stop", b"error"),
    RS: lambda kind, data: (
        kind in (b"response.completed", b"response.incomplete", b"response.failed")
    ),
}


def assert_success(path: str, headers: dict[str, str], data: bytes) -> None:
    """A 2xx is a JSON object, or an event stream whose last event ends it."""
    if headers["content-type"].startswith("text/event-stream"):
        last = [block for block in data.split(b"\n\n") if block.strip()][-1]
        kind, payload = b"", b""
        for line in last.split(b"\n"):
            if line.startswith(b"event: "):
                kind = line[7:]
            elif line.startswith(b"data: "):
                payload = line[6:]
        assert TERMINAL[path](kind, payload), last[:500]
    else:
        assert isinstance(orjson.loads(data), dict), data[:500]


@settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=not RANDOM,
    database=None,
    suppress_health_check=list(HealthCheck),
)
@given(case=cases())
def test_malformed_bodies_never_reach_a_500(scripted, case):
    path, route, payload = case
    raw = encode(payload)
    status, headers, data = send(scripted.urls["withhold"], path, raw)
    event(f"{path} {route} {status}")
    assert status < 500, (status, data[:500], raw[:2000])
    if status >= 400:
        assert_error(ERRORS[path], status, headers, data, status)
    else:
        assert_success(path, headers, data)
