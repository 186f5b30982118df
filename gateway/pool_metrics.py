"""The providers' upstream connection pools in /metrics: nothing per request.

One process: a collector reads every pool's plain counters (`providers.http_pool.PoolStats`)
when /metrics is scraped. Several workers: a scrape reaches one worker, so each worker copies
its pools' counters into prometheus_client's multiprocess files every `PUBLISH_EVERY` seconds
(`PoolPublisher`), and the scrape sums the workers as it does for every other series.

    gateway_upstream_connections{provider,state}   open (in use or idle) and idle connections
    gateway_upstream_connection_limit{provider}    [providers.X] max_connections
    gateway_upstream_pool_waiting{provider}        requests waiting for a connection now
    gateway_upstream_pool_waits_total{provider}    requests that waited, since the start
    gateway_upstream_pool_wait_seconds_total{provider}   how long they waited, in all
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any, Final

from prometheus_client import CollectorRegistry, Counter, Gauge
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from providers.http_pool import PoolStats

Pools = Callable[[], Mapping[str, PoolStats | None]]
PUBLISH_EVERY: Final = 1.0  # seconds between a worker's copies (several workers only)

CONNECTIONS = ("gateway_upstream_connections", "Upstream connections per provider: open and idle")
LIMIT = (
    "gateway_upstream_connection_limit",
    "The most upstream connections a provider opens ([providers.X] max_connections)",
)
WAITING = (
    "gateway_upstream_pool_waiting",
    "Requests waiting now for an upstream connection (the provider's limit is reached)",
)
WAITS = ("gateway_upstream_pool_waits", "Requests that waited for an upstream connection")
WAITED = (
    "gateway_upstream_pool_wait_seconds",
    "Seconds requests waited for an upstream connection, in all",
)


class PoolCollector(Collector):
    """One process: the pools read at scrape time."""

    def __init__(self, pools: Pools) -> None:
        self._pools = pools

    def collect(self) -> Iterator[Any]:
        connections = GaugeMetricFamily(*CONNECTIONS, labels=["provider", "state"])
        limit = GaugeMetricFamily(*LIMIT, labels=["provider"])
        waiting = GaugeMetricFamily(*WAITING, labels=["provider"])
        waits = CounterMetricFamily(*WAITS, labels=["provider"])
        waited = CounterMetricFamily(*WAITED, labels=["provider"])
        for name, stats in self._pools().items():
            if stats is None:
                continue
            connections.add_metric([name, "open"], stats.open)
            connections.add_metric([name, "idle"], stats.idle)
            if stats.limit is not None:
                limit.add_metric([name], stats.limit)
            waiting.add_metric([name], stats.waiting)
            waits.add_metric([name], stats.waits)
            waited.add_metric([name], stats.wait_seconds)
        yield from (connections, limit, waiting, waits, waited)


class PoolPublisher:
    """Several workers: `publish()` copies this worker's pools into the multiprocess series
    (gauges summed over live workers, the limit the live workers' largest; the totals move by
    what changed since the last copy, so a worker that ended keeps its share)."""

    def __init__(self, pools: Pools, registry: CollectorRegistry) -> None:
        self._pools = pools
        self._connections = Gauge(
            *CONNECTIONS, ["provider", "state"], registry=registry, multiprocess_mode="livesum"
        )
        self._limit = Gauge(*LIMIT, ["provider"], registry=registry, multiprocess_mode="livemax")
        self._waiting = Gauge(
            *WAITING, ["provider"], registry=registry, multiprocess_mode="livesum"
        )
        self._waits = Counter(*WAITS, ["provider"], registry=registry)
        self._waited = Counter(*WAITED, ["provider"], registry=registry)
        self._copied: dict[str, tuple[int, float]] = {}  # per provider: the totals copied

    def publish(self) -> None:
        for name, stats in self._pools().items():
            if stats is None:
                continue
            self._connections.labels(name, "open").set(stats.open)
            self._connections.labels(name, "idle").set(stats.idle)
            if stats.limit is not None:
                self._limit.labels(name).set(stats.limit)
            self._waiting.labels(name).set(stats.waiting)
            waits, waited = self._copied.get(name, (0, 0.0))
            if stats.waits > waits:
                self._waits.labels(name).inc(stats.waits - waits)
            if stats.wait_seconds > waited:
                self._waited.labels(name).inc(stats.wait_seconds - waited)
            self._copied[name] = (stats.waits, stats.wait_seconds)
