"""`gateway conformance` against this gateway, all of it real processes: the scripted upstream
(`python -m gateway.conformance.upstream --port 0`), `gateway serve` with the configuration
`gateway conformance --print-config gateway` prints for that upstream, and `gateway conformance`
itself with `--json`. Every case must be faithful; a case this gateway gets wrong is an
xfail(strict=True) naming the defect, so fixing it turns the test red until the mark goes.
The run takes a few seconds (the stall is the default 2 s, past the printed 1 s idle timeout).
"""

from __future__ import annotations

import asyncio
import re
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from gateway.conformance.cases import FORMATS
from gateway.conformance.run import Selection, plan
from tests.test_shutdown import GATEWAY, GatewayProcess, clean_env

LISTENING = re.compile(r"listening on http://127\.0\.0\.1:(\d+)")
# Same-format exchanges whose unknown stop value this gateway rewrites to the plain stop
# (docs/stop-reasons.md, "As the client sees them": UNKNOWN -> stop / end_turn), where DESIGN.md
# §4 says an unknown enum value passes through; the native value is kept only in
# `native_finish_reason` / `gateway.native_stop_reason`.
# Cases this gateway is known to get wrong, by id, with the defect (none at present).
XFAIL: dict[str, str] = {}


class Upstream:
    def __init__(self) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "gateway.conformance.upstream", "--port", "0"],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        found = LISTENING.search(line)
        assert found, line
        self.port = int(found[1])
        threading.Thread(target=self.proc.stdout.read, daemon=True).start()

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(10)


def run_cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [GATEWAY, "conformance", *args],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=cwd,
        env=clean_env(),
    )


@pytest.fixture(scope="module")
def conformance(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """The JSON document of one whole run against `gateway serve`, and how it went."""
    tmp = tmp_path_factory.mktemp("conformance")
    upstream = Upstream()
    gateway: GatewayProcess | None = None
    try:
        printed = run_cli(
            "--print-config", "gateway", "--upstream-port", str(upstream.port), cwd=tmp
        )
        assert printed.returncode == 0, printed.stderr
        config = tmp / "conformance.toml"
        config.write_text(printed.stdout)
        gateway = GatewayProcess(config, tmp, "--workers", "1", "--log-level", "warning")
        url = asyncio.run(gateway.ready())
        started = time.monotonic()
        out = tmp / "out.json"
        ran = run_cli(
            url, "--upstream-port", str(upstream.port), "--json", str(out), "--no-progress", cwd=tmp
        )
        seconds = time.monotonic() - started
        assert ran.returncode == 0, ran.stdout + ran.stderr
        doc = orjson.loads(out.read_bytes())
        yield {"doc": doc, "seconds": seconds, "stdout": ran.stdout}
    finally:
        if gateway is not None:
            gateway.kill()
        upstream.stop()


def ids() -> list[Any]:
    runs, _ = plan(Selection())
    found = []
    for exchange in runs:
        mode = "stream" if exchange.stream else "whole"
        rid = f"{exchange.case.id}/{exchange.wire}/{exchange.client}/{mode}"
        marks = [pytest.mark.xfail(strict=True, reason=XFAIL[rid])] if rid in XFAIL else []
        found.append(pytest.param(rid, marks=marks, id=rid))
    return found


@pytest.mark.parametrize("rid", ids())
def test_every_case_is_faithful(conformance: dict[str, Any], rid: str) -> None:
    results = {result["id"]: result for result in conformance["doc"]["results"]}
    result = results[rid]
    assert result["verdict"] == "faithful", (result["lost"], result["saw"])
    assert result["saw"]["reached"] == [result["upstream_wire"]]


def test_the_run_covers_every_format_and_is_quick(conformance: dict[str, Any]) -> None:
    doc = conformance["doc"]
    ran = [r for r in doc["results"] if r["verdict"] != "skipped"]
    assert {r["client_format"] for r in ran} == set(FORMATS)
    assert len(ran) == len(plan(Selection())[0])
    skipped = [r for r in doc["results"] if r["verdict"] == "skipped"]
    assert all(r["reason"] for r in skipped)
    assert doc["summary"]["hidden"] == 0 and doc["summary"]["error"] == 0
    assert conformance["seconds"] < 60
    assert "faithful" in conformance["stdout"] and "gateway conformance" in conformance["stdout"]
