"""Prometheus metrics, on a registry of the app's own (no module-level state).

Every counter moves once per exchange, from its finished audit record, so `/metrics` and the
audit trail always agree. Models that no route matched count under "-", so a client inventing
names cannot grow the label set; nor can it on a wildcard route, where the client picks the name:
past `metric_models` distinct names ([limits]), further new ones count under "other". A missing
provider or stop reason is named as the audit report names it (`NO_PROVIDER`, `NO_STOP_REASON`).
The gateway-key counters are moved by gateway.access, labelled by the keys' configured names.

With several workers (`multiprocess_dir`), each worker's values live in prometheus_client's
multiprocess files there (the supervisor sets PROMETHEUS_MULTIPROC_DIR before a worker starts,
as the library picks its value class at import) and `/metrics` reports the sum over the workers,
whichever answered the scrape; gauges say how they combine. The `metric_models` bound then holds
per worker.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.multiprocess import MultiProcessCollector

from gateway.audit.record import NO_PROVIDER, NO_STOP_REASON, AuditRecord, cost_unknown
from gateway.pool_metrics import PoolCollector, PoolPublisher, Pools
from gateway.resilience.circuit import STATE_VALUES
from gateway.resilience.outcome import ANSWERS, read_attempts

LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300)
CLIENT_CAUSED = frozenset({"stream_aborted"})
OTHER_MODELS = "other"  # the label of models past the `metric_models` distinct ones


def is_upstream_error(error_class: str | None) -> bool:
    if not error_class or error_class in CLIENT_CAUSED:
        return False
    return error_class.startswith(("Upstream", "StreamBroken", "stream_"))


class Children:
    """A labelled metric's children by label values, looked up in a dict: `labels()` validates
    and locks on every call, and every exchange moves several."""

    __slots__ = ("_children", "_metric")

    def __init__(self, metric: Any) -> None:
        self._metric = metric
        self._children: dict[tuple[str, ...], Any] = {}

    def __call__(self, *labels: str) -> Any:
        child = self._children.get(labels)
        if child is None:
            child = self._children[labels] = self._metric.labels(*labels)
        return child


class GatewayMetrics:
    def __init__(self, metric_models: int = 100, multiprocess_dir: str | None = None) -> None:
        self.registry = r = CollectorRegistry()
        self._scraped = r
        if multiprocess_dir is not None:
            self._scraped = CollectorRegistry()
            MultiProcessCollector(self._scraped, path=multiprocess_dir)  # type: ignore[no-untyped-call]
        self._metric_models = metric_models
        self._models: set[str] = set()
        self.requests = Counter(
            "gateway_requests",
            "Exchanges by provider, model, client format and stop reason",
            ["provider", "model", "client_format", "stop_reason"],
            registry=r,
        )
        self.truncated = Counter(
            "gateway_truncated_exchanges",
            "Cut exchanges by why they count as cut (length, context_window, connection_lost: "
            "reset or closed mid-body, missing_terminator: ended without the wire's terminator, "
            "upstream_error, upstream_timeout, cancelled, ...)",
            ["provider", "model", "cut_reason"],
            registry=r,
        )
        self.recovered = Counter(
            "gateway_recovered_exchanges",
            "Streams cut after their first byte and continued ([recovery]), by the first cut's "
            "reason (connection_lost, missing_terminator, upstream_timeout, upstream_error, "
            "length, ...)",
            ["provider", "model", "cause"],
            registry=r,
        )
        self.withheld = Counter(
            "gateway_withheld_tool_calls",
            "Tool calls of cut responses not delivered",
            ["provider", "model"],
            registry=r,
        )
        self.parse_failures = Counter(
            "gateway_tool_argument_parse_failures",
            "Tool-call arguments that were not JSON",
            ["provider", "model"],
            registry=r,
        )
        self.upstream_errors = Counter(
            "gateway_upstream_errors",
            "Upstream failures by error class",
            ["provider", "error_class"],
            registry=r,
        )
        self.runaway = Counter(
            "gateway_runaway_suspected",
            "Requests whose conversation repeats one tool call",
            ["provider", "model"],
            registry=r,
        )
        self.ttfb = Histogram(
            "gateway_time_to_first_byte_seconds",
            "Request start to first byte to the client",
            ["provider"],
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.duration = Histogram(
            "gateway_request_duration_seconds",
            "Request start to end of the response",
            ["provider"],
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.ended_early = Counter(
            "gateway_exchanges_ended_early",
            "Exchanges ended before their answer was complete, by who ended them",
            ["provider", "ended_by"],
            registry=r,
        )
        self.failed_attempts = Counter(
            "gateway_failed_attempts",
            "Attempts at upstream targets that did not answer, by outcome (error_status, "
            "timeout, unreachable, circuit_open, ...); an answered attempt counts in requests",
            ["provider", "outcome"],
            registry=r,
        )
        self.retried = Counter(
            "gateway_retried_exchanges",
            "Exchanges that took more than one attempt, by whether one answered",
            ["provider", "answered"],
            registry=r,
        )
        self.fallbacks = Counter(
            "gateway_fallback_exchanges",
            "Exchanges answered by another target than the first one tried",
            ["provider"],
            registry=r,
        )
        self.circuit_state = Gauge(
            "gateway_circuit_state",
            "Per target: 0 closed, 1 half-open (probing), 2 open (skipped)",
            ["target"],
            registry=r,
            multiprocess_mode="livemax",  # a circuit open in any live worker shows as open
        )
        self.in_flight = Gauge(
            "gateway_in_flight_exchanges",
            "Exchanges in progress",
            registry=r,
            multiprocess_mode="livesum",
        )
        self.queue_depth = Gauge(
            "gateway_audit_queue_depth",
            "Audit records waiting for the writer",
            registry=r,
            multiprocess_mode="livesum",
        )
        self.backpressure = Counter(
            "gateway_audit_backpressure_events",
            "Times an exchange waited because the audit queue was full",
            registry=r,
        )
        self.rejected = Counter(
            "gateway_audit_rejected_records",
            "Records the store refused even once repaired, set aside",
            registry=r,
        )
        self.reloads = Counter(
            "gateway_config_reloads",
            "Configuration reloads by result: reloaded, or refused (the running one kept)",
            ["result"],
            registry=r,
        )
        self.key_requests = Counter(
            "gateway_key_requests",
            "Exchanges by gateway key and what the access checks decided",
            ["key", "outcome"],
            registry=r,
        )
        self.key_tokens = Counter(
            "gateway_key_tokens",
            "Tokens used per gateway key (input and output, from the audit record's usage; "
            "estimated, where the upstream sent none)",
            ["key", "direction"],
            registry=r,
        )
        self.cost = Counter(
            "gateway_cost_usd",
            "What the exchanges cost in USD (route price, else the genai-prices table); "
            "exchanges of unknown cost add nothing here and count in cost_unknown_exchanges",
            ["provider", "model"],
            registry=r,
        )
        self.cost_unknown = Counter(
            "gateway_cost_unknown_exchanges",
            "Answered exchanges whose cost is not known (no usage, or a model no price covers)",
            ["provider", "model"],
            registry=r,
        )
        self._requests = Children(self.requests)
        self._ttfb = Children(self.ttfb)
        self._duration = Children(self.duration)
        self._cost = Children(self.cost)
        self._cost_unknown = Children(self.cost_unknown)
        self.state_errors = Counter(
            "gateway_shared_state_errors",
            "Shared-state (Redis) operations that failed (limits fail open, circuits count alone)",
            ["operation"],
            registry=r,
        )

    def model_label(self, record: AuditRecord) -> str:
        """The client's model name, "-" when no route took it, "other" past the bound."""
        if record.route is None:
            return "-"
        model = record.model
        models = self._models
        if model in models:
            return model
        if len(models) >= self._metric_models:
            return OTHER_MODELS
        models.add(model)
        return model

    def observe(self, record: AuditRecord) -> None:
        provider = record.provider or NO_PROVIDER
        model = self.model_label(record)
        stop = record.stop_reason or NO_STOP_REASON
        self._requests(provider, model, record.client_format, stop).inc()
        if record.truncated:
            self.truncated.labels(provider, model, record.cut_reason or NO_STOP_REASON).inc()
        if record.recovered:
            causes = record.recovered.get("causes") or (NO_STOP_REASON,)
            self.recovered.labels(provider, model, str(causes[0])).inc()
        if record.ended_by:
            self.ended_early.labels(provider, record.ended_by).inc()
        if record.withheld_tool_calls:
            self.withheld.labels(provider, model).inc(len(record.withheld_tool_calls))
        if record.parse_failures:
            self.parse_failures.labels(provider, model).inc(len(record.parse_failures))
        if is_upstream_error(record.error_class):
            self.upstream_errors.labels(provider, record.error_class).inc()
        if record.runaway_streak:
            self.runaway.labels(provider, model).inc()
        if record.cost_usd is not None:
            self._cost(provider, model).inc(record.cost_usd)
        elif cost_unknown(record):
            self._cost_unknown(provider, model).inc()
        attempts = record.attempts
        if len(attempts) > 1 or (attempts and attempts[0]["outcome"] not in ANSWERS):
            self._observe_attempts(provider, attempts)
        started, first_byte, ended = record.started_at, record.first_byte_at, record.ended_at
        if first_byte is not None:
            self._ttfb(provider).observe(first_byte - started)
        if ended is not None:
            self._duration(provider).observe(ended - started)

    def _observe_attempts(self, provider: str, attempts: list[dict[str, Any]]) -> None:
        for attempt in attempts:
            if attempt["outcome"] not in ANSWERS:
                self.failed_attempts.labels(attempt["provider"], attempt["outcome"]).inc()
        read = read_attempts(attempts)
        if read.tries > 1:
            self.retried.labels(provider, "true" if read.answered else "false").inc()
        if read.fell_back:
            self.fallbacks.labels(provider).inc()

    def watch_pools(self, pools: Pools) -> Callable[[], None] | None:
        """Export the upstream connection pools: read when /metrics is scraped (one process),
        or, with several workers, by the returned callable, which the app runs every
        `PUBLISH_EVERY` seconds."""
        if self._scraped is self.registry:
            self.registry.register(PoolCollector(pools))
            return None
        return PoolPublisher(pools, self.registry).publish

    def reload(self, result: str) -> None:
        self.reloads.labels(result).inc()

    def circuit(self, target: str, state: str) -> None:
        self.circuit_state.labels(target).set(STATE_VALUES[state])

    def render(self) -> bytes:
        return generate_latest(self._scraped)
