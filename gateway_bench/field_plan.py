"""`gateway bench --suite field`: what it measures, and the published table it is read against.

The field's public benchmark of 2026 (GoModel's, on a 2-vCPU c7i.large, an instant mock backend,
retries off) measures six workloads: Chat Completions, the Responses API and Anthropic Messages,
each streamed and not; 8,000 requests per workload at concurrency 10 in two trials of randomized
order (latency: the median across them), the sustained throughput from a separate concurrency
sweep, peak RSS and cold start. This suite runs the same shape against the bench's zero-latency
fake upstream, and also measures the direct call to that upstream in every trial, so that every
figure has a ratio that does not depend on the host's speed.

A workload is a row: the client API, whether it streams, and the `FORMATS` row that routes it
(the client's wire in, the same wire out, as the field's mock backend answers every API).

    plan = FieldPlan()                     # the published parameters
    plan = quick_field_plan()              # a smoke run of seconds
    for workload in plan.workloads(): ...
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Final

from gateway_bench.plan import FORMATS, Format
from gateway_bench.scenario import DEFAULT_CHUNKS


@dataclass(frozen=True, slots=True)
class Workload:
    name: str
    api: str  # as the field's table names it
    format: Format
    stream: bool

    @property
    def label(self) -> str:
        return f"{self.api} {'stream' if self.stream else 'non-stream'}"


WORKLOADS: Final[Mapping[str, Workload]] = {
    row.name: row
    for row in (
        Workload("chat", "Chat", FORMATS["same"], False),
        Workload("chat-stream", "Chat", FORMATS["same"], True),
        Workload("responses", "Responses", FORMATS["responses"], False),
        Workload("responses-stream", "Responses", FORMATS["responses"], True),
        Workload("messages", "Messages", FORMATS["anthropic"], False),
        Workload("messages-stream", "Messages", FORMATS["anthropic"], True),
    )
}
REFERENCE_WORKLOAD: Final = "chat"  # what the field's headline figures are of


@dataclass(frozen=True, slots=True)
class FieldPlan:
    requests: int = 8000  # per workload, target and trial, at `concurrency`
    concurrency: int = 10  # the latency runs'
    sweep: tuple[int, ...] = (1, 16, 128)  # the capacity sweep's concurrencies
    sweep_duration: float = 2.0  # seconds per sweep run
    trials: int = 2
    rounds: int = 4  # slices of every run, interleaved with the other runs' (field_run)
    warmup: int = 200  # requests before each run, dropped
    cold_starts: int = 5  # process starts per gateway, and of the upstream
    chunks: int = DEFAULT_CHUNKS  # content chunks of a streamed answer
    timeout: float = 30.0  # per request
    seed: int = 2026  # of the trials' random orders
    audit: tuple[str, ...] = ("on", "off")  # the gateways the bench starts
    names: tuple[str, ...] = tuple(WORKLOADS)

    def workloads(self) -> Iterator[Workload]:
        for name in self.names:
            yield WORKLOADS[name]


def quick_field_plan() -> FieldPlan:
    return FieldPlan(
        requests=200,
        sweep=(1, 16),
        sweep_duration=0.3,
        trials=2,
        rounds=2,
        warmup=20,
        cold_starts=2,
        timeout=10.0,
    )


@dataclass(frozen=True, slots=True)
class Published:
    """One gateway's row of the field's table: Chat non-stream at concurrency 10."""

    gateway: str
    language: str
    p50_ms: float
    p99_ms: float
    peak_rps: float
    peak_rss_mb: float
    cold_start_s: float


PUBLISHED_SOURCE: Final = (
    "GoModel's AI gateway benchmark, June 2026 (AWS c7i.large, 2 vCPU, mock backend, retries "
    "off): https://dev.to/s-bandy/benchmarking-ai-gateways-gomodel-vs-litellm-vs-portkey-vs-"
    "bifrost-5d98"
)
PUBLISHED: Final = (
    Published("GoModel", "Go", 1.81, 6.88, 4928, 37, 0.56),
    Published("Bifrost", "Go", 2.51, 18.27, 3088, 143, 7.07),
    Published("Portkey", "TypeScript", 9.70, 30.54, 946, 112, 1.05),
    Published("LiteLLM", "Python", 30.56, 39.26, 324, 2272, 25.49),
)
FASTEST: Final = PUBLISHED[0]
