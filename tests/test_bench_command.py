"""`gateway bench`'s command line: what it refuses before starting anything (one line, exit 2),
the configuration it prints for a gateway started by hand, the report's tables, and --plot."""

from __future__ import annotations

import io
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest
from rich.console import Console

from gateway.cli import main, parse_args
from gateway.settings import load_settings
from gateway_bench import plot, report
from gateway_bench.command import plan_of
from gateway_bench.plan import FORMATS
from gateway_bench.session import about, compare_target


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    try:
        status = main(["bench", *argv])
    except SystemExit as exc:  # argparse's own errors
        status = int(exc.code or 0)
    out, err = capsys.readouterr()
    return status, out, err


@pytest.mark.parametrize(
    ("argv", "named"),
    [
        (["--compare", "http://10.1.2.3:4000"], "--compare"),
        (["--gateway-url", "http://example.com:8080"], "--gateway-url"),
        (["--compare", "http://127.0.0.1:4000", "--compare-name", "gateway"], "--compare-name"),
        (["--compare-key-env", "BENCH_TEST_UNSET_VARIABLE"], "--compare-key-env"),
        (["--compare-header", "no colon"], "--compare-header"),
        (["--compare-header", "x-portkey-config: @/no/such/file"], "--compare-header"),
        (["--modes", "nonstream,sideways"], "--modes"),
        (["--concurrency", "1,zero"], "--concurrency"),
        (["--duration", "-1"], "--duration"),
    ],
)
def test_bad_arguments_are_one_line_and_exit_2(capsys, argv, named):
    status, out, err = run(capsys, *argv)
    assert status == 2 and out == ""
    assert named in err and len(err.strip().splitlines()) == 1


def test_plot_without_matplotlib_names_the_extra(capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib fails
    status, _, err = run(capsys, "--plot", "out.png")
    assert status == 2
    assert err.strip() == f"gateway bench: {plot.MISSING_EXTRA}"
    assert "llm-gateway[bench]" in err


def test_print_config_is_a_valid_gateway_configuration(capsys, tmp_path: Path):
    status, out, _ = run(capsys, "--print-config", "--upstream-port", "18123")
    assert status == 0
    (tmp_path / "bench.toml").write_text(out)
    settings = load_settings(tmp_path / "bench.toml", {})
    matches = {route.match for route in settings.routes}
    assert {f"{row.prefix}-*" for row in FORMATS.values()} <= matches
    assert "hbench-*" in matches
    assert all("127.0.0.1:18123" in p.base_url for p in settings.providers.values() if p.base_url)


def test_the_quick_preset_and_overrides():
    plan = plan_of(parse_args(["bench", "--quick", "--concurrency", "3,1", "--no-idle"]))
    assert plan.concurrency == (3, 1) and plan.reps == 1 and plan.idle_levels == ()
    default = plan_of(parse_args(["bench", "--formats", "same,bedrock", "--reps", "5"]))
    assert default.formats == ("same", "bedrock") and default.reps == 5
    assert default.concurrency == (1, 32, 64) and default.modes == ("nonstream", "burst", "paced")


def document() -> dict[str, Any]:
    figures = {
        "rps": 1000.0,
        "p50_ms": 0.5,
        "p99_ms": 2.0,
        "ttfb_p50_ms": 0.4,
        "cpu_ms_per_req": 0.3,
        "rss_max_mb": 80.0,
        "errors": {"status 502": 1},
        "error_count": 1,
        "ok": 10,
    }
    cell = {
        "cell": "burst/same/c1",
        "mode": "burst",
        "format": "same",
        "concurrency": 1,
        "targets": {"direct": figures, "gateway": figures, "[bold]x": figures},
        "vs_direct": {"gateway": {"added_p50_ms": 0.4, "rps_ratio": 0.5}},
        "vs_gateway": {"[bold]x": {"rps_ratio": 0.03, "cpu_ratio": 31.0}},
        "cpu_us_per_chunk": {"gateway": 12.5},
    }
    run = {"cell": "burst/same/c1", "target": "gateway", "latency_quantiles_ms": [0.1, 0.2, 0.4]}
    return {
        "plan": {"reps": 3, "duration": 2.0, "chunks": 20, "pace_ms": 1.0},
        "targets": [
            {"name": "direct", "role": "direct"},
            {"name": "gateway", "role": "gateway"},
            {"name": "[bold]x", "role": "compare"},
        ],
        "cells": [cell],
        "runs": [run],
        "idle": {},
        "goals": [],
    }


def test_the_tables_show_the_figures_and_names_as_text():
    console = Console(width=250, record=True)
    for renderable in report.tables(document()):
        console.print(renderable)
    text = console.export_text()
    row = next(line for line in text.splitlines() if "31x" in line)
    assert "[bold]x" in row  # a name from the command line is not read as markup
    assert "31x" in text and "0.03x" in text and "12.5" in text and "+0.400" in text
    assert "errors in burst/same/c1 through gateway: status 502: 1" in text


def test_plot_draws_a_png(tmp_path: Path):
    pytest.importorskip("matplotlib")
    path = tmp_path / "latency.png"
    plot.plot(document(), str(path))
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_compare_headers_travel_with_the_target_and_are_never_shown(tmp_path: Path):
    """`--compare-header` (Portkey's x-portkey-config from a file, JSON made one line) is in
    the compared target's headers beside its key; the report's arguments name it only."""
    config = tmp_path / "portkey.json"
    config.write_text('{\n  "targets": [{"api_key": "sk-inside-the-config"}]\n}\n')
    args = parse_args(
        [
            "bench",
            "--suite",
            "field",
            "--compare",
            "http://127.0.0.1:8787",
            "--compare-name",
            "portkey",
            "--compare-key",
            "sk-the-key",
            "--compare-header",
            f"x-portkey-config: @{config}",
            "--compare-header",
            "x-extra:  two  words ",
        ]
    )
    target = compare_target(args, Console(file=io.StringIO()), find_pid=False)
    assert target.headers == {
        "x-portkey-config": '{"targets":[{"api_key":"sk-inside-the-config"}]}',
        "x-extra": "two  words",
        "authorization": "Bearer sk-the-key",
        "x-api-key": "sk-the-key",
    }
    shown = orjson.dumps([target.public(), about(args, 0.0)]).decode()
    assert "sk-inside-the-config" not in shown and "sk-the-key" not in shown
    assert about(args, 0.0)["arguments"]["compare_header"] == [
        "x-portkey-config: (given)",
        "x-extra: (given)",
    ]
