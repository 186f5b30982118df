"""`gateway bench` end to end: the command as a user runs it, with tiny durations, against its
built-in upstream, the gateway it starts, and a second gateway given with --compare (a real
`gateway serve` on the configuration `--print-config` prints). Structure and counts only: a
smoke run on a shared machine says nothing about speed, so nothing here compares timings."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from gateway_bench.gateway_config import BEDROCK_ENV
from tests.conftest import free_port

KEY = "sk-SECRET-compare-0042"
GATEWAY = [sys.executable, "-m", "gateway"]


@pytest.fixture
def other_gateway(tmp_path: Path) -> Iterator[tuple[int, int, subprocess.Popen[bytes]]]:
    """(the upstream port it expects, its port, its process)."""
    upstream_port, port = free_port(), free_port()
    config = subprocess.run(
        [*GATEWAY, "bench", "--print-config", "--upstream-port", str(upstream_port)],
        capture_output=True,
        check=True,
    ).stdout
    (tmp_path / "other.toml").write_bytes(config)
    log = open(tmp_path / "other.log", "wb")  # noqa: SIM115 - closed below
    process = subprocess.Popen(
        # One process: the one --compare finds behind the port is then this one.
        [
            *GATEWAY,
            "serve",
            "--config",
            str(tmp_path / "other.toml"),
            "--port",
            str(port),
            "--workers",
            "1",
        ],
        stdout=log,
        stderr=log,
        env={**os.environ, **BEDROCK_ENV},
        cwd=tmp_path,  # its default audit store lands here
    )
    try:
        deadline = time.monotonic() + 30
        while b"listening on" not in (tmp_path / "other.log").read_bytes():
            assert process.poll() is None and time.monotonic() < deadline, "it did not start"
            time.sleep(0.05)
        yield upstream_port, port, process
    finally:
        process.terminate()
        process.wait(10)
        log.close()


def test_a_quick_run_with_a_compared_gateway(other_gateway):
    upstream_port, port, process = other_gateway
    argv = [
        *GATEWAY,
        "bench",
        "--quick",
        "--json",
        "-",
        "--duration",
        "0.1",
        "--warmup",
        "2",
        "--concurrency",
        "2",
        "--idle-streams",
        "5,10",
        "--upstream-port",
        str(upstream_port),
        "--compare",
        f"http://127.0.0.1:{port}/v1",
        "--compare-name",
        "other",
        "--compare-key",
        KEY,
    ]
    done = subprocess.run(argv, capture_output=True, timeout=120)
    assert done.returncode == 0, done.stderr.decode()[-3000:]
    assert KEY.encode() not in done.stdout + done.stderr
    document = json.loads(done.stdout)  # stdout holds the JSON document and nothing else

    names = [t["name"] for t in document["targets"]]
    assert names == ["direct", "gateway", "other"]
    assert document["targets"][2]["pids"] == [process.pid]  # found by its port
    assert document["bench"]["arguments"]["compare_key"] == "(given)"

    cells = {c["cell"]: c for c in document["cells"]}
    assert set(cells) == {
        f"{mode}/{fmt}/c2" for mode in ("nonstream", "burst", "paced") for fmt in ("same", "cross")
    }
    for cell in cells.values():
        for name in names:
            figures = cell["targets"][name]
            assert figures["ok"] > 0, (cell["cell"], name)
            assert figures["error_count"] == 0, (cell["cell"], name, figures["errors"])
            assert figures["cpu_ms_per_req"] is not None and figures["rss_max_mb"] > 0
            assert "gateway_log" not in figures  # the gateway logged no warning or error
        assert set(cell["vs_direct"]) == {"gateway", "other"}
        assert set(cell["vs_gateway"]) == {"other"}
        if cell["mode"] != "nonstream":
            assert set(cell["cpu_us_per_chunk"]) == set(names)

    runs = document["runs"]
    assert len(runs) == len(cells) * len(names)
    for run in runs:
        assert run["ok"] == run["requests"] > 0
        if run["role"] != "direct":
            assert run["servers"]["upstream"]["cpu_s"] >= 0  # the upstream is watched too
    models = {run["model"] for run in runs if run["target"] == "other"}
    assert "bench-c20-p1" in models and "xbench-c20" in models

    assert set(document["idle"]) == {"gateway", "other"}
    for probe in document["idle"].values():
        assert [level["open"] for level in probe["levels"]] == [5, 10]
    goals = {row["goal"]: row for row in document["goals"]}
    assert len(goals) == 7
    assert set(goals["CPU per non-streamed request"]["values"]) == {"gateway", "other"}
