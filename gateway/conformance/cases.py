"""The cases: what the scripted upstream plays for each (case, upstream wire), and what it means.

A case is run for every client format, streamed and not, against every upstream wire that has
it; a wire without it says why (`Case.skip`), and so does a mode without it (`Case.no_whole`,
`Case.no_stream`). The model name the client sends names the upstream wire and the case:

    model_name("anthropic", "max-tokens")      # "conf-anthropic-max-tokens"
    parse_model("openai/conf-anthropic-max-tokens")  # ("anthropic", "max-tokens")

The native values are the upstream wire's own (`natives`): `"stop"` on OpenAI Chat,
`"end_turn"` on Anthropic, `"completed"` or `"incomplete:<reason>"` on Responses.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Final

WIRES: Final = ("openai", "anthropic", "responses")  # the upstream wires
FORMATS: Final = ("openai", "anthropic", "responses")  # the client formats
PREFIX: Final = "conf"
MODEL: Final = re.compile(r"conf-(openai|anthropic|responses)-([a-z0-9-]+)")

TEXT: Final = ("The conformance", " upstream answers", " in five", " pieces", ".")
CUT_TEXT: Final = ("This answer", " was cut at", " the token", " limit")
PARTIAL_TEXT: Final = ("I can start", " on that, but")  # before a refusal or a filter
REFUSAL: Final = ("I can't help", " with that.")
TOOL_NAME: Final = "write_file"
TOOL_ARGS: Final = {"path": "notes.txt", "text": "hello"}
TOOL_PIECES: Final = ('{"path": ', '"notes.txt", ', '"text": "hel', 'lo"}')
CUT_TOOL_PIECES: Final = ('{"path": ', '"notes.txt", ', '"text": "The first li')
TOOL_INTRO: Final = ("I will write", " the file.")
STOP_SEQUENCE: Final = "###"
UNKNOWN_VALUE: Final = "novel_reason"
USAGE: Final = (11, 7)  # input and output tokens the upstream reports
ERROR_STATUS: Final = {"openai": 503, "anthropic": 529, "responses": 500}


class Meaning(StrEnum):
    """What the upstream's answer is, whatever wire said it: the judge's key."""

    STOP = "stop"
    LENGTH = "length"
    CONTEXT = "context_window"
    FILTER = "content_filter"
    REFUSAL = "refusal"  # cut by a classifier: text before it may be partial
    WHOLE_REFUSAL = "whole_refusal"  # the whole answer is a refusal
    PAUSE = "pause"
    TOOLS = "tool_calls"
    STOP_SEQUENCE = "stop_sequence"
    UNKNOWN = "unknown"
    TOOL_CUT = "tool_cut"
    BROKEN = "broken"  # the upstream's answer broke: no answer to give
    GARBAGE = "garbage"  # a line of junk inside an otherwise whole answer
    UPSTREAM_ERROR = "upstream_error"


class Fault(StrEnum):
    NONE = "none"
    RESET_MID = "reset_mid"  # an RST after the text's second piece (half of a whole body)
    RESET_END = "reset_end"  # an RST after every content frame (inside a cut tool call)
    NO_TERMINATOR = "no_terminator"  # the content, no stop frames, a clean close
    STALL = "stall"  # two pieces, then nothing for the stall, then a clean close
    GARBAGE = "garbage"  # a non-JSON data line after the second piece (a non-JSON whole body)
    MULTILINE = "multiline"  # the second piece's event split over several data: lines
    ERROR_EVENT = "error_event"  # the content, then the wire's error event
    ERROR_BODY = "error_body"  # an HTTP error status with the wire's error JSON


@dataclass(frozen=True)
class Script:
    """What one upstream wire plays for a case."""

    native: str | None  # the wire's stop value; None: a wire value of no stop
    text: tuple[str, ...] = TEXT
    tool: str = "none"  # "none", "whole" (a complete call) or "cut" (arguments cut short)
    refusal: tuple[str, ...] = ()  # refusal pieces (OpenAI `refusal`, a Responses refusal part)
    stop_sequence: str | None = None
    usage: bool = True
    fault: Fault = Fault.NONE


@dataclass(frozen=True)
class Case:
    id: str
    title: str
    meaning: Meaning
    scripts: Mapping[str, Script]  # upstream wire -> what it plays
    skip: Mapping[str, str] = field(default_factory=dict)  # wire -> why it has no such case
    no_whole: str | None = None  # why there is no whole-body variant
    no_stream: str | None = None
    check_usage: bool = False
    tools: bool = False  # the client offers the write_file tool
    stop_sequences: bool = False  # the client asks for STOP_SEQUENCE

    def script(self, wire: str) -> Script | None:
        return self.scripts.get(wire)


def natives(
    openai: str,
    anthropic: str,
    responses: str,
    *,
    text: tuple[str, ...] = TEXT,
    tool: str = "none",
    usage: bool = True,
    fault: Fault = Fault.NONE,
) -> dict[str, Script]:
    """One script per wire: the same answer, each with its wire's own stop value."""
    values = {"openai": openai, "anthropic": anthropic, "responses": responses}
    return {
        wire: Script(native, text=text, tool=tool, usage=usage, fault=fault)
        for wire, native in values.items()
    }


PLAIN_NATIVES: Final = ("stop", "end_turn", "completed")
PLAIN = natives(*PLAIN_NATIVES)
BUDGET = natives("length", "max_tokens", "incomplete:max_output_tokens", text=CUT_TEXT)
STREAM_ONLY = "an SSE framing fault: a whole body has none"


