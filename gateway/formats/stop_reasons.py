"""Stop-reason tables: one per wire, read by the gateway and by `gateway.loop` alike.

Each wire has its native values -> the normalized set (`*_NATIVE`), and each client format the
value its clients see for a normalized reason (`TO_*`). An unknown native value is UNKNOWN,
never STOP; the native string always travels beside it. ERROR and ABORTED have no client value:
a response that broke ends with the format's error event instead.
"""

from __future__ import annotations

from collections.abc import Mapping

from gateway.events import StopReason

S = StopReason

OPENAI_NATIVE: Mapping[str, StopReason] = {
    "stop": S.STOP,
    "length": S.LENGTH,
    "tool_calls": S.TOOL_CALLS,
    "function_call": S.TOOL_CALLS,
    "content_filter": S.CONTENT_FILTER,
    # OpenAI-compatible servers (PROTOCOLS.md §d)
    "model_length": S.CONTEXT_WINDOW,  # Mistral
    "abort": S.ABORTED,  # vLLM
    "repetition": S.STOP,  # vLLM (newer engines: a repetition detector ended it; native kept)
    "error": S.ERROR,  # vLLM, Mistral
    "insufficient_system_resource": S.ERROR,  # DeepSeek
    "end_turn": S.STOP,  # xAI and others
}

ANTHROPIC_NATIVE: Mapping[str, StopReason] = {
    "end_turn": S.STOP,
    "tool_use": S.TOOL_CALLS,
    "max_tokens": S.LENGTH,
    "stop_sequence": S.STOP_SEQUENCE,
    "refusal": S.REFUSAL,
    "pause_turn": S.PAUSE,
    "model_context_window_exceeded": S.CONTEXT_WINDOW,
}

# The Responses wire has no finish reason: its native value is made from the terminal response,
# `completed`, `incomplete:<incomplete_details.reason>` (bare `incomplete` when it gives none) or
# the status itself (`failed`, `cancelled`). `completed` turns TOOL_CALLS in the decoder when
# the output holds tool calls (gateway.formats.openai_responses).
RESPONSES_NATIVE: Mapping[str, StopReason] = {
    "completed": S.STOP,
    "incomplete:max_output_tokens": S.LENGTH,
    "incomplete:content_filter": S.CONTENT_FILTER,
    "incomplete:max_messages": S.PAUSE,  # openai 3.57 (PROTOCOLS.md §e.1)
    "incomplete:steered": S.PAUSE,  # openai 3.57
    "failed": S.ERROR,
    "cancelled": S.ABORTED,
}

# Gemini's `finishReason` (google-genai 3.6.1 `FinishReason`, PROTOCOLS.md §e.1), each value
# by its documented meaning. `STOP` turns TOOL_CALLS in the decoder when a functionCall was given
# (gateway.formats.gemini). A prompt blocked before any candidate has no finish reason: its native
# value is `blockReason:<promptFeedback.blockReason>`, CONTENT_FILTER whatever the reason.
BLOCK_REASON_PREFIX = "blockReason:"
GEMINI_BLOCK_REASONS = (
    "BLOCKED_REASON_UNSPECIFIED",
    "SAFETY",
    "OTHER",
    "BLOCKLIST",
    "PROHIBITED_CONTENT",
    "IMAGE_SAFETY",
    "MODEL_ARMOR",
    "JAILBREAK",
)
GEMINI_NATIVE: Mapping[str, StopReason] = {
    "STOP": S.STOP,
    "MAX_TOKENS": S.LENGTH,
    "SAFETY": S.CONTENT_FILTER,
    "BLOCKLIST": S.CONTENT_FILTER,
    "PROHIBITED_CONTENT": S.CONTENT_FILTER,
    "SPII": S.CONTENT_FILTER,
    "IMAGE_SAFETY": S.CONTENT_FILTER,
    "IMAGE_PROHIBITED_CONTENT": S.CONTENT_FILTER,
    "RECITATION": S.CONTENT_FILTER,
    "IMAGE_RECITATION": S.CONTENT_FILTER,
    "MODEL_ARMOR": S.CONTENT_FILTER,
    "LANGUAGE": S.CONTENT_FILTER,
    "ESCALATION": S.CONTENT_FILTER,  # "filtered by an escalation rule"
    "PUP_LIMITED_DISABLED": S.CONTENT_FILTER,  # the account limited for Prohibited Use Policy
    "MALFORMED_FUNCTION_CALL": S.MALFORMED,
    "UNEXPECTED_TOOL_CALL": S.MALFORMED,
    "MALFORMED_RESPONSE": S.MALFORMED,
    "MISSING_THOUGHT_SIGNATURE": S.MALFORMED,
    # "the server-side tool loop stopped before the model returned a final answer": Anthropic's
    # pause_turn is that same limit of a server-side loop
    "TOO_MANY_TOOL_CALLS": S.PAUSE,
    # "reached the per-request token limit, but generation is not yet complete": a cut
    "CONTINUATION": S.LENGTH,
    "OTHER": S.UNKNOWN,
    "IMAGE_OTHER": S.UNKNOWN,
    "NO_IMAGE": S.UNKNOWN,
    "FINISH_REASON_UNSPECIFIED": S.UNKNOWN,
    **{BLOCK_REASON_PREFIX + reason: S.CONTENT_FILTER for reason in GEMINI_BLOCK_REASONS},
}

