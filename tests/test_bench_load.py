"""The load generator and /proc readings, on real processes on 127.0.0.1: what a run reports,
each kind of error it tells apart, held streams, and CPU and RSS of process trees."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

import pytest

from gateway_bench.children import Child, Children, LoadGenerator
from gateway_bench.procstat import ProcessTree, descendants, listening_pids
from gateway_bench.targets import Target, require_loopback_host, split_url
from gateway_bench.wires import WIRES


@pytest.fixture(scope="module")
def processes() -> Iterator[tuple[Child, LoadGenerator]]:
    with Children() as children:
        yield children.upstream(), children.load_generator()


def job(upstream: Child, wire: str, model: str, stream: bool, **extra: Any) -> dict[str, Any]:
    out = {
        "op": "run",
        "host": "127.0.0.1",
        "port": upstream.port,
        "path": WIRES[wire].request_path(model, stream),
        "wire": wire,
        "model": model,
        "stream": stream,
        "concurrency": 2,
        "duration": 0.2,
        "warmup": 4,
        "timeout": 5,
        "watch": {"server": [upstream.pid]},
    }
    return out | extra


@pytest.mark.parametrize("wire", list(WIRES))
@pytest.mark.parametrize("stream", [False, True])
def test_a_run_against_every_wire(processes, wire, stream):
    upstream, load = processes
    result = load.job(job(upstream, wire, "bench-c5", stream))
    assert result["errors"] == {} and result["warmup_errors"] == {}
    assert result["ok"] == result["requests"] > 0
    assert result["latency_ms"]["p50"] > 0 and result["ttfb_ms"]["p50"] > 0
    assert 0 < result["ttft_ms"]["p50"] <= result["latency_ms"]["p50"]
    assert len(result["latency_quantiles_ms"]) == 101
    server = result["servers"]["server"]
    assert server["processes"] == 1 and server["rss_max_mb"] > 0 and server["cpu_s"] >= 0
    assert 0 < server["pss_end_mb"] <= server["rss_end_mb"]
    assert server["process_rss_max_mb"] == server["rss_max_mb"]  # one process: the same


@pytest.mark.parametrize("wire", ["openai", "anthropic", "openai_responses"])
def test_time_to_first_token_is_the_first_content_word_not_the_first_byte(processes, wire):
    """A paced stream (20 chunks, 15 ms apart) opens with events that carry no text: the
    first token arrives at least one pace (a sleep, never shorter) after the first byte, the
    end 20 paces after it."""
    upstream, load = processes
    result = load.job(job(upstream, wire, "bench-c20-p15", True, concurrency=1, warmup=1))
    ttfb, ttft = result["ttfb_ms"]["p50"], result["ttft_ms"]["p50"]
    latency = result["latency_ms"]["p50"]
    assert ttfb + 10 <= ttft < latency / 4


def test_a_request_cap_ends_a_run(processes):
    upstream, load = processes
    result = load.job(job(upstream, "openai", "bench", False, max_requests=7, duration=30))
    assert result["requests"] == result["ok"] == 7


def test_a_run_lasts_until_each_connection_made_its_minimum(processes):
    upstream, load = processes
    result = load.job(job(upstream, "openai", "bench", False, duration=0.001, min_requests=40))
    assert result["ok"] == result["requests"] >= 40


def test_a_stream_without_its_terminator_is_an_error(processes):
    upstream, load = processes
    # Chat's stream ends with [DONE], never with Anthropic's message_stop
    wrong = job(upstream, "anthropic", "bench", True, path="/v1/chat/completions")
    result = load.job(wrong)
    assert result["ok"] == 0 and set(result["errors"]) == {"no terminator"}


def test_a_status_other_than_200_is_an_error(processes):
    upstream, load = processes
    result = load.job(job(upstream, "openai", "bench", False, path="/v1/nowhere"))
    assert result["ok"] == 0 and set(result["errors"]) == {"status 404"}


def test_a_request_that_never_ends_times_out(processes):
    upstream, load = processes
    result = load.job(job(upstream, "openai", "bench-hold", True, timeout=0.3, warmup=1))
    assert result["ok"] == 0 and set(result["errors"]) == {"timeout"}
    assert set(result["warmup_errors"]) == {"timeout"}


def test_a_refused_connection_is_an_error(processes):
    _, load = processes
    with Children() as children:  # a port nothing listens on any more
        gone = children.upstream()
    result = load.job(job(gone, "openai", "bench", False, watch={}))
    assert result["ok"] == 0 and set(result["errors"]) == {"connect failed"}


def test_held_streams_stay_open_until_released(processes):
    upstream, load = processes
    hold = job(upstream, "openai", "hbench-hold", True, op="hold", count=30)
    held = load.job(hold)
    assert held == {"asked": 30, "first_byte": 30, "open": 30, "ended_early": 0, "failures": {}}
    more = load.job({**hold, "count": 5})
    assert more["open"] == 35
    assert load.job({"op": "release"}) == {"released": 35}


def test_the_process_behind_a_port_and_its_tree(processes):
    upstream, _ = processes
    assert listening_pids(upstream.port) == [upstream.pid]
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        assert child.pid in descendants([os.getpid()])
        tree = ProcessTree([os.getpid()])
        assert child.pid in tree.pids and tree.rss_bytes() > 0
    finally:
        child.kill()
        child.wait()


def test_cpu_time_is_what_the_tree_was_charged():
    tree = ProcessTree([os.getpid()])
    before, started = tree.cpu_seconds(), time.process_time()
    while time.process_time() - started < 0.3:
        pass
    assert tree.cpu_seconds() - before >= 0.25


def test_only_loopback_targets():
    require_loopback_host("127.0.0.1")
    require_loopback_host("localhost")
    assert split_url("http://127.0.0.1:4000/v1") == ("127.0.0.1", 4000, "")
    assert split_url("http://[::1]:8080/") == ("::1", 8080, "")
    for url in ("http://10.0.0.1:4000", "http://8.8.8.8/v1", "https://127.0.0.1:1", "127.0.0.1"):
        with pytest.raises(ValueError):
            split_url(url)


def test_a_targets_key_is_sent_but_never_shown():
    target = Target.from_url("compare", "x", "http://127.0.0.1:4000", key="sk-SECRET-1")
    assert target.headers["authorization"] == "Bearer sk-SECRET-1"
    assert target.headers["x-api-key"] == "sk-SECRET-1"  # what an Anthropic-format gateway reads
    assert "sk-SECRET-1" not in repr(target) and "sk-SECRET-1" not in str(target.public())
