"""What a bench run measures: the modes, the formats, the concurrencies and how long each cell
runs; the default matrix and the `--quick` preset.

A format is a row: which wire the client speaks to the gateway, which wire the gateway speaks
to the upstream, and the route prefix of its model names (`bench-*`, `xbench-*`, ...) that both
the bench's generated configuration and an external gateway's must route that way. A direct run
of the cell speaks the upstream wire to the fake upstream, so "added" is what the gateway adds
on top of what the same upstream answer costs without it.

    plan = Plan(modes=("nonstream", "burst"), formats=("same", "cross"), concurrency=(1, 32))
    for cell in plan.cells(): ...
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, replace
from typing import Final

from gateway_bench.scenario import DEFAULT_CHUNKS, Scenario


@dataclass(frozen=True, slots=True)
class Mode:
    name: str
    stream: bool
    paced: bool
    label: str


MODES: Final[Mapping[str, Mode]] = {
    mode.name: mode
    for mode in (
        Mode("nonstream", False, False, "non-stream"),
        Mode("burst", True, False, "stream burst"),
        Mode("paced", True, True, "stream paced"),
    )
}


@dataclass(frozen=True, slots=True)
class Format:
    name: str
    client_wire: str  # what the load generator speaks to a gateway
    upstream_wire: str  # what the gateway speaks to the upstream (and a direct run speaks)
    prefix: str  # the route prefix of its model names
    label: str


FORMATS: Final[Mapping[str, Format]] = {
    row.name: row
    for row in (
        Format("same", "openai", "openai", "bench", "Chat -> OpenAI"),
        Format("cross", "openai", "anthropic", "xbench", "Chat -> Anthropic"),
        Format("anthropic", "anthropic", "anthropic", "abench", "Messages -> Anthropic"),
        Format("responses", "openai_responses", "openai_responses", "rbench", "Responses"),
        Format("gemini", "openai", "gemini", "gbench", "Chat -> Gemini"),
        Format("bedrock", "openai", "bedrock", "bbench", "Chat -> Bedrock"),
    )
}
# Held streams go through routes of their own (`hbench-*`), spread over several providers so
# that a provider's connection pool does not cap how many can be open at once.
HOLD: Final = Format("hold", "openai", "openai", "hbench", "held stream")


@dataclass(frozen=True, slots=True)
class Cell:
    mode: Mode
    format: Format
    concurrency: int

    @property
    def key(self) -> str:
        return f"{self.mode.name}/{self.format.name}/c{self.concurrency}"

    def model(self, chunks: int, pace_ms: float) -> str:
        scenario = Scenario(chunks, pace_ms if self.mode.paced else None)
        return scenario.model(self.format.prefix)


@dataclass(frozen=True, slots=True)
class Plan:
    modes: tuple[str, ...] = ("nonstream", "burst", "paced")
    formats: tuple[str, ...] = ("same", "cross")
    concurrency: tuple[int, ...] = (1, 32, 64)
    reps: int = 3
    duration: float = 2.0  # seconds per run (measured window)
    max_requests: int = 200_000  # per run
    # A run lasts until `duration` passed and each connection made this many requests: a slow
    # target's window stretches rather than ending with its first answers still in flight.
    min_requests_per_connection: int = 4
    warmup: int = 50  # requests per run before the window, at least one per connection
    timeout: float = 30.0  # per request
    chunks: int = DEFAULT_CHUNKS
    pace_ms: float = 1.0
    idle_levels: tuple[int, ...] = (100, 500, 1000)
    growth_chunks: tuple[int, ...] = (20, 200, 2000)
    growth_bytes: tuple[int, ...] = (1_000, 10_000, 100_000, 1_000_000)
    growth_streams: tuple[int, ...] = (0, 100, 1000)
    growth_concurrency: int = 8

    def cells(self) -> Iterator[Cell]:
        for mode in self.modes:
            for name in self.formats:
                for concurrency in self.concurrency:
                    yield Cell(MODES[mode], FORMATS[name], concurrency)


QUICK: Final = Plan(
    modes=("nonstream", "burst", "paced"),
    formats=("same", "cross"),
    concurrency=(1, 8),
    reps=1,
    duration=0.3,
    warmup=10,
    timeout=10.0,
    idle_levels=(50, 100, 200),
    growth_chunks=(20, 200),
    growth_bytes=(1_000, 10_000),
    growth_streams=(0, 10),
    growth_concurrency=4,
)


def preset(quick: bool) -> Plan:
    return replace(QUICK) if quick else Plan()
