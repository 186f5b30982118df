"""Per-exchange state shared by the stages of one request: identity, policy, the aggregator,
and the audit record being filled in."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from gateway.audit.record import AuditRecord
from gateway.normalize.aggregate import ChunkAggregator
from gateway.normalize.truncation import Policy, Verdict, extension, judge


@dataclass(slots=True)
class ExchangeContext:
    request_id: str
    provider: str
    policy: Policy
    include_usage: bool = False  # an OpenAI client asked for stream_options.include_usage
    aggregator: ChunkAggregator = field(default_factory=ChunkAggregator)
    record: AuditRecord | None = None
    upstream_answered: bool = False  # a 2xx reply whose body was decoded
    request_body: dict[str, Any] | None = None  # kept only for content logging

    def verdict(self) -> Verdict:
        agg = self.aggregator
        reason, native = agg.stop
        calls = [(call.id, call.name) for call in agg.tool_calls]
        return judge(reason, native, agg.error, calls, self.policy)

    def extension(self, verdict: Verdict) -> dict[str, Any]:
        return extension(verdict, self.provider, self.request_id)
