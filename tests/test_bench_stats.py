"""The bench's arithmetic on known inputs: percentiles, medians, ratios and differences taken per
repetition, CPU per chunk, the per-cell summary, the targets checklist, the idle-stream and
growth verdicts."""

from __future__ import annotations

from typing import Any

import pytest

from gateway_bench import stats
from gateway_bench.goals import check
from gateway_bench.growth import AXES, flat_verdict, marginal_verdict
from gateway_bench.plan import Plan
from gateway_bench.run import flatness, rotated
from gateway_bench.summary import summarize
from gateway_bench.targets import Target


def test_percentiles_interpolate_between_ranks():
    values = [1.0, 2.0, 3.0, 4.0]
    assert stats.percentile(values, 0) == 1.0
    assert stats.percentile(values, 50) == 2.5
    assert stats.percentile(values, 100) == 4.0
    assert stats.percentile([5.0], 99) == 5.0
    assert stats.percentile([], 50) is None
    ordered = [float(i) for i in range(1, 101)]
    assert stats.percentile(ordered, 99) == pytest.approx(99.01)
    summary = stats.summary(ordered)
    assert summary["p50"] == 50.5 and summary["max"] == 100.0 and summary["mean"] == 50.5


def test_quantiles_keep_the_distribution_for_plots():
    curve = stats.quantiles([float(i) for i in range(11)])
    assert len(curve) == stats.QUANTILES
    assert curve[0] == 0.0 and curve[50] == 5.0 and curve[-1] == 10.0
    assert stats.quantiles([]) == []


def test_medians_skip_missing_values():
    assert stats.median([3.0, None, 1.0, 2.0]) == 2.0
    assert stats.median([None]) is None


def test_ratios_are_taken_per_repetition_then_medianed():
    numerators, denominators = [2.0, 3.0, 10.0], [1.0, 6.0, 4.0]
    assert stats.per_rep_ratio(numerators, denominators) == 2.0  # of 2, 0.5, 2.5
    # the ratio of the medians would be 3 / 4: not what is reported
    assert stats.median(numerators) / stats.median(denominators) == 0.75
    assert stats.per_rep_ratio([1.0, None, 4.0], [2.0, 1.0, 0.0]) == 0.5  # gaps and zeros out
    assert stats.per_rep_difference([1.0, 1.2, 0.9], [0.1, 0.1, 0.2]) == pytest.approx(0.9)


def test_cpu_per_chunk_is_what_streaming_added_per_chunk():
    assert stats.cpu_per_chunk(0.45, 0.25, 20) == pytest.approx(0.01)
    assert stats.cpu_per_chunk(None, 0.25, 20) is None
    assert stats.cpu_per_chunk(0.45, 0.25, 0) is None


def test_loglog_slope_says_linear_or_quadratic():
    xs = [20.0, 200.0, 2000.0]
    assert stats.loglog_slope(xs, [2.0, 20.0, 200.0]) == pytest.approx(1.0)
    assert stats.loglog_slope(xs, [4.0, 400.0, 40000.0]) == pytest.approx(2.0)
    assert stats.loglog_slope(xs, [1.0, None, None]) is None


def record(
    cell: str, target: str, rep: int, rps: float, p50: float, cpu: float, **extra: Any
) -> dict[str, Any]:
    return {
        "cell": cell,
        "target": target,
        "rep": rep,
        "ok": 100,
        "rps": rps,
        "latency_ms": {"p50": p50, "p99": p50 * 3},
        "ttfb_ms": {"p50": p50 / 2},
        "cpu_ms_per_req": cpu,
        "servers": {"server": {"rss_max_mb": extra.get("rss", 50.0 + rep)}},
        "errors": extra.get("errors", {}),
        "warmup_errors": {},
    }


PLAN = Plan(modes=("nonstream", "burst"), formats=("same", "cross"), concurrency=(1,), reps=3)
NAMES = ["direct", "gateway", "other"]


def matrix() -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    table = {
        # cell: {target: (rps per rep, p50 per rep, cpu per rep)}
        "nonstream/same/c1": {
            "direct": ([1000, 1100, 900], [0.1, 0.1, 0.2], [0.01, 0.01, 0.01]),
            "gateway": ([500, 500, 450], [1.0, 1.2, 0.9], [0.2, 0.3, 0.25]),
            "other": ([50, 50, 45], [10.0, 12.0, 9.0], [6.0, 9.0, 7.5]),
        },
        "burst/same/c1": {
            "direct": ([900, 900, 900], [0.1, 0.1, 0.1], [0.02, 0.02, 0.02]),
            "gateway": ([300, 300, 300], [2.0, 2.0, 2.0], [0.4, 0.5, 0.45]),
            "other": ([30, 30, 30], [20.0, 20.0, 20.0], [20.0, 25.0, 22.5]),
        },
        "nonstream/cross/c1": {
            "direct": ([1000, 1000, 1000], [0.1, 0.1, 0.1], [0.01, 0.01, 0.01]),
            "gateway": ([400, 400, 400], [1.1, 1.1, 1.1], [0.24, 0.33, 0.3]),
            "other": ([40, 40, 40], [11.0, 11.0, 11.0], [7.0, 7.0, 7.0]),
        },
        "burst/cross/c1": {
            "direct": ([900, 900, 900], [0.1, 0.1, 0.1], [0.02, 0.02, 0.02]),
            "gateway": ([250, 250, 250], [2.2, 2.2, 2.2], [0.5, 0.6, 0.55]),
            "other": ([25, 25, 25], [22.0, 22.0, 22.0], [25.0, 25.0, 25.0]),
        },
    }
    for cell, targets in table.items():
        for target, (rps, p50, cpu) in targets.items():
            for rep in range(3):
                failed = (target, rep, cell) == ("other", 1, "burst/same/c1")
                errors = {"status 502": 2} if failed else {}
                rows.append(record(cell, target, rep, rps[rep], p50[rep], cpu[rep], errors=errors))
    return rows


