"""A run measured in slices, merged back into the one record it stands for.

The field suite cuts each of its runs (a workload sent to a target at one concurrency, in one
trial) into slices and runs them in rounds: one slice of every run, then the next round, so the
runs it compares share the host's moments instead of each having a minute of its own. A slice is
one load-generator job that also returned its raw, sorted latencies (`raw`); merging takes the
percentiles of all of them together, adds up the counts, the measured seconds and the CPU, and
keeps the highest memory.

    record = merged([slice_1, slice_2, slice_3, slice_4])
"""

from __future__ import annotations

import collections
import heapq
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final

from gateway_bench import stats
from gateway_bench.gateway_log import SAMPLES

SUMMED: Final = ("requests", "ok", "elapsed_s", "loadgen_cpu_s")
COUNTED: Final = ("errors", "warmup_errors")


def merged(slices: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """One record from the slices of one run, in the order they ran; their raw values dropped."""
    first = slices[0]
    out = {key: value for key, value in first.items() if key != "raw_ms"}
    for key in SUMMED:
        out[key] = sum(part[key] for part in slices)
    for key in COUNTED:
        out[key] = counted(part.get(key) or {} for part in slices)
    raw = {
        name: list(heapq.merge(*(part["raw_ms"][name] for part in slices)))
        for name in ("latency", "ttfb", "ttft")
    }
    out["latency_ms"] = stats.summary(raw["latency"])
    out["ttfb_ms"] = stats.summary(raw["ttfb"])
    out["ttft_ms"] = stats.summary(raw["ttft"])
    out["latency_quantiles_ms"] = stats.quantiles(raw["latency"])
    out["rps"] = out["ok"] / out["elapsed_s"] if out["elapsed_s"] > 0 else 0.0
    out["servers"] = {
        name: merged_tree([part["servers"][name] for part in slices])
        for name in first.get("servers", {})
    }
    if any("gateway_log" in part for part in slices):
        out["gateway_log"] = merged_log([part.get("gateway_log") or {} for part in slices])
    server = out["servers"].get("server")
    ok = out["ok"]
    out["cpu_ms_per_req"] = server["cpu_s"] * 1000 / ok if server and ok else None
    out["slices"] = len(slices)
    out["slice_starts_s"] = [part["started_s"] for part in slices]
    return out


def counted(tables: Iterable[Mapping[str, int]]) -> dict[str, int]:
    counts: collections.Counter[str] = collections.Counter()
    for table in tables:
        counts.update(table)
    return dict(counts)


def merged_tree(windows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """A watched process tree over the slices' windows: CPU added up, memory at its highest,
    the start of the first window and the end of the last."""
    return {
        "cpu_s": sum(window["cpu_s"] for window in windows),
        "rss_start_mb": windows[0]["rss_start_mb"],
        "rss_max_mb": max(window["rss_max_mb"] for window in windows),
        "rss_end_mb": windows[-1]["rss_end_mb"],
        "process_rss_max_mb": max(window["process_rss_max_mb"] for window in windows),
        "pss_end_mb": windows[-1]["pss_end_mb"],
        "processes": max(window["processes"] for window in windows),
    }


def merged_log(drains: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    levels = counted(drain.get("levels") or {} for drain in drains)
    samples = [line for drain in drains for line in drain.get("samples", [])][:SAMPLES]
    return {"levels": levels, "samples": samples} if levels else {}
