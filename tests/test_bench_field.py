"""`gateway bench --suite field`: the figures it derives (per-trial ratios to the direct call,
the peak of the sweep, memory and cold start), the targets it judges, and the whole suite run
as a user runs it, tiny, against its built-in upstream and the gateways it starts (audit trail
on and off). Structure and counts only: nothing here compares timings between targets."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from gateway_bench import field_goals
from gateway_bench.children import ChildFailed, free_port
from gateway_bench.coldstart import cold_start
from gateway_bench.field_plan import WORKLOADS, FieldPlan
from gateway_bench.field_run import split
from gateway_bench.field_session import first_request, local
from gateway_bench.field_summary import summarize
from gateway_bench.slices import merged

PLAN = FieldPlan(sweep=(1, 16), trials=2, names=("chat",))


def record(phase: str, target: str, rep: int, concurrency: int, **figures: Any) -> dict[str, Any]:
    p50, p99 = figures.get("p50", 1.0), figures.get("p99", 2.0)
    return {
        "phase": phase,
        "workload": "chat",
        "target": target,
        "rep": rep,
        "concurrency": concurrency,
        "ok": 100,
        "rps": figures.get("rps", 100.0),
        "latency_ms": {"p50": p50, "p99": p99},
        "ttft_ms": {"p50": None, "p99": None},
        "errors": figures.get("errors", {}),
        "cpu_ms_per_req": figures.get("cpu"),
        "servers": {"server": {"rss_max_mb": figures.get("rss", 10.0), "process_rss_max_mb": 5.0}},
    }


def sample_records() -> list[dict[str, Any]]:
    return [
        record("latency", "direct", 0, 10, p50=1.0, p99=2.0),
        record("latency", "direct", 1, 10, p50=2.0, p99=4.0),
        record("latency", "gateway", 0, 10, p50=10.0, p99=20.0),
        record("latency", "gateway", 1, 10, p50=30.0, p99=40.0, errors={"timeout": 1}),
        record("sweep", "direct", 0, 1, rps=1000.0),
        record("sweep", "direct", 1, 1, rps=1000.0),
        record("sweep", "direct", 0, 16, rps=3000.0),
        record("sweep", "direct", 1, 16, rps=5000.0),
        record("sweep", "gateway", 0, 1, rps=100.0, cpu=0.4),
        record("sweep", "gateway", 1, 1, rps=200.0, cpu=0.4),
        record("sweep", "gateway", 0, 16, rps=300.0, cpu=0.2, rss=150.0),
        record("sweep", "gateway", 1, 16, rps=250.0, cpu=0.3),
    ]


def test_ratios_are_taken_within_a_trial_then_medianed():
    summary = summarize(PLAN, sample_records(), {}, ["direct", "gateway"])
    gateway = summary["workloads"][1]
    assert gateway["target"] == "gateway"
    assert gateway["p50_ms"] == 20.0  # the median of the trials' p50s
    assert gateway["p50_x_direct"] == 12.5  # median of 10/1 and 30/2, not 20/1.5
    assert gateway["p99_x_direct"] == 10.0  # median of 20/2 and 40/4
    assert gateway["errors"] == {"timeout": 1}


def test_the_peak_is_the_best_concurrency_median_and_its_ratio_per_trial():
    summary = summarize(PLAN, sample_records(), {}, ["direct", "gateway"])
    gateway = summary["workloads"][1]
    assert gateway["rps_by_concurrency"] == {"1": 150.0, "16": 275.0}
    assert (gateway["peak_rps"], gateway["peak_at"]) == (275.0, 16)
    assert gateway["peak_x_direct"] == pytest.approx(0.075)  # median of 300/3000, 250/5000
    assert gateway["cpu_ms_per_req_at_peak"] == 0.25


def test_memory_is_the_peak_over_every_run_and_cold_start_the_median():
    cold = {"direct": [0.3, 0.1, 0.2], "gateway": [0.5, 0.4, 0.6]}
    summary = summarize(PLAN, sample_records(), cold, ["direct", "gateway"])
    gateway = summary["footprint"][1]
    assert gateway["rss_mb"] == 150.0 and gateway["rss_x_direct"] == 15.0
    assert gateway["process_rss_mb"] == 5.0 and gateway["process_rss_x_direct"] == 1.0
    assert gateway["cold_start_s"] == 0.5 and gateway["cold_start_runs_s"] == [0.4, 0.5, 0.6]
    assert gateway["cold_start_x_direct"] == pytest.approx(2.5)


def summary_with(**chat: float) -> dict[str, Any]:
    def row(workload: str, peak: float, p50: float, **extra: float) -> dict[str, Any]:
        return {"workload": workload, "target": "gateway", "peak_rps": peak, "p50_ms": p50, **extra}

    return {
        "workloads": [
            row("chat", 5000, 1.0, peak_x_direct=0.05, p99_ms=7.0, p99_x_direct=40.0, **chat),
            row("chat-stream", 3000, 2.0),
            row("responses", 4000, 1.05),  # 0.80x the peak: too slow
            row("responses-stream", 2900, 2.1),
            row("messages", 4800, 1.05),
            row("messages-stream", 3000, 2.5),  # 1.25x the p50: too slow
        ],
        "footprint": [
            {
                "target": "gateway",
                "process_rss_mb": 60.0,
                "process_rss_x_direct": 2.3,
                "cold_start_s": 0.6,
                "cold_start_x_direct": 3.0,
            }
        ],
    }


def test_targets_are_judged_absolute_and_as_a_ratio_to_the_direct_call():
    verdicts = {v.name: v for v in field_goals.check(summary_with(), "gateway")}
    peak = verdicts["Chat non-stream, peak throughput"]
    assert peak.met is True  # 5,000 > 4,928
    assert peak.ratio_met is (4928 / field_goals.REFERENCE["chat_peak_rps"] <= 0.05)
    p99 = verdicts["Chat non-stream, p99 at c10"]
    assert p99.met is False and p99.ratio_met is True  # 7.0 ms; 40x is under 44.5x
    assert verdicts["Responses non-stream vs Chat non-stream"].met is False
    assert verdicts["Responses stream vs Chat stream"].met is True
    assert verdicts["Messages non-stream vs Chat non-stream"].met is True
    assert verdicts["Messages stream vs Chat stream"].met is False
    assert verdicts["RSS per worker (largest process, peak)"].met is True
    cold = verdicts["Cold start, process start to first answer"]
    assert cold.met is False and cold.ratio_met is True  # 0.6 s; 3.0x is under 6.1x


def test_a_figure_not_measured_is_not_judged():
    summary = summary_with(peak_rps=None)  # type: ignore[arg-type]
    verdicts = {v.name: v for v in field_goals.check(summary, "gateway")}
    peak = verdicts["Chat non-stream, peak throughput"]
    assert peak.met is None and peak.measured == "-"


def window(cpu: float, rss: float, start: float, end: float) -> dict[str, Any]:
    return {
        "cpu_s": cpu,
        "rss_start_mb": start,
        "rss_max_mb": rss,
        "rss_end_mb": end,
        "process_rss_max_mb": rss / 2,
        "pss_end_mb": end,
        "processes": 3,
    }


def piece(latencies: list[float], started: float, **extra: Any) -> dict[str, Any]:
    return {
        "phase": "latency",
        "workload": "chat",
        "target": "gateway",
        "rep": 1,
        "concurrency": 10,
        "requests": len(latencies) + 1,
        "ok": len(latencies),
        "errors": {"timeout": 1},
        "warmup_errors": {},
        "started_s": started,
        "elapsed_s": 0.5,
        "rps": len(latencies) / 0.5,
        "loadgen_cpu_s": 0.25,
        "raw_ms": {"latency": latencies, "ttfb": [v / 2 for v in latencies], "ttft": []},
        **extra,
    }


def test_slices_merge_into_the_run_they_cut():
    first = piece([1.0, 3.0], 10.0, servers={"server": window(0.002, 50.0, 40.0, 45.0)})
    second = piece(
        [2.0, 4.0, 5.0],
        20.0,
        servers={"server": window(0.003, 60.0, 45.0, 48.0)},
        gateway_log={"levels": {"warning": 2}, "samples": ["a", "b"]},
    )
    run = merged([first, second])
    assert (run["phase"], run["target"], run["rep"]) == ("latency", "gateway", 1)
    assert (run["requests"], run["ok"], run["errors"]) == (7, 5, {"timeout": 2})
    assert run["latency_ms"]["p50"] == 3.0  # the median of all five, not of the slices'
    assert run["latency_ms"]["max"] == 5.0 and run["ttfb_ms"]["p50"] == 1.5
    assert run["ttft_ms"]["p50"] is None and len(run["latency_quantiles_ms"]) == 101
    assert run["rps"] == 5.0 and run["loadgen_cpu_s"] == 0.5  # 5 answers in 1 s measured
    server = run["servers"]["server"]
    assert server["cpu_s"] == pytest.approx(0.005) and run["cpu_ms_per_req"] == pytest.approx(1.0)
    assert (server["rss_start_mb"], server["rss_max_mb"], server["rss_end_mb"]) == (40, 60, 48)
    assert server["process_rss_max_mb"] == 30.0
    assert run["gateway_log"] == {"levels": {"warning": 2}, "samples": ["a", "b"]}
    assert (run["slices"], run["slice_starts_s"]) == (2, [10.0, 20.0]) and "raw_ms" not in run


def test_a_run_splits_into_rounds_of_nearly_equal_size():
    assert split(8000, 4) == [2000] * 4
    assert split(30, 4) == [8, 8, 7, 7]
    assert split(2, 4) == [1, 1]  # no empty slice


def test_a_cold_start_is_timed_to_the_first_answer_and_the_process_stopped(tmp_path: Path):
    port = free_port()
    argv = [sys.executable, "-m", "gateway_bench.upstream", "--port", str(port)]
    chat = WORKLOADS["chat"].format
    request = first_request(local(port), "openai", chat.prefix)
    seconds = cold_start(argv, {}, request, tmp_path / "log")
    assert 0 < seconds < 60
    with pytest.raises(OSError):  # stopped: nothing listens any more
        __import__("socket").create_connection(("127.0.0.1", port), timeout=1).close()


def test_a_server_that_exits_before_answering_fails_in_one_line(tmp_path: Path):
    argv = [sys.executable, "-c", "raise SystemExit(3)"]
    request = first_request(local(free_port()), "openai", "bench")
    with pytest.raises(ChildFailed, match=r"exited \(3\) before its first answer"):
        cold_start(argv, {}, request, tmp_path / "log")


def run_field(tmp_path: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-m", "gateway", "bench", "--suite", "field", "--quick"]
    argv += ["--requests", "30", "--sweep", "1,4", "--duration", "0.2", "--cold-starts", "1"]
    argv += ["--no-progress", *extra]
    return subprocess.run(argv, capture_output=True, text=True, timeout=600, cwd=tmp_path)


def test_the_suite_end_to_end(tmp_path: Path):
    out, md, png = tmp_path / "field.json", tmp_path / "field.md", tmp_path / "field.png"
    done = run_field(tmp_path, "--json", str(out), "--markdown", str(md), "--plot", str(png))
    assert done.returncode == 0, done.stderr[-3000:]
    document = json.loads(out.read_text())
    names = ["direct", "gateway", "gateway-no-audit"]
    assert [t["name"] for t in document["targets"]] == names
    rows = document["workloads"]
    assert [(r["workload"], r["target"]) for r in rows] == [
        (w, n) for w in WORKLOADS for n in names
    ]
    for row in rows:
        assert row["errors"] == {}, row
        assert row["p50_ms"] > 0 and row["p99_ms"] >= row["p50_ms"] and row["peak_rps"] > 0
        assert set(row["rps_by_concurrency"]) == {"1", "4"}
        if row["stream"]:
            assert 0 < row["ttft_p50_ms"] <= row["p99_ms"]
        else:
            assert row["ttft_p50_ms"] is not None  # the whole answer's word, not judged
        if row["target"] != "direct":
            assert row["p50_x_direct"] > 0 and row["peak_x_direct"] > 0
    # Every (phase, workload, target, trial, concurrency) ran once; the trials' orders differ.
    runs = document["runs"]
    keys = [(r["phase"], r["workload"], r["target"], r["rep"], r["concurrency"]) for r in runs]
    assert len(keys) == len(set(keys)) == len(WORKLOADS) * 3 * (1 + 2) * 2
    first, second = ([k[1:3] for k in keys if k[3] == trial] for trial in (0, 1))
    assert first != second and sorted(first) == sorted(second)
    # Each run is two slices, and every run's first slice ran before any run's second one.
    phases: dict[tuple[Any, ...], list[list[float]]] = {}
    for run in runs:
        assert run["slices"] == 2 and len(run["slice_starts_s"]) == 2 and "raw_ms" not in run
        if run["phase"] == "latency":
            assert run["requests"] == 30  # the two slices of 15 add up to the run
        key = (run["rep"], run["phase"], run["concurrency"])
        phases.setdefault(key, []).append(run["slice_starts_s"])
    for starts in phases.values():
        assert len(starts) == len(WORKLOADS) * 3
        assert max(s[0] for s in starts) < min(s[1] for s in starts)
    for row in document["footprint"]:
        assert len(row["cold_start_runs_s"]) == 1 and row["cold_start_s"] > 0
        assert row["process_rss_mb"] > 0 and row["process_rss_mb"] <= row["rss_mb"]
    assert len(document["goals"]) == 8 and document["judged"] == "gateway"
    assert document["published"]["rows"][0]["gateway"] == "GoModel"
    text = md.read_text()
    assert "| Chat non-stream | gateway-no-audit |" in text and "GoModel" in text
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "Targets, for gateway" in done.stdout


@pytest.mark.parametrize(
    ("argv", "named"),
    [
        (["--suite", "field", "--modes", "burst"], "--modes"),
        (["--requests", "10"], "--requests"),
        (["--suite", "field", "--audit", "sideways"], "--audit"),
    ],
)
def test_an_option_of_the_other_suite_is_one_line_and_exit_2(tmp_path: Path, argv, named):
    done = subprocess.run(
        [sys.executable, "-m", "gateway", "bench", *argv],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
    )
    assert done.returncode == 2 and named in done.stderr
    assert len(done.stderr.strip().splitlines()) <= 2
