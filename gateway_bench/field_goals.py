"""The field suite's targets: ahead of the fastest published gateway, with the audit trail on.

Each target is stated twice. The absolute limit is the published figure to beat (GoModel's, on
its 2-vCPU machine). The ratio limit is the same limit over what the direct call to the fake
upstream measured on this project's reference machine (2 cores, `REFERENCE`): a figure of the
gateway over the direct call of the same run does not depend on how fast the host is, so a
faster or slower machine is judged by the same ratio. Both verdicts are shown; the ratio's is
the one that travels between machines.

Messages and Responses are judged against Chat in the same run (within 10%), which is a ratio
already; memory per worker is judged in MB, and as a ratio to the fake upstream's own process.

    rows = check(summary, judged="gateway")
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from gateway_bench.field_plan import FASTEST

# The direct call's figures on the reference machine (this project's 2-core machine): the mean of
# the field suite's two full runs there on 2026-12-04 (docs/performance/field.md), the
# denominators that turn each absolute limit into a ratio limit.
REFERENCE: Final = {
    "chat_peak_rps": 135_070.0,  # the load generator against the fake upstream (133,761; 136,378)
    "chat_p99_ms": 0.1545,  # at c10 (0.151; 0.158)
    "process_rss_mb": 31.15,  # the fake upstream's peak over the whole run (31.2; 31.1)
    "cold_start_s": 0.0825,  # the fake upstream's, process start to first answer (0.093; 0.072)
}
RSS_PER_WORKER_MB: Final = 64.0
COLD_START_S: Final = 0.5
WITHIN: Final = 0.10  # Messages and Responses against Chat


@dataclass(frozen=True, slots=True)
class Verdict:
    name: str
    limit: str
    ratio_limit: str
    measured: str
    ratio: str
    met: bool | None  # the absolute limit; None: not measured
    ratio_met: bool | None

    def public(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "limit": self.limit,
            "ratio_limit": self.ratio_limit,
            "measured": self.measured,
            "ratio": self.ratio,
            "met": self.met,
            "ratio_met": self.ratio_met,
        }


def compare(value: float | None, limit: float, ok: Callable[[float, float], bool]) -> bool | None:
    return None if value is None else ok(value, limit)


def above(value: float, limit: float) -> bool:
    return value > limit


def at_most(value: float, limit: float) -> bool:
    return value <= limit


def below(value: float, limit: float) -> bool:
    return value < limit


def shown(value: float | None, form: str) -> str:
    return "-" if value is None else form.format(value)


def row_of(summary: Mapping[str, Any], workload: str, target: str) -> Mapping[str, Any] | None:
    rows: Sequence[Mapping[str, Any]] = summary["workloads"]
    for row in rows:
        if row["workload"] == workload and row["target"] == target:
            return row
    return None


def footprint_of(summary: Mapping[str, Any], target: str) -> Mapping[str, Any]:
    rows: Sequence[Mapping[str, Any]] = summary["footprint"]
    for row in rows:
        if row["target"] == target:
            return row
    return {}


def get(row: Mapping[str, Any] | None, key: str) -> float | None:
    value = None if row is None else row.get(key)
    return float(value) if value is not None else None


def level_with_chat(summary: Mapping[str, Any], target: str) -> list[Verdict]:
    """Responses and Messages, each mode, against Chat in the same mode: peak throughput at
    least 90% of Chat's, p50 at concurrency 10 at most 110% of it. The gateway's CPU per request
    at the peak is shown beside them: on a machine the load generator and the fake upstream
    share, a heavier wire costs them too (the Responses stream's direct call is slower than
    Chat's), and the CPU says what of it is the gateway's."""
    verdicts = []
    for api in ("responses", "messages"):
        for suffix, mode in (("", "non-stream"), ("-stream", "stream")):
            chat = row_of(summary, "chat" + suffix, target)
            other = row_of(summary, api + suffix, target)
            peak = ratio_of(get(other, "peak_rps"), get(chat, "peak_rps"))
            p50 = ratio_of(get(other, "p50_ms"), get(chat, "p50_ms"))
            met = None if peak is None or p50 is None else peak >= 1 - WITHIN and p50 <= 1 + WITHIN
            key = "cpu_ms_per_req_at_peak"
            cpu = ratio_of(get(other, key), get(chat, key))
            measured = f"peak {shown(peak, '{:.2f}')}x, p50 {shown(p50, '{:.2f}')}x"
            if cpu is not None:  # not judged: what the gateway itself spends, for the reader
                measured += f" (CPU/req {cpu:.2f}x)"
            verdicts.append(
                Verdict(
                    f"{api.capitalize()} {mode} vs Chat {mode}",
                    f">= {1 - WITHIN:.2f}x peak, <= {1 + WITHIN:.2f}x p50",
                    "(a ratio)",
                    measured,
                    measured,
                    met,
                    met,
                )
            )
    return verdicts


def ratio_of(value: float | None, base: float | None) -> float | None:
    return value / base if value is not None and base else None


def check(summary: Mapping[str, Any], judged: str) -> list[Verdict]:
    chat = row_of(summary, "chat", judged)
    peak, peak_x = get(chat, "peak_rps"), get(chat, "peak_x_direct")
    p99, p99_x = get(chat, "p99_ms"), get(chat, "p99_x_direct")
    peak_limit_x = FASTEST.peak_rps / REFERENCE["chat_peak_rps"]
    p99_limit_x = FASTEST.p99_ms / REFERENCE["chat_p99_ms"]
    rss_limit_x = RSS_PER_WORKER_MB / REFERENCE["process_rss_mb"]
    cold_limit_x = COLD_START_S / REFERENCE["cold_start_s"]
    foot = footprint_of(summary, judged)
    rss, rss_x = get(foot, "process_rss_mb"), get(foot, "process_rss_x_direct")
    cold, cold_x = get(foot, "cold_start_s"), get(foot, "cold_start_x_direct")
    return [
        Verdict(
            "Chat non-stream, peak throughput",
            f"> {FASTEST.peak_rps:,.0f} req/s",
            f">= {peak_limit_x:.4f}x direct",
            shown(peak, "{:,.0f} req/s"),
            shown(peak_x, "{:.4f}x"),
            compare(peak, FASTEST.peak_rps, above),
            compare(peak_x, peak_limit_x, at_least),
        ),
        Verdict(
            "Chat non-stream, p99 at c10",
            f"< {FASTEST.p99_ms:g} ms",
            f"<= {p99_limit_x:.1f}x direct",
            shown(p99, "{:.2f} ms"),
            shown(p99_x, "{:.1f}x"),
            compare(p99, FASTEST.p99_ms, below),
            compare(p99_x, p99_limit_x, at_most),
        ),
        *level_with_chat(summary, judged),
        Verdict(
            "RSS per worker (largest process, peak)",
            f"<= {RSS_PER_WORKER_MB:g} MB",
            f"<= {rss_limit_x:.2f}x the upstream's",
            shown(rss, "{:.1f} MB"),
            shown(rss_x, "{:.2f}x"),
            compare(rss, RSS_PER_WORKER_MB, at_most),
            compare(rss_x, rss_limit_x, at_most),
        ),
        Verdict(
            "Cold start, process start to first answer",
            f"<= {COLD_START_S:g} s",
            f"<= {cold_limit_x:.2f}x the upstream's",
            shown(cold, "{:.3f} s"),
            shown(cold_x, "{:.2f}x"),
            compare(cold, COLD_START_S, at_most),
            compare(cold_x, cold_limit_x, at_most),
        ),
    ]


def at_least(value: float, limit: float) -> bool:
    return value >= limit


def public(verdicts: Sequence[Verdict]) -> list[dict[str, Any]]:
    return [verdict.public() for verdict in verdicts]