# AWS Bedrock Converse (botocore `bedrock-runtime` StopReason; PROTOCOLS.md §e.1): `stopReason`
# of the body, `messageStop.stopReason` of a stream.
BEDROCK_NATIVE: Mapping[str, StopReason] = {
    "end_turn": S.STOP,
    "tool_use": S.TOOL_CALLS,
    "max_tokens": S.LENGTH,
    "stop_sequence": S.STOP_SEQUENCE,
    "guardrail_intervened": S.CONTENT_FILTER,
    "content_filtered": S.CONTENT_FILTER,
    "malformed_model_output": S.MALFORMED,
    "malformed_tool_use": S.MALFORMED,
    "model_context_window_exceeded": S.CONTEXT_WINDOW,
}

TO_OPENAI: Mapping[StopReason, str] = {
    S.STOP: "stop",
    S.TOOL_CALLS: "tool_calls",
    S.LENGTH: "length",
    S.STOP_SEQUENCE: "stop",
    S.CONTENT_FILTER: "content_filter",
    S.REFUSAL: "content_filter",
    S.PAUSE: "stop",
    S.CONTEXT_WINDOW: "length",
    S.MALFORMED: "stop",
    S.UNKNOWN: "stop",
}

TO_ANTHROPIC: Mapping[StopReason, str] = {
    S.STOP: "end_turn",
    S.TOOL_CALLS: "tool_use",
    S.LENGTH: "max_tokens",
    S.STOP_SEQUENCE: "stop_sequence",
    S.CONTENT_FILTER: "refusal",
    S.REFUSAL: "refusal",
    S.PAUSE: "pause_turn",
    S.CONTEXT_WINDOW: "model_context_window_exceeded",
    S.MALFORMED: "end_turn",
    S.UNKNOWN: "end_turn",
}


# A Responses client reads `status` and `incomplete_details.reason`; there is no finish reason
# (RESPONSES.md §5). None: `completed` with no reason. ERROR, ABORTED, MALFORMED: `failed`.
TO_RESPONSES: Mapping[StopReason, tuple[str, str | None]] = {
    S.STOP: ("completed", None),
    S.TOOL_CALLS: ("completed", None),
    S.LENGTH: ("incomplete", "max_output_tokens"),
    S.CONTEXT_WINDOW: ("incomplete", "max_output_tokens"),
    S.STOP_SEQUENCE: ("completed", None),
    S.CONTENT_FILTER: ("incomplete", "content_filter"),
    S.REFUSAL: ("incomplete", "content_filter"),
    S.PAUSE: ("completed", None),
    S.UNKNOWN: ("completed", None),
    S.MALFORMED: ("failed", None),
    S.ERROR: ("failed", None),
    S.ABORTED: ("failed", None),
}


def normalized(table: Mapping[str, StopReason], native: object) -> StopReason:
    """A wire's native value through its table; anything the table lacks is UNKNOWN."""
    if not isinstance(native, str) or not native:
        return S.UNKNOWN
    return table.get(native, S.UNKNOWN)


def from_openai(native: str | None) -> StopReason:
    return normalized(OPENAI_NATIVE, native)


def from_anthropic(native: str | None) -> StopReason:
    return normalized(ANTHROPIC_NATIVE, native)


def from_responses(native: str | None) -> StopReason:
    return normalized(RESPONSES_NATIVE, native)


def to_openai(reason: StopReason, has_tool_calls: bool) -> str:
    if reason is S.UNKNOWN and has_tool_calls:
        return "tool_calls"
    return TO_OPENAI.get(reason, "stop")


LEGACY_FUNCTION_CALL = "function_call"


def relayed(reason: StopReason, native: object, shown: str) -> str:
    """What a same-format relay tells its client: the standard value `shown`, except that a
    value the gateway does not know goes through as the upstream sent it (every enum met on the
    wire is open): the client reads what its upstream said, never a plain stop in its place.
    A legacy `function_call` finish stays one, beside the `message.function_call` it ends."""
    if reason is S.UNKNOWN and isinstance(native, str) and native:
        return native
    if native == LEGACY_FUNCTION_CALL and shown == "tool_calls":
        return native  # the legacy `functions` answer keeps its own finish
    return shown


def to_responses(reason: StopReason) -> tuple[str, str | None]:
    """`status` and `incomplete_details.reason` for a normalized reason."""
    return TO_RESPONSES.get(reason, ("completed", None))


def to_anthropic(reason: StopReason, has_tool_calls: bool, stop_sequence: str | None) -> str:
    if reason is S.UNKNOWN and has_tool_calls:
        return "tool_use"
    if reason is S.STOP_SEQUENCE and stop_sequence is None:
        return "end_turn"  # Anthropic clients expect the matched string beside stop_sequence
    return TO_ANTHROPIC.get(reason, "end_turn")
