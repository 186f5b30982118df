"""Filling an exchange's audit record from what its attempt saw."""

from __future__ import annotations

from typing import Any, Final

from gateway.audit.record import AuditRecord
from gateway.cost import Pricer, Tokens
from gateway.handlers.attempt import Attempt
from gateway.normalize.aggregate import AggregatedResponse
from gateway.settings_price import PriceSettings
from gateway.usage_estimate import answer_chars, rough_tokens

# The keys of a Stop's `details` the record keeps, beside the answering attempt's entry: the
# content filter's categories and severities (Azure OpenAI). Never an explanation or any text.
AUDITED_STOP_DETAILS: Final = ("content_filter",)


def complete_record(
    record: AuditRecord, attempt: Attempt, request_body: dict[str, Any] | None
) -> None:
    """Stop reason, cut, tool calls, parse failures, usage; called once the aggregate is final.
    `request_body` is given only with content logging on."""
    snapshot = attempt.aggregator.snapshot
    if attempt.answered:
        verdict = attempt.verdict()
        record.stop_reason = verdict.stop_reason.value
        record.native_stop_reason = verdict.native_stop_reason
        record.truncated = verdict.truncated
        record.cut_reason = verdict.cut_reason
        record.tool_calls = len(verdict.tool_calls)
        _keep_stop_details(record, snapshot.stop_details)
        record.withheld_tool_calls = [{"id": i, "name": n} for i, n in verdict.withheld]
        if record.stream:
            record.terminator_seen = snapshot.terminator_seen
        record.parse_failures = [
            {
                "error_class": call.parse_failure.error_class,
                "offset": call.parse_failure.offset,
                "length": call.parse_failure.length,
            }
            for call in snapshot.tool_calls
            if call.parse_failure is not None
        ]
        usage = snapshot.usage  # as the upstream sent it: a count may be anything
        record.input_tokens = usage.input_tokens
        record.output_tokens = usage.output_tokens
        if usage.input_tokens is None and usage.output_tokens is None:
            # No usage at all (a compatible server that streams none): the key's budget still
            # counts the exchange, by an estimate kept apart from the counts.
            sent, received = attempt.sent_bytes, answer_chars(snapshot)
            record.estimated_tokens = rough_tokens(sent) + rough_tokens(received)
        record.cache_read_tokens = usage.cache_read_tokens
        record.cache_creation_tokens = usage.cache_creation_tokens
        splices = attempt.terms.splices
        if splices is not None:
            record.recovered = splices.summary()
    error = snapshot.error
    if error is not None and record.error_class is None:
        record.error_class = f"stream_{error.kind}"
    if request_body is not None:
        record.content = {
            "request": request_body,
            "response": {
                "text": snapshot.text,
                "thinking": snapshot.thinking,
                "refusal": snapshot.refusal,
                "tool_calls": [
                    {"id": c.id, "name": c.name, "arguments": c.arguments}
                    for c in snapshot.tool_calls
                ],
            },
        }


def _keep_stop_details(record: AuditRecord, details: dict[str, Any] | None) -> None:
    """The stop's native detail in the answering attempt's entry of `attempts` (a JSON column
    the record has: no column of its own)."""
    if not details or not record.attempts:
        return
    kept = {key: details[key] for key in AUDITED_STOP_DETAILS if key in details}
    if kept:
        record.attempts[-1]["stop_details"] = kept


def record_cost(
    record: AuditRecord, pricer: Pricer, answer: AggregatedResponse, price: PriceSettings | None
) -> None:
    """The exchange's cost, once, from its final usage (`complete_record` first).

    An answer that broke (upstream error, cut connection, a client that left) has no cost: the
    upstream bills what it generated, which the usage seen so far does not say (Anthropic's
    `message_start` carries a placeholder output count of 1). It is priced by the model the
    upstream says answered (OpenAI's `gpt-4o` answers as `gpt-4o-2024-08-06`, priced as such;
    an Azure deployment answers with its model's name), else by the model it was asked for.
    """
    if answer.error is not None:
        return
    model = answer.model or record.upstream_model
    cost = pricer.cost(Tokens.of(record), record.provider, model, price)
    if cost is not None:
        record.cost_usd, record.cost_source = cost.usd, cost.source
