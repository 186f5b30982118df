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

import operator
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from gateway_bench.field_plan import FASTEST
from gateway_bench.field_summary import ratio

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


# How a figure must compare with its limit, by the symbol shown.
OPS: Final[Mapping[str, Callable[[float, float], bool]]] = {
    ">": operator.gt,
    ">=": operator.ge,
    "<": operator.lt,
    "<=": operator.le,
}


@dataclass(frozen=True, slots=True)
class Limit:
    """One absolute target and its ratio twin: where the figure is (a workload's row of the
    judged target; None: its footprint row), the limit, the REFERENCE figure the ratio limit is
    the limit over, and how each reads."""

    name: str
    workload: str | None
    key: str
    ratio_key: str
    limit: float
    reference: str
    symbol: str
    ratio_symbol: str
    limit_form: str
    value_form: str
    ratio_form: str
    ratio_of_what: str


CHAT_LIMITS: Final = (
    Limit(
        "Chat non-stream, peak throughput",
        "chat",
        "peak_rps",
        "peak_x_direct",
        FASTEST.peak_rps,
        "chat_peak_rps",
        ">",
        ">=",
        "{:,.0f} req/s",
        "{:,.0f} req/s",
        "{:.4f}x",
        "direct",
    ),
    Limit(
        "Chat non-stream, p99 at c10",
        "chat",
        "p99_ms",
        "p99_x_direct",
        FASTEST.p99_ms,
        "chat_p99_ms",
        "<",
        "<=",
        "{:g} ms",
        "{:.2f} ms",
        "{:.1f}x",
        "direct",
    ),
)
FOOTPRINT_LIMITS: Final = (
    Limit(
        "RSS per worker (largest process, peak)",
        None,
        "process_rss_mb",
        "process_rss_x_direct",
        RSS_PER_WORKER_MB,
        "process_rss_mb",
        "<=",
        "<=",
        "{:g} MB",
        "{:.1f} MB",
        "{:.2f}x",
        "the upstream's",
    ),
    Limit(
        "Cold start, process start to first answer",
        None,
        "cold_start_s",
        "cold_start_x_direct",
        COLD_START_S,
        "cold_start_s",
        "<=",
        "<=",
        "{:g} s",
        "{:.3f} s",
        "{:.2f}x",
        "the upstream's",
    ),
)


def compare(value: float | None, limit: float, symbol: str) -> bool | None:
    return None if value is None else OPS[symbol](value, limit)


def shown(value: float | None, form: str) -> str:
    return "-" if value is None else form.format(value)


def find(rows: Sequence[Mapping[str, Any]], **match: str) -> Mapping[str, Any] | None:
    for row in rows:
        if all(row[key] == value for key, value in match.items()):
            return row
    return None


def get(row: Mapping[str, Any] | None, key: str) -> float | None:
    value = None if row is None else row.get(key)
    return float(value) if value is not None else None


def judge(limit: Limit, row: Mapping[str, Any] | None) -> Verdict:
    value, value_x = get(row, limit.key), get(row, limit.ratio_key)
    limit_x = limit.limit / REFERENCE[limit.reference]
    return Verdict(
        limit.name,
        f"{limit.symbol} {limit.limit_form.format(limit.limit)}",
        f"{limit.ratio_symbol} {limit.ratio_form.format(limit_x)} {limit.ratio_of_what}",
        shown(value, limit.value_form),
        shown(value_x, limit.ratio_form),
        compare(value, limit.limit, limit.symbol),
        compare(value_x, limit_x, limit.ratio_symbol),
    )


def level_with_chat(rows: Sequence[Mapping[str, Any]], target: str) -> list[Verdict]:
    """Responses and Messages, each mode, against Chat in the same mode: peak throughput at
    least 90% of Chat's, p50 at concurrency 10 at most 110% of it. The gateway's CPU per request
    at the peak is shown beside them: on a machine the load generator and the fake upstream
    share, a heavier wire costs them too (the Responses stream's direct call is slower than
    Chat's), and the CPU says what of it is the gateway's."""
    verdicts = []
    for api in ("responses", "messages"):
        for suffix, mode in (("", "non-stream"), ("-stream", "stream")):
            chat = find(rows, workload="chat" + suffix, target=target)
            other = find(rows, workload=api + suffix, target=target)
            peak = ratio(get(other, "peak_rps"), get(chat, "peak_rps"))
            p50 = ratio(get(other, "p50_ms"), get(chat, "p50_ms"))
            met = None if peak is None or p50 is None else peak >= 1 - WITHIN and p50 <= 1 + WITHIN
            key = "cpu_ms_per_req_at_peak"
            cpu = ratio(get(other, key), get(chat, key))
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


def check(summary: Mapping[str, Any], judged: str) -> list[Verdict]:
    rows = summary["workloads"]
    footprint = find(summary["footprint"], target=judged)
    return [
        *(judge(limit, find(rows, workload="chat", target=judged)) for limit in CHAT_LIMITS),
        *level_with_chat(rows, judged),
        *(judge(limit, footprint) for limit in FOOTPRINT_LIMITS),
    ]


def public(verdicts: Sequence[Verdict]) -> list[dict[str, Any]]:
    return [verdict.public() for verdict in verdicts]
