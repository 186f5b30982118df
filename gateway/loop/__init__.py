"""A client-side agent loop over normalized model turns, in either wire format.

It keeps the rules agent runtimes learned in production: a turn's tool calls run only when the
turn ended in TOOL_CALLS or STOP (or an UNKNOWN stop, so no call is lost silently); the calls of a
response cut at max tokens are answered with an error result instead of being run; three
iterations in a row whose tool calls all failed end the run; a runaway (a step budget, or the
same call over and over) ends the conversation and is retried once afresh; `max_turns = N`
admits exactly N model turns. It imports nothing of the gateway's server, only its vocabulary
(the wire decoders, stop-reason tables and aggregator), so it judges a cut exactly as the gateway
does, and works against the gateway or straight against any OpenAI- or Anthropic-compatible URL.

    import asyncio
    from gateway.loop import AgentLoop, CompletionReason, OpenAIChatClient, Tool

    async def get_weather(args: dict) -> str:
        return f"Sunny, 21 °C in {args['city']}"

    weather = Tool(
        "get_weather",
        "Current weather for a city",
        {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
        get_weather,
    )

    async def main() -> None:
        async with OpenAIChatClient("http://127.0.0.1:8080/v1", "unused", "mock-agent") as model:
            result = await AgentLoop(model, [weather]).run("What's the weather in Paris?")
        if result.reason is CompletionReason.COMPLETED:
            print(result.text)
        else:
            print(result.reason, result.error)

    asyncio.run(main())

Modules: `agent` (AgentLoop, run_loop, Limits, CutPolicy), `watch` (cancellation and the
deadline), `result` (LoopResult, Iteration, CompletionReason), `errors` (the error tree), `turn`
(Turn, ToolCall, StopReason), `messages` (the history), `tools` (Tool, Hooks), `guards` (stall and
runaway counters), `model` (the ModelClient seam), `http`, `openai_chat`, `anthropic_messages`,
`openai_responses` (the three HTTP clients), `subagent` (a loop run as another loop's tool,
and the result text its parent reads), `shorten` (the middle of an answer elided, its end
kept), `reading` (a response read into a Turn with the gateway's own SSE decoder, wire
decoders, stop-reason tables and aggregator), `stops` (the `gateway` extension object).
"""

from gateway.loop.agent import TRUNCATION_MARKER, AgentLoop, run_loop
from gateway.loop.anthropic_messages import AnthropicMessagesClient
from gateway.loop.conversation import (
    AssistantMessage,
    CompletionReason,
    Iteration,
    LoopResult,
    Message,
    ToolResult,
    UserMessage,
)
from gateway.loop.errors import (
    CallInterrupted,
    ConnectionFailed,
    HTTPStatusError,
    InterruptedLoopError,
    LoopError,
    MaxTurnsError,
    ModelError,
    ModelTimeout,
    ProtocolError,
    RefusedError,
    RunawayError,
    StalledError,
    StreamBroken,
    TruncatedError,
    TurnError,
    WallClockError,
)
from gateway.loop.guards import ALL_REFUSED_SUFFIX, STALLED_MESSAGE
from gateway.loop.http import HTTPModelClient
from gateway.loop.limits import CutPolicy, Limits
from gateway.loop.model import ModelClient, ModelRequest
from gateway.loop.openai_chat import OpenAIChatClient
from gateway.loop.openai_responses import OpenAIResponsesClient
from gateway.loop.shorten import shorten
from gateway.loop.subagent import INCOMPLETE_NOTE, result_text, subagent_tool
from gateway.loop.tools import (
    ABORTED_RESULT,
    CANCELLED_RESULT,
    CUT_CALL_RESULT,
    Hooks,
    Tool,
    ToolOutput,
)
from gateway.loop.turn import StopReason, TokenCounts, ToolCall, Turn, WithheldCall

__all__ = [
    "ABORTED_RESULT",
    "ALL_REFUSED_SUFFIX",
    "CANCELLED_RESULT",
    "CUT_CALL_RESULT",
    "INCOMPLETE_NOTE",
    "STALLED_MESSAGE",
    "TRUNCATION_MARKER",
    "AgentLoop",
    "AnthropicMessagesClient",
    "AssistantMessage",
    "CallInterrupted",
    "CompletionReason",
    "ConnectionFailed",
    "CutPolicy",
    "HTTPModelClient",
    "HTTPStatusError",
    "Hooks",
    "InterruptedLoopError",
    "Iteration",
    "Limits",
    "LoopError",
    "LoopResult",
    "MaxTurnsError",
    "Message",
    "ModelClient",
    "ModelError",
    "ModelRequest",
    "ModelTimeout",
    "OpenAIChatClient",
    "OpenAIResponsesClient",
    "ProtocolError",
    "RefusedError",
    "RunawayError",
    "StalledError",
    "StopReason",
    "StreamBroken",
    "TokenCounts",
    "Tool",
    "ToolCall",
    "ToolOutput",
    "ToolResult",
    "TruncatedError",
    "Turn",
    "TurnError",
    "UserMessage",
    "WallClockError",
    "WithheldCall",
    "result_text",
    "run_loop",
    "shorten",
    "subagent_tool",
]
