"""Keeping count of what a translation could not carry, by name, never by value.

A translator notes each field, tool and content block it leaves out; `unread` then names every
top-level field it never looked at, so a field added to a wire later is reported, not lost.

    drops = Drops(OPENAI_CHAT_FIELDS)
    drops.field("seed")
    drops.unread(body, read={"model", "messages"})
    drops.dropped()         # Dropped(fields=("seed", ...))

Names are echoed only when they are names of the client's wire (its SDK's request fields, its
block types): a key or type of the client's own making could be anything, even text it never
meant for a log, so it is reported as `UNKNOWN_FIELD` / `UNKNOWN_KIND` instead (the rule
`gateway.translate.nesting` follows for paths).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Collection, Mapping
from typing import Any, Final

from gateway.translate.translation import Dropped

UNKNOWN_FIELD: Final = "(unknown field)"
UNKNOWN_KIND: Final = "(unknown type)"

# Top-level request fields of OpenAI Chat Completions (openai 3.57 `CompletionCreateParams`)
# and of the extensions OpenAI-compatible servers take (vLLM-style sampling knobs).
OPENAI_CHAT_FIELDS: Final = frozenset(
    {
        "audio",
        "frequency_penalty",
        "function_call",
        "functions",
        "logit_bias",
        "logprobs",
        "max_completion_tokens",
        "max_tokens",
        "messages",
        "metadata",
        "modalities",
        "model",
        "moderation",
        "n",
        "parallel_tool_calls",
        "prediction",
        "presence_penalty",
        "prompt_cache_key",
        "prompt_cache_options",
        "prompt_cache_retention",
        "reasoning_effort",
        "response_format",
        "safety_identifier",
        "seed",
        "service_tier",
        "stop",
        "store",
        "stream",
        "stream_options",
        "temperature",
        "tool_choice",
        "tools",
        "top_logprobs",
        "top_p",
        "user",
        "verbosity",
        "web_search_options",
        # Extensions of OpenAI-compatible servers.
        "top_k",
        "min_p",
        "repetition_penalty",
    }
)

# Top-level request fields of Anthropic Messages (anthropic 2.14 `MessageCreateParams`, its beta
# variant, and the 0.121 sampling fields).
ANTHROPIC_MESSAGES_FIELDS: Final = frozenset(
    {
        "billing_policy",
        "cache_control",
        "compaction",
        "container",
        "context_management",
        "diagnostics",
        "fallback_credit_token",
        "fallbacks",
        "inference_geo",
        "max_tokens",
        "mcp_servers",
        "messages",
        "metadata",
        "model",
        "output_config",
        "output_format",
        "service_tier",
        "speed",
        "stop_sequences",
        "stream",
        "system",
        "temperature",
        "thinking",
        "thread",
        "tool_choice",
        "tools",
        "top_k",
        "top_p",
    }
)


# Content block types of Anthropic Messages (anthropic 2.14), as a client may send them.
ANTHROPIC_BLOCK_TYPES: Final = frozenset(
    {
        "text",
        "image",
        "document",
        "search_result",
        "thinking",
        "redacted_thinking",
        "tool_use",
        "tool_result",
        "tool_reference",
        "server_tool_use",
        "web_search_tool_result",
        "web_fetch_tool_result",
        "code_execution_tool_result",
        "bash_code_execution_tool_result",
        "text_editor_code_execution_tool_result",
        "tool_search_tool_result",
        "advisor_tool_result",
        "mcp_tool_use",
        "mcp_tool_result",
        "container_upload",
        "compaction",
    }
)
# Anthropic server tools are typed `<name>_<yyyymmdd>` (web_search_20250305, bash_20250124).
_SERVER_TOOL_TYPE: Final = re.compile(r"[a-z][a-z_]{0,40}_20[0-9]{6}")


def anthropic_kind(kind: str) -> bool:
    """Whether `kind` is a block type or server tool type of the Anthropic wire."""
    return (
        kind in ANTHROPIC_BLOCK_TYPES
        or kind == "mcp_toolset"
        or _SERVER_TOOL_TYPE.fullmatch(kind) is not None
    )


_NO_DEFAULTS: Final[Mapping[str, Any]] = {}


def _same(value: Any, default: Any) -> bool:
    """Equal, and no bool standing in for a number (`True == 1` in Python)."""
    return value == default and isinstance(value, bool) == isinstance(default, bool)


def _no_kind(kind: str) -> bool:
    return False


class Drops:
    """What one translation left out: field names (dotted for a part of a field), tools, and
    content blocks or parts by kind, counted."""

    def __init__(
        self, known_fields: Collection[str], is_kind: Callable[[str], bool] = _no_kind
    ) -> None:
        self._known_fields = known_fields
        self._is_kind = is_kind
        self._fields: set[str] = set()
        self._tools: list[str] = []
        self._items: Counter[str] = Counter()

    def field(self, name: str) -> None:
        """A field the translation does not carry; `name` is the translator's own text (a wire
        field name, or a dotted path of them), never a key taken from the body unchecked."""
        self._fields.add(name)

    def tool(self, kind: Any) -> None:
        self._tools.append(self._kind(kind))

    def item(self, kind: Any) -> None:
        self._items[self._kind(kind)] += 1

    def unread(
        self,
        body: Mapping[str, Any],
        read: Collection[str],
        defaults: Mapping[str, Any] = _NO_DEFAULTS,
    ) -> None:
        """Name every field of `body` outside `read` that asks for something: not null, and not
        its wire's default (`n: 1`, `logprobs: false`), which the other wire does anyway."""
        for key, value in body.items():
            if key in read or value is None:
                continue
            if key in defaults and _same(value, defaults[key]):
                continue
            self._fields.add(key if key in self._known_fields else UNKNOWN_FIELD)

    def dropped(self) -> Dropped:
        return Dropped(
            fields=tuple(sorted(self._fields)), tools=tuple(self._tools), items=dict(self._items)
        )

    def _kind(self, kind: Any) -> str:
        return kind if isinstance(kind, str) and self._is_kind(kind) else UNKNOWN_KIND
