"""One audit record per exchange: what happened, never what was said.

A record holds identities, times, the normalized and native stop reason, why the answer counts as
cut, withheld tool calls by id and name, argument parse failures by class/offset/length, usage and
error classes. It never holds message text, tool arguments, keys or header values; only with
`[audit] log_content = true` does `content` carry anything.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any

# Why an exchange counts as cut; `None` when it does not.
CUT_REASONS = (
    "length",
    "context_window",
    "missing_terminator",
    "upstream_error",
    "upstream_timeout",
    "cancelled",
    "aborted",
)


@dataclass(slots=True)
class AuditRecord:
    id: str
    started_at: float  # unix seconds
    client_format: str  # "openai" | "anthropic"
    stream: bool
    model: str = ""  # the client's model name
    route: str | None = None  # the matching route's glob
    provider: str | None = None
    upstream_model: str | None = None
    first_byte_at: float | None = None  # first byte sent to the client
    ended_at: float | None = None
    http_status: int | None = None
    stop_reason: str | None = None  # normalized, lower case
    native_stop_reason: str | None = None
    truncated: bool = False
    cut_reason: str | None = None
    terminator_seen: bool | None = None  # streams: did [DONE] / message_stop arrive
    tool_calls: int = 0
    withheld_tool_calls: list[dict[str, str]] = field(default_factory=list)  # {id, name}
    parse_failures: list[dict[str, Any]] = field(
        default_factory=list
    )  # {error_class, offset, length}
    input_tokens: int | None = None
    output_tokens: int | None = None
    cache_read_tokens: int | None = None
    cache_creation_tokens: int | None = None
    error_class: str | None = None
    client_aborted: bool = False
    runaway_streak: int | None = None  # trailing identical tool calls, when suspected
    content: dict[str, Any] | None = None  # only with log_content on

    @property
    def ttfb_ms(self) -> float | None:
        if self.first_byte_at is None:
            return None
        return (self.first_byte_at - self.started_at) * 1000

    @property
    def total_ms(self) -> float | None:
        if self.ended_at is None:
            return None
        return (self.ended_at - self.started_at) * 1000

    def as_dict(self) -> dict[str, Any]:
        """A shallow dict of the fields (lists are shared, not copied: this runs per exchange,
        and `dataclasses.asdict` deep-copies)."""
        return {name: getattr(self, name) for name in FIELD_NAMES}


FIELD_NAMES = tuple(f.name for f in fields(AuditRecord))
