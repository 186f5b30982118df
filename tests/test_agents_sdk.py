"""The OpenAI Agents SDK (`openai-agents`) driven through the gateway's `/v1/responses`.

`Agent` + `Runner` + a `function_tool`, with the SDK's default client pointed at the gateway and
tracing off (it would export to api.openai.com): a two-turn tool loop completes on both upstream
wires, streamed and not; Anthropic thinking survives the SDK's replay of reasoning items
(RESPONSES.md §7.3); an answer cut at max tokens makes the SDK fail visibly (`ModelBehaviorError`
naming `incomplete` / `max_output_tokens`) without running the half-written call (§5). The
Agents SDK example of docs/clients.md runs as written against the built-in mock provider. Skipped
when the SDK is not installed (it is in the `test` extras), except under CI.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

if os.environ.get("CI") != "true":  # CI installs the test extras: there a missing SDK fails
    pytest.importorskip("agents", reason="openai-agents is not installed (the test extras)")

from agents import (
    Agent,
    ModelBehaviorError,
    ModelSettings,
    Runner,
    function_tool,
    set_default_openai_api,
    set_default_openai_client,
    set_tracing_disabled,
)
from openai import AsyncOpenAI

from tests.loop_upstream import POLICIES, LoopStack, Say
from tests.test_mock_e2e import HELLO

WIRES = ("openai", "anthropic")
STREAMS = pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])


@pytest.fixture
async def loop_stack():
    async with LoopStack() as running:
        yield running


@pytest.fixture
async def use_gateway() -> AsyncIterator[Callable[[str], None]]:
    """Points the SDK at the gateway; its client is closed on the test's own loop. Left to be
    collected, an async client closes itself on whatever loop runs then, and its connections'
    loop is closed by then: "Event loop is closed", logged as an asyncio error under a later
    test (the fault matrix's tests assert that none is logged)."""
    clients: list[AsyncOpenAI] = []

    def use(base_url: str) -> None:
        set_tracing_disabled(True)
        set_default_openai_api("responses")  # the SDK's default, said explicitly
        clients.append(AsyncOpenAI(base_url=base_url + "/v1", api_key="unused"))
        set_default_openai_client(clients[-1])

    yield use
    for client in clients:
        await client.close()


class Weather:
    """A function tool that records every call it runs."""

    def __init__(self) -> None:
        self.runs: list[str] = []

        @function_tool
        def get_weather(city: str) -> str:
            """Current weather for a city."""
            self.runs.append(city)
            return f"Sunny, 21 °C in {city}"

        self.tool = get_weather


async def run(agent: Any, prompt: str, stream: bool) -> Any:
    if not stream:
        return await Runner.run(agent, prompt)
    result = Runner.run_streamed(agent, prompt)
    async for _ in result.stream_events():
        pass
    return result


@STREAMS
@pytest.mark.parametrize("wire", WIRES)
async def test_a_two_turn_tool_loop_completes(loop_stack, use_gateway, wire, stream):
    stack = loop_stack
    model = stack.model_name(wire)
    stack.upstream.script(
        model,
        Say("Checking.", calls=[("get_weather", {"city": "Paris"})]),
        Say("It is sunny in Paris."),
    )
    weather = Weather()
    use_gateway(stack.urls["withhold"])
    agent = Agent(name="helper", instructions="Be brief.", model=model, tools=[weather.tool])

    result = await run(agent, "Weather in Paris?", stream)

    assert result.final_output == "It is sunny in Paris."
    assert weather.runs == ["Paris"]
    first, second = stack.requests(model)
    if wire == "openai":
        assert first["messages"][0] == {"role": "system", "content": "Be brief."}
        assert second["messages"][-1] == {
            "role": "tool",
            "tool_call_id": "call_0_0",
            "content": "Sunny, 21 °C in Paris",
        }
    else:
        assert first["system"] == "Be brief."
        result_block = second["messages"][-1]["content"][0]
        assert result_block["type"] == "tool_result"
        assert result_block["tool_use_id"] == "call_0_0"
        assert [m["role"] for m in second["messages"]] == ["user", "assistant", "user"]


@STREAMS
async def test_anthropic_thinking_survives_the_sdks_replay(loop_stack, use_gateway, stream):
    """With `reasoning.encrypted_content` included, the SDK sends the reasoning item back as it
    got it, and Anthropic receives the signed thinking block first in the assistant turn."""
    stack = loop_stack
    model = stack.model_name("anthropic")
    thought = "Paris: call get_weather."
    stack.upstream.script(
        model,
        Say(calls=[("get_weather", {"city": "Paris"})], thinking=thought),
        Say("It is sunny in Paris."),
    )
    weather = Weather()
    use_gateway(stack.urls["withhold"])
    settings = ModelSettings(response_include=["reasoning.encrypted_content"])
    agent = Agent(name="helper", model=model, tools=[weather.tool], model_settings=settings)

    result = await run(agent, "Weather in Paris?", stream)

    assert result.final_output == "It is sunny in Paris." and weather.runs == ["Paris"]
    assistant = stack.requests(model)[1]["messages"][1]
    assert assistant["role"] == "assistant"
    assert assistant["content"][0] == {
        "type": "thinking",
        "thinking": thought,
        "signature": "sig_0",
    }
    assert [block["type"] for block in assistant["content"]] == ["thinking", "tool_use"]


@STREAMS
@pytest.mark.parametrize("via", POLICIES)
@pytest.mark.parametrize("wire", WIRES)
async def test_a_cut_answer_fails_visibly_and_its_call_never_runs(
    loop_stack, use_gateway, wire, via, stream
):
    stack = loop_stack
    model = stack.model_name(wire)
    stack.upstream.script(
        model, Say("Checking.", calls=[("get_weather", '{"city": "Par')], stop="length")
    )
    weather = Weather()
    use_gateway(stack.urls[via])
    agent = Agent(name="helper", model=model, tools=[weather.tool])

    with pytest.raises(ModelBehaviorError) as raised:
        await run(agent, "Weather in Paris?", stream)

    message = str(raised.value)
    assert "response.incomplete" in message and "max_output_tokens" in message
    assert weather.runs == []
    assert len(stack.requests(model)) == 1, "the SDK does not retry a cut answer"


def readme_agents_example() -> str:
    readme = (Path(__file__).parent.parent / "docs" / "clients.md").read_text(encoding="utf-8")
    blocks = [block.split("```", 1)[0] for block in readme.split("```python\n")[1:]]
    (example,) = [block for block in blocks if "from agents import" in block]
    return example


def test_the_readme_example_runs_against_the_mock_provider(stack):
    """Run as a script of its own, so no setting an earlier test made (tracing off) helps it;
    the session stack's gateway routes `mock-*` to the built-in mock provider."""
    example = readme_agents_example().replace("http://127.0.0.1:8080", stack.urls["withhold"])
    env = {**os.environ, "OPENAI_API_KEY": "", "PYTHONPATH": str(Path(__file__).parent.parent)}

    done = subprocess.run(
        [sys.executable, "-c", example], capture_output=True, text=True, timeout=60, env=env
    )

    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout == HELLO + "\n"
    assert "Tracing" not in done.stderr, "traces would go to api.openai.com"
