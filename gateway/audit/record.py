"""One audit record per exchange: what happened, never what was said.

A record holds identities, times, the normalized and native stop reason, why the answer counts as
cut, withheld tool calls by id and name, argument parse failures by class/offset/length, usage,
its cost (gateway.cost), error classes, and what the request translation could not carry (field
names of the client's wire, and counts of tools and input items; never their values). It never
holds message text, tool arguments, keys or header values; only with `[audit] log_content = true`
does `content` carry anything.
"""

from __future__ import annotations

import json
import math
import operator
import re
from dataclasses import dataclass, field, fields
from typing import Any, Final

import orjson

from gateway.formats.shape import INT64_MAX

# Why an exchange counts as cut; `None` when it does not.
CUT_REASONS = (
    "length",
    "context_window",
    "missing_terminator",  # the body ended cleanly, without the wire's terminator
    "connection_lost",  # the connection was reset or closed before the body's end
    "upstream_error",
    "upstream_timeout",
    "cancelled",
    "aborted",
)
# Who ended an exchange before it ended by itself (`AuditRecord.ended_by`): the client left, or
# the gateway ended it (the shutdown grace ran out). None: it ended normally.
ENDED_BY: Final = ("client", "server")

# What an exchange asked for (`AuditRecord.operation`): the values of providers.base.Operation.
OPERATIONS: Final = ("generate", "count_tokens", "embed")

# Which timeout ended an attempt (`AuditRecord.timeout`): the connect, the wait for the response
# headers, a gap between body reads, or the attempt's whole time.
TIMEOUTS: Final = ("connect", "first_byte", "idle", "total")

# How the audit, its report and /metrics name what a record does not have: no provider (refused
# before routing) and no stop reason (no answer came: refused, or the upstream failed). `none`
# is not `unknown`, which is a stop reason the upstream sent that the gateway does not know.
NO_PROVIDER: Final = "-"
NO_STOP_REASON: Final = "none"

# The largest integer a column can hold: BIGINT (token counts; INT64_MAX, from the vocabulary that
# reads upstream usage with the same rule) and INTEGER (PostgreSQL's 32 bits).
INT32_MAX: Final = 2**31 - 1

# NUL (PostgreSQL text cannot hold it) and lone surrogates (not encodable as UTF-8).
_UNSTORABLE_CHARS: Final = re.compile("[\x00\ud800-\udfff]")


def coerce_text(value: object) -> str | None:
    """`value` as text every store can hold, else None (it is not a string).

    NUL and lone surrogates become U+FFFD; everything else, control characters included, is
    kept as data (the terminal renderers escape those).
    """
    if not isinstance(value, str):
        return None
    if value.isascii() and "\x00" not in value:
        return value  # the common case, without the regex (this runs for every text field)
    if _UNSTORABLE_CHARS.search(value) is None:
        return value
    return _UNSTORABLE_CHARS.sub("\ufffd", value)


def coerce_time(value: object) -> float | None:
    """`value` as unix seconds (a finite number), else None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value if -INT64_MAX <= value <= INT64_MAX else None
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    return None


def coerce_flag(value: object) -> bool | None:
    """`value` if it is a bool, else None (no guessing from 0, 1 or "yes")."""
    return value if isinstance(value, bool) else None


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
    ended_by: str | None = None  # one of ENDED_BY when the exchange was ended early
    # What the request translation did not carry: top-level field names (None: nothing, or no
    # translation), and how many tools and input items (content blocks, parts) it left out.
    dropped_fields: list[str] | None = None
    dropped_tools: int = 0
    dropped_input_items: int = 0
    # OpenAI Responses: the response's own id, and the one it continued (`previous_response_id`).
    response_id: str | None = None
    previous_response_id: str | None = None
    # Every try at an upstream, in order: {provider, upstream_model, outcome, duration_ms} and
    # the status when one came (more than one: a retry or a fallback answered, or none did).
    attempts: list[dict[str, Any]] = field(default_factory=list)
    timeout: str | None = None  # the timeout that fired: one of TIMEOUTS
    key_name: str | None = None  # the gateway key's configured name, never the key
    # What the exchange cost in USD (gateway.cost); None: unknown (or nothing answered), never 0
    # for unknown. `cost_source`: "table" (genai-prices) or "route" (the configured price).
    cost_usd: float | None = None
    cost_source: str | None = None
    # What the exchange asked for: a model answer, or one of OPERATIONS' others (a token count,
    # embeddings), which have no stop reason and are never cut.
    operation: str = "generate"
    # A streamed answer cut after its first byte and continued ([recovery]): {breaks,
    # max_tokens, at_chars, targets, causes}, as the client's `gateway.recovered`; None: not.
    recovered: dict[str, Any] | None = None
    # The upstream sent no usage (an OpenAI-compatible server that streams none): the gateway's
    # estimate of input plus output tokens from the characters sent and received, which a key's
    # token budget counts. Never priced and never summed with the counts above, which stay None.
    estimated_tokens: int | None = None

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

    def log_json(self) -> bytes:
        """The record as one JSON object for the exchange's log line: every field (`content`
        only when it holds something), then `ttfb_ms` and `total_ms`. One orjson call encodes
        the dataclass; this runs for every exchange."""
        try:
            data = orjson.dumps(self, default=str)
        except orjson.JSONEncodeError:  # an integer past 64 bits (usage is the upstream's)
            data = json.dumps(self.as_dict(), default=str, separators=(",", ":")).encode()
        if self.content is None:
            data = data.replace(b'"content":null,', b"", 1)
        ttfb, total = self.ttfb_ms, self.total_ms
        ttfb_ms = "null" if ttfb is None else repr(round(ttfb, 3))
        total_ms = "null" if total is None else repr(round(total, 3))
        return data[:-1] + f',"ttfb_ms":{ttfb_ms},"total_ms":{total_ms}}}'.encode()

    def as_dict(self) -> dict[str, Any]:
        """A shallow dict of the fields (lists are shared, not copied: this runs per exchange,
        and `dataclasses.asdict` deep-copies)."""
        return dict(zip(FIELD_NAMES, _ALL_FIELDS(self), strict=True))


def cost_unknown(record: AuditRecord) -> bool:
    """An answer came (the record has a stop reason) but its cost is not known: what the
    report's `cost_unknown` and /metrics' unknown-cost counter count."""
    return record.cost_usd is None and record.stop_reason is not None


FIELD_NAMES = tuple(f.name for f in fields(AuditRecord))
_ALL_FIELDS = operator.attrgetter(*FIELD_NAMES)  # one call for every field, in order