def broken(fault: Fault, text: tuple[str, ...] = TEXT, tool: str = "none") -> dict[str, Script]:
    """A plain answer that `fault` breaks (or, for GARBAGE and MULTILINE, only disturbs)."""
    return natives("stop", "end_turn", "completed", text=text, tool=tool, fault=fault)


CASES: Final[tuple[Case, ...]] = (
    Case("stop", "plain stop", Meaning.STOP, PLAIN),
    Case("max-tokens", "max tokens", Meaning.LENGTH, BUDGET),
    Case(
        "context-window",
        "context window full",
        Meaning.CONTEXT,
        {"anthropic": Script("model_context_window_exceeded", text=CUT_TEXT)},
        skip={
            "openai": "OpenAI Chat reports a full context window as length (max-tokens)",
            "responses": "Responses reports a full context window as max_output_tokens",
        },
    ),
    Case(
        "content-filter",
        "content filter",
        Meaning.FILTER,
        {
            "openai": Script("content_filter", text=PARTIAL_TEXT),
            "responses": Script("incomplete:content_filter", text=PARTIAL_TEXT),
        },
        skip={"anthropic": "Anthropic's safety stop is refusal (the refusal case)"},
    ),
    Case(
        "refusal",
        "refusal",
        Meaning.REFUSAL,
        {"anthropic": Script("refusal", text=PARTIAL_TEXT)},
        skip={
            "openai": "OpenAI Chat refuses with a refusal field (the whole-refusal case)",
            "responses": "Responses refuses with a refusal part (the whole-refusal case)",
        },
    ),
    Case(
        "whole-refusal",
        "refusal as the whole answer",
        Meaning.WHOLE_REFUSAL,
        {
            "openai": Script("stop", text=(), refusal=REFUSAL),
            "responses": Script("completed", text=(), refusal=REFUSAL),
        },
        skip={"anthropic": "Anthropic has no refusal channel apart from its stop (refusal)"},
    ),
    Case(
        "pause",
        "pause turn",
        Meaning.PAUSE,
        {"anthropic": Script("pause_turn")},
        skip={
            "openai": "OpenAI Chat has no pause",
            "responses": "Responses has no pause of a turn that can be resumed as sent",
        },
    ),
    Case(
        "tool-use",
        "tool use",
        Meaning.TOOLS,
        natives("tool_calls", "tool_use", "completed", text=TOOL_INTRO, tool="whole"),
        tools=True,
    ),
    Case(
        "stop-sequence",
        "stop sequence",
        Meaning.STOP_SEQUENCE,
        {"anthropic": Script("stop_sequence", stop_sequence=STOP_SEQUENCE)},
        skip={
            "openai": "OpenAI Chat reports a matched stop sequence as plain stop",
            "responses": "Responses has no stop sequences",
        },
        stop_sequences=True,
    ),
    Case(
        "unknown",
        "an unknown stop value",
        Meaning.UNKNOWN,
        {"openai": Script(UNKNOWN_VALUE), "anthropic": Script(UNKNOWN_VALUE)},
        skip={"responses": "Responses has no open stop value: its status is a closed set"},
    ),
    Case(
        "tool-cut",
        "tool call cut at max tokens",
        Meaning.TOOL_CUT,
        natives(
            "length", "max_tokens", "incomplete:max_output_tokens", text=TOOL_INTRO, tool="cut"
        ),
        tools=True,
    ),
    Case("reset-text", "reset mid-text", Meaning.BROKEN, broken(Fault.RESET_MID)),
    Case(
        "reset-tool",
        "reset mid-tool-call",
        Meaning.BROKEN,
        broken(Fault.RESET_END, text=TOOL_INTRO, tool="cut"),
        no_whole="a whole body has no tool call in flight (reset-text covers a cut body)",
        tools=True,
    ),
    Case(
        "no-terminator",
        "no terminator, clean close",
        Meaning.BROKEN,
        broken(Fault.NO_TERMINATOR),
        no_whole="a whole body is framed by its length (reset-text covers a short body)",
    ),
    Case("stall", "stalled past the timeout", Meaning.BROKEN, broken(Fault.STALL)),
    Case("garbage", "garbage mid-stream", Meaning.GARBAGE, broken(Fault.GARBAGE)),
    Case("usage", "usage present", Meaning.STOP, PLAIN, check_usage=True),
    Case("no-usage", "usage absent", Meaning.STOP, natives(*PLAIN_NATIVES, usage=False)),
    Case(
        "multiline-data",
        "multi-line data: event",
        Meaning.STOP,
        broken(Fault.MULTILINE),
        no_whole=STREAM_ONLY,
    ),
    Case(
        "error-event",
        "error event mid-stream",
        Meaning.BROKEN,
        broken(Fault.ERROR_EVENT),
        no_whole="a whole body cannot break after its start (see error-body)",
    ),
    Case("error-body", "error status", Meaning.UPSTREAM_ERROR, broken(Fault.ERROR_BODY)),
)
BY_ID: Final = {case.id: case for case in CASES}


def model_name(wire: str, case_id: str) -> str:
    return f"{PREFIX}-{wire}-{case_id}"


def parse_model(model: str) -> tuple[str, str] | None:
    """(wire, case id) from a model name as a gateway passed it on (prefixes like `openai/`
    and suffixes after a character outside [a-z0-9-] are allowed)."""
    found = MODEL.search(model.lower())
    if found is None or found[2] not in BY_ID:
        return None
    return found[1], found[2]
