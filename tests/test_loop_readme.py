"""The agent example of docs/agent-loop.md, run as written against the `mock` provider through a
gateway, and the `mock-agent` scenario it relies on."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest

from providers.base import ProviderRequest
from providers.mock import MockProvider

# docs/agent-loop.md's example, verbatim (tests/test_docs_snippets.py checks the page holds it);
# the test only points it at the test gateway's port.
EXAMPLE = """\
import asyncio
from typing import Any

from gateway.loop import AgentLoop, CompletionReason, Limits, OpenAIChatClient, Tool


async def get_weather(args: dict[str, Any]) -> str:
    return f"Sunny, 21 °C in {args['city']}"


WEATHER = Tool(
    name="get_weather",
    description="Current weather for a city",
    parameters={
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
    },
    run=get_weather,
)


async def main() -> None:
    # `mock-agent` calls the first tool it is given, then quotes the tool's answer.
    async with OpenAIChatClient("http://127.0.0.1:8080/v1", "unused", "mock-agent") as model:
        loop = AgentLoop(model, [WEATHER], limits=Limits(max_turns=8))
        result = await loop.run("What's the weather in Paris?")
    print(result.reason, "after", len(result.turns), "turns")  # completed after 2 turns
    print(result.text)  # The tool answered: "Sunny, 21 °C in Paris"
    if result.reason is not CompletionReason.COMPLETED:
        print("failed:", type(result.error).__name__, result.error)


asyncio.run(main())
"""
EXPECTED_OUTPUT = 'completed after 2 turns\nThe tool answered: "Sunny, 21 °C in Paris"\n'


def run_example(source: str, capsys: pytest.CaptureFixture[str]) -> str:
    exec(compile(source, "readme_example.py", "exec"), {"__name__": "readme_example"})
    return capsys.readouterr().out


def test_the_readme_example_runs_against_the_mock_provider(stack, capsys):
    assert len(EXAMPLE.splitlines()) <= 36
    source = EXAMPLE.replace("http://127.0.0.1:8080", stack.urls["withhold"])
    assert run_example(source, capsys) == EXPECTED_OUTPUT


@pytest.mark.parametrize("stream", [False, True])
def test_the_example_works_the_same_with_the_anthropic_client(stack, capsys, stream):
    source = (
        EXAMPLE.replace("OpenAIChatClient", "AnthropicMessagesClient")
        .replace("http://127.0.0.1:8080/v1", stack.urls["withhold"])
        .replace('"mock-agent")', f'"mock-agent", stream={stream})')
    )
    assert run_example(source, capsys) == EXPECTED_OUTPUT


async def mock_agent(messages: list[dict[str, Any]], tools: list[str]) -> dict[str, Any]:
    body = {
        "model": "mock-agent",
        "max_tokens": 64,
        "messages": messages,
        "tools": [{"name": name, "input_schema": {"type": "object"}} for name in tools],
    }
    reply = await MockProvider().send(
        ProviderRequest(orjson.dumps(body), stream=False, model=body["model"])
    )
    return orjson.loads(await reply.read())


async def test_mock_agent_calls_the_first_tool_with_paris():
    message = await mock_agent([{"role": "user", "content": "Weather?"}], ["lookup", "other"])
    assert message["stop_reason"] == "tool_use"
    assert [(b["name"], b["input"]) for b in message["content"]] == [("lookup", {"city": "Paris"})]
    default = await mock_agent([{"role": "user", "content": "Weather?"}], [])
    assert default["content"][0]["name"] == "get_weather"


@pytest.mark.parametrize(
    "content",
    ["Rain\nand wind", [{"type": "text", "text": "Rain\nand wind"}]],
    ids=["string", "blocks"],
)
async def test_mock_agent_quotes_the_first_line_of_a_tool_result(content):
    messages = [
        {"role": "user", "content": "Weather?"},
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "t1", "name": "w", "input": {}}],
        },
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "t1", "content": content}],
        },
    ]
    message = await mock_agent(messages, ["w"])
    assert message["stop_reason"] == "end_turn"
    assert message["content"] == [{"type": "text", "text": 'The tool answered: "Rain"'}]


def readme_block(after_heading: str, lang: str, nth: int = 0) -> str:
    """The `nth` fenced block in language `lang` of docs/agent-loop.md's section under
    `after_heading`."""
    readme = (Path(__file__).parent.parent / "docs" / "agent-loop.md").read_text(encoding="utf-8")
    section = readme.split(f"\n{after_heading}\n", 1)[1].split("\n## ", 1)[0]
    return section.split(f"```{lang}\n")[nth + 1].split("```", 1)[0]


def test_the_readme_subagent_example_prints_what_the_readme_says(stack, capsys):
    example = readme_block("## Sub-agents", "python")
    printed = readme_block("## Sub-agents", "text", nth=1)
    assert "subagent_tool(" in example and len(example.splitlines()) <= 40

    out = run_example(example.replace("http://127.0.0.1:8080", stack.urls["withhold"]), capsys)

    assert out == printed
    assert "Status: SUCCESS\nIterations: 2\n" in out


async def test_mock_agent_puts_the_prompt_in_each_required_property_but_city():
    body = {
        "model": "mock-agent",
        "max_tokens": 64,
        "messages": [{"role": "user", "content": "Weather in Paris?"}],
        "tools": [
            {
                "name": "ask",
                "input_schema": {"type": "object", "required": ["task", "city"]},
            }
        ],
    }
    reply = await MockProvider().send(
        ProviderRequest(orjson.dumps(body), stream=False, model="mock-agent")
    )
    message = orjson.loads(await reply.read())
    assert message["content"][0]["input"] == {"task": "Weather in Paris?", "city": "Paris"}
