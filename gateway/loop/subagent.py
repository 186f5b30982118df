"""Sub-agents: a loop that a parent loop hands a task to through a tool.

    researcher = AgentLoop(model, [search], system="Answer one question.", limits=Limits(8))
    parent = AgentLoop(model, [subagent_tool("research", "Research a question", researcher)])

Each call runs a fresh child conversation on the task the parent model wrote (`run` of the
child's loop: its own turns, its own stalled-iteration and runaway guards, cut responses read
exactly as in any run). The child runs under the parent's cancellation and wall clock. The
parent model reads one text shape (`result_text`):

    Status: SUCCESS                      SUCCESS when the child's result is ok (COMPLETED or
    Iterations: 2                        TRUNCATED), FAILURE otherwise
    Tokens: 92 (24 input, 68 output)
                                         the child's answer, or its error when it failed,
    Result:                              shortened from the middle (the end is kept) past
    The tool answered: "Sunny"           `result_limit` characters

    Completion reason: TRUNCATED (the subagent's final answer is incomplete)

The last line is there only when the child's completion reason is not COMPLETED; its note only
when the status is still SUCCESS. Code never parses the text: the call's `ToolResult.subagent`
(in the parent's iterations and seen by its `after_tool` hook) is the child's `LoopResult`. The
report is not an error result (it reads the same on both wires: `Status:` first), but a failed
child counts as a failed call toward the parent's stalled-iteration guard.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from gateway.loop.conversation import CompletionReason, LoopResult
from gateway.loop.shorten import shorten
from gateway.loop.tools import Tool, ToolOutput

if TYPE_CHECKING:
    from gateway.loop.agent import AgentLoop

RESULT_LIMIT = 8000  # characters of the child's answer in the result text
INCOMPLETE_NOTE = " (the subagent's final answer is incomplete)"
TASK_PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "task": {
            "type": "string",
            "description": "The whole task: the sub-agent sees nothing else of this conversation",
        }
    },
    "required": ["task"],
}


def result_text(result: LoopResult, limit: int = RESULT_LIMIT) -> str:
    """The text the parent model reads for a child's `result`."""
    tokens = result.tokens
    answer = result.text if result.ok or result.error is None else str(result.error)
    lines = [
        f"Status: {'SUCCESS' if result.ok else 'FAILURE'}",
        f"Iterations: {len(result.iterations)}",
        f"Tokens: {tokens.total} ({tokens.input} input, {tokens.output} output)",
        "",
        "Result:",
        shorten(answer, limit),
    ]
    if result.reason is not CompletionReason.COMPLETED:
        note = INCOMPLETE_NOTE if result.ok else ""
        lines += ["", f"Completion reason: {result.reason.name}{note}"]
    return "\n".join(lines)


def subagent_tool(
    name: str, description: str, loop: AgentLoop, *, result_limit: int = RESULT_LIMIT
) -> Tool:
    """A tool whose call runs `loop` on the call's `task` and answers with `result_text`."""
    if result_limit < 1:
        raise ValueError(f"result_limit must be at least 1, not {result_limit}")

    async def run_child(args: dict[str, Any]) -> ToolOutput:
        task = args.get("task")
        if not isinstance(task, str) or not task.strip():
            return ToolOutput("Invalid arguments: `task` must be a non-empty string", True)
        result = await loop.run(task)
        return ToolOutput(result_text(result, result_limit), subagent=result)

    return Tool(name, description, TASK_PARAMETERS, run_child, stops_with_run=True)
