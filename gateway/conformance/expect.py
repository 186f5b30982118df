"""The contract: what a client of each format must see for each meaning of an upstream answer.

Each client format's own standard values (docs/conformance.md has the table in prose):

    EXPECT[Meaning.CONTEXT]["anthropic"].faithful   # {"model_context_window_exceeded"}
    EXPECT[Meaning.LENGTH]["openai"].hidden         # {"stop", "tool_calls", ...}: shown whole

A Responses stop value is `status` or `status:incomplete_details.reason`. A value in `faithful`
is right; in `hidden`, a cut answer presented as complete; in `lossy`, a named loss; any other
value is a loss named "<what> shown as <value>". These tables are the tool's own: they do not
come from the gateway under test (nor from this gateway's stop-reason tables).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final

from gateway.conformance.cases import FORMATS, Meaning

# The values that tell a client "this answer is whole" (a turn it may act on as final).
COMPLETE: Final[Mapping[str, frozenset[str]]] = {
    "openai": frozenset({"stop", "tool_calls", "function_call"}),
    "anthropic": frozenset({"end_turn", "tool_use", "stop_sequence", "pause_turn"}),
    "responses": frozenset({"completed"}),
}
# The values that tell a client "this answer was cut".
CUT: Final[Mapping[str, frozenset[str]]] = {
    "openai": frozenset({"length"}),
    "anthropic": frozenset({"max_tokens", "model_context_window_exceeded"}),
    "responses": frozenset(
        {"incomplete", "incomplete:max_output_tokens", "incomplete:content_filter"}
    ),
}
PLAIN: Final = {"openai": "stop", "anthropic": "end_turn", "responses": "completed"}
NO_REASON: Final = {"responses": {"incomplete": "incomplete without incomplete_details.reason"}}
BUDGET: Final = ("length", "max_tokens", "incomplete:max_output_tokens")
# Formats whose whole refusal is the answer's text (with stop_reason refusal), not a field of its
# own; formats whose tool call items carry a status of their own (a cut one is not `completed`).
REFUSAL_IN_TEXT: Final = frozenset({"anthropic"})
CALL_STATUS: Final = frozenset({"responses"})


@dataclass(frozen=True)
class Expect:
    faithful: frozenset[str]
    hidden: frozenset[str] = frozenset()
    lossy: Mapping[str, str] = field(default_factory=dict)


def _cut(
    values: tuple[str, str, str], lossy: Mapping[str, Mapping[str, str]] | None = None
) -> dict[str, Expect]:
    """A cut meaning: each format's own value; a value of the whole kind hides it."""
    named = {**NO_REASON, **(lossy or {})}
    return {
        client: Expect(frozenset({value}), COMPLETE[client], named.get(client, {}))
        for client, value in zip(FORMATS, values, strict=True)
    }


def _same(**values: frozenset[str] | set[str]) -> dict[str, Expect]:
    return {client: Expect(frozenset(values[client])) for client in FORMATS}


EXPECT: Final[Mapping[Meaning, Mapping[str, Expect]]] = {
    Meaning.STOP: _same(openai={"stop"}, anthropic={"end_turn"}, responses={"completed"}),
    Meaning.LENGTH: _cut(BUDGET),
    Meaning.TOOL_CUT: _cut(BUDGET),
    Meaning.CONTEXT: _cut(
        ("length", "model_context_window_exceeded", "incomplete:max_output_tokens"),
        {"anthropic": {"max_tokens": "context window shown as max_tokens"}},
    ),
    Meaning.FILTER: _cut(("content_filter", "refusal", "incomplete:content_filter")),
    # A refusal stops the output mid-way: an OpenAI client may also see its own refusal shape
    # (`stop` with a `refusal` text) and a Responses client a refusal part (the judge's rule).
    Meaning.REFUSAL: _cut(("content_filter", "refusal", "incomplete:content_filter")),
    Meaning.WHOLE_REFUSAL: {
        "openai": Expect(frozenset({"stop", "content_filter"})),
        "anthropic": Expect(
            frozenset({"refusal"}), lossy={"end_turn": "refusal shown as end_turn"}
        ),
        "responses": Expect(frozenset({"completed", "incomplete:content_filter"})),
    },
    Meaning.PAUSE: {
        "openai": Expect(
            frozenset({"stop", "pause_turn"}), lossy={"length": "pause shown as length"}
        ),
        "anthropic": Expect(
            frozenset({"pause_turn"}), lossy={"end_turn": "pause_turn shown as end_turn"}
        ),
        "responses": Expect(frozenset({"completed"})),
    },
    Meaning.TOOLS: _same(openai={"tool_calls"}, anthropic={"tool_use"}, responses={"completed"}),
    Meaning.STOP_SEQUENCE: {
        "openai": Expect(frozenset({"stop"})),
        "anthropic": Expect(
            frozenset({"stop_sequence"}), lossy={"end_turn": "stop_sequence not reported"}
        ),
        "responses": Expect(frozenset({"completed"})),
    },
    # Across formats the plain stop is right (no format can say "unknown"); the same format must
    # pass the value through verbatim (the judge's rule: enums are open).
    Meaning.UNKNOWN: _same(
        openai={"stop", "novel_reason"},
        anthropic={"end_turn", "novel_reason"},
        responses={"completed"},
    ),
}

WHAT: Final[Mapping[Meaning, str]] = {
    Meaning.STOP: "a complete answer",
    Meaning.LENGTH: "an answer cut at max tokens",
    Meaning.CONTEXT: "an answer cut by the context window",
    Meaning.FILTER: "an answer cut by a content filter",
    Meaning.REFUSAL: "an answer cut by a refusal",
    Meaning.WHOLE_REFUSAL: "a refusal",
    Meaning.PAUSE: "a paused turn",
    Meaning.TOOLS: "a tool call",
    Meaning.STOP_SEQUENCE: "a stop at a stop sequence",
    Meaning.UNKNOWN: "an unknown stop value",
    Meaning.TOOL_CUT: "a tool call cut at max tokens",
    Meaning.BROKEN: "a broken upstream answer",
    Meaning.GARBAGE: "an answer with a garbage line",
    Meaning.UPSTREAM_ERROR: "an upstream error",
}
