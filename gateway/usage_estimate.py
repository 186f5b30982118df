"""Token counts for an answer whose upstream sent no usage (an OpenAI-compatible server that
ignores `stream_options.include_usage`), so that a key's token budget still counts it.

A rough count, about four characters per token (OpenAI's rule of thumb for English), taken
from the bytes sent upstream and the characters the answer carried: cheap, since it runs once
per exchange, and kept apart as one (`estimated_tokens` in the record), never priced.
"""

from __future__ import annotations

from gateway.normalize.aggregate import AggregatedResponse

CHARS_PER_TOKEN = 4


def rough_tokens(chars: int) -> int:
    return -(-chars // CHARS_PER_TOKEN)  # rounded up: one character is a token


def answer_chars(answer: AggregatedResponse) -> int:
    """The characters the model generated: text, thinking, refusal, tool names and arguments."""
    chars = len(answer.text) + len(answer.thinking) + len(answer.refusal or "")
    return chars + sum(len(call.name) + len(call.arguments) for call in answer.tool_calls)