def test_the_summary_of_a_cell():
    cells = {c["cell"]: c for c in summarize(PLAN, matrix(), NAMES)}
    whole = cells["nonstream/same/c1"]
    assert whole["targets"]["gateway"]["rps"] == 500
    assert whole["targets"]["gateway"]["cpu_ms_per_req"] == 0.25
    assert whole["targets"]["gateway"]["rss_max_mb"] == 52.0  # the peak, not the median
    assert whole["vs_direct"]["gateway"]["rps_ratio"] == 0.5  # of 0.5, 0.4545, 0.5
    assert whole["vs_direct"]["gateway"]["added_p50_ms"] == pytest.approx(0.9)
    assert whole["vs_gateway"]["other"]["rps_ratio"] == pytest.approx(0.1)
    assert whole["vs_gateway"]["other"]["cpu_ratio"] == pytest.approx(30.0)
    assert whole["cpu_us_per_chunk"] == {}  # a whole answer has no chunks
    burst = cells["burst/same/c1"]
    # per repetition: (0.4 - 0.2) / 20, (0.5 - 0.3) / 20, (0.45 - 0.25) / 20 ms = 10 us
    assert burst["cpu_us_per_chunk"]["gateway"] == pytest.approx(10.0)
    assert burst["targets"]["other"]["errors"] == {"status 502": 2}
    assert burst["targets"]["other"]["error_count"] == 2
    assert burst["targets"]["gateway"]["error_count"] == 0


def test_the_targets_checklist():
    records = matrix()
    cells = summarize(PLAN, records, NAMES)
    idle = {"gateway": {"levels": [{"kb_per_stream": 30.0}], "flat": True}}
    rows = {row["goal"]: row for row in check(PLAN, cells, records, idle, NAMES[1:])}
    cpu = rows["CPU per non-streamed request"]
    assert cpu["values"] == {"gateway": 0.25, "other": 7.5}
    assert cpu["pass"] is True and cpu["concurrency"] == 1
    assert rows["CPU per relayed chunk, burst"]["values"]["gateway"] == pytest.approx(10.0)
    assert rows["CPU per relayed chunk, burst"]["pass"] is True
    assert rows["CPU per relayed chunk, paced"]["pass"] is None  # not measured in this plan
    assert rows["Added p50 latency, non-stream"]["values"]["gateway"] == pytest.approx(0.9)
    assert rows["Added p50 latency, non-stream"]["pass"] is False
    assert rows["RSS at concurrency 64"]["values"]["gateway"] == 52.0
    # cross / same per repetition: 0.24/0.2, 0.33/0.3, 0.3/0.25 -> 1.2, 1.1, 1.2
    assert rows["Cross-format CPU / same-format"]["values"]["gateway"] == pytest.approx(1.2)
    assert rows["Cross-format CPU / same-format"]["pass"] is True
    assert rows["Memory per idle open stream"]["values"]["gateway"] == 30.0
    assert rows["Memory per idle open stream"]["pass"] is True


def test_idle_streams_are_flat_when_each_step_costs_the_same():
    base = 100 * 2**20
    levels = [{"streams": 100, "rss_mb": 101.0}, {"streams": 500, "rss_mb": 105.0}]
    flat = flatness(base, [*levels, {"streams": 1000, "rss_mb": 110.0}])
    assert flat["kb_per_stream_steps"] == pytest.approx([10.24, 10.24, 10.24])
    assert flat["flat"] is True
    growing = flatness(base, [*levels, {"streams": 1000, "rss_mb": 115.0}])
    assert growing["kb_per_stream_steps"][-1] == pytest.approx(20.48)
    assert growing["flat"] is False
    assert flatness(base, levels[:1])["flat"] is None


def test_growth_verdicts():
    chunks = AXES[0]
    rows = [{"x": 20}, {"x": 200}, {"x": 2000}]
    assert marginal_verdict(chunks, rows, [0.3, 1.2, 10.2]) is True  # 5 us, then 5 us a chunk
    assert rows[2]["marginal"] == pytest.approx(5.0)
    assert marginal_verdict(chunks, [dict(r) for r in rows], [0.3, 1.2, 40.0]) is False
    assert marginal_verdict(chunks, [dict(r) for r in rows[:2]], [0.3, 1.2]) is None
    sizes = AXES[1]
    kb = [{"x": 1000}, {"x": 10_000}, {"x": 100_000}]
    assert marginal_verdict(sizes, kb, [0.2, 0.29, 1.19]) is True  # 10 us a KB throughout
    assert kb[1]["marginal"] == pytest.approx(10.0)
    open_rows = [{"x": 0}, {"x": 100}, {"x": 1000}]
    assert flat_verdict(open_rows, [0.3, 0.31, 0.33]) is True
    assert open_rows[2]["marginal"] == pytest.approx(1.1)
    assert flat_verdict([dict(r) for r in open_rows], [0.3, 0.3, 0.6]) is False


def test_the_order_of_targets_rotates_between_repetitions():
    targets = [Target(name, "gateway", "127.0.0.1", 1) for name in ("a", "b", "c")]
    orders = [[t.name for t in rotated(targets, rep)] for rep in range(4)]
    assert orders == [["a", "b", "c"], ["b", "c", "a"], ["c", "a", "b"], ["a", "b", "c"]]
