"""The bench's report: rich tables for a terminal, and the JSON document with everything.

The main table has one group of rows per cell (mode, format, concurrency) and one row per
target in it. Its caption says how each derived column is computed, since "CPU per chunk" or
"+p50" mean nothing without it. Then the idle-stream probe, the growth tables (`--growth`),
and the targets as a checklist with the measured figure. Names that come from the command line
(`--compare-name`) are shown as plain text, never read as markup.

    console.print(*tables(document))
    write_json(document, "-")
"""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Final

import orjson
from rich import box
from rich.console import RenderableType
from rich.table import Table
from rich.text import Text

from gateway_bench.plan import FORMATS, MODES

MISSING: Final = "-"

CAPTION: Final = (
    "Medians of {reps} repetition(s) of {duration:g} s each; in each repetition the targets ran "
    "back to back. CPU: utime+stime of the target's process tree from /proc over the measured "
    "window / requests (for direct: the fake upstream's own). CPU per chunk = (CPU per streamed "
    "request - CPU per non-streamed request, same format and concurrency) / {chunks} chunks, "
    "per repetition. CPU %: the tree's CPU over the window's wall time (100: one core busy). "
    "+p50/+p99/TTFB: target minus direct, per repetition. x gw: this target's "
    "figure over the gateway's, per repetition. RSS: peak of the process tree, sampled every "
    "100 ms (summed over the tree's processes; the JSON has each run's PSS too). Paced: one "
    "chunk per write, {pace:g} ms apart; burst: the whole stream in one write."
)


def ms(value: float | None) -> str:
    if value is None:
        return MISSING
    if abs(value) >= 100:
        return f"{value:.0f}"
    if abs(value) >= 10:
        return f"{value:.1f}"
    return f"{value:.3f}" if abs(value) < 1 else f"{value:.2f}"


def signed(value: float | None) -> str:
    return MISSING if value is None else ("+" if value >= 0 else "") + ms(value)


def count(value: float | None) -> str:
    return MISSING if value is None else f"{value:,.0f}"


def times(value: float | None) -> str:
    if value is None:
        return MISSING
    return f"{value:.0f}x" if value >= 10 else f"{value:.2f}x"


def micro(value: float | None) -> str:
    return MISSING if value is None else f"{value:.1f}"


def cell_label(cell: Mapping[str, Any]) -> str:
    return f"{MODES[cell['mode']].label} · {cell['format']} · c{cell['concurrency']}"


def format_legend(cells: Sequence[Mapping[str, Any]]) -> str:
    shown = dict.fromkeys(cell["format"] for cell in cells)
    return "; ".join(f"{name}: {FORMATS[name].label}" for name in shown)


def matrix_table(document: Mapping[str, Any]) -> Table:
    plan = document["plan"]
    caption = CAPTION.format(
        reps=plan["reps"], duration=plan["duration"], chunks=plan["chunks"], pace=plan["pace_ms"]
    )
    caption += " Formats (client -> upstream wire): " + format_legend(document["cells"]) + "."
    machine = document.get("bench", {}).get("machine")
    if machine:
        load = ", ".join(f"{v:.1f}" for v in machine["load_average"])
        caption += f" Machine: {machine['cpus']} CPUs, load average {load} at the start."
    table = Table(
        title="gateway bench",
        caption=caption,
        caption_justify="left",
        box=box.SIMPLE_HEAD,
        show_lines=False,
    )
    for header in (
        "cell",
        "target",
        "req/s",
        "p50 ms",
        "p99 ms",
        "+p50 ms",
        "+p99 ms",
        "TTFB p50",
        "+TTFB",
        "CPU ms/req",
        "CPU us/chunk",
        "CPU %",
        "RSS MB",
        "x gw req/s",
        "x gw CPU",
        "errors",
    ):
        table.add_column(
            header,
            justify="left" if header in ("cell", "target") else "right",
            no_wrap=header == "cell",
        )
    for cell in document["cells"]:
        first = True
        for name, figures in cell["targets"].items():
            vs = cell["vs_direct"].get(name, {})
            gw = cell["vs_gateway"].get(name, {})
            errors = figures["error_count"]
            table.add_row(
                cell_label(cell) if first else "",
                Text(name),
                count(figures["rps"]),
                ms(figures["p50_ms"]),
                ms(figures["p99_ms"]),
                signed(vs.get("added_p50_ms")),
                signed(vs.get("added_p99_ms")),
                ms(figures["ttfb_p50_ms"]),
                signed(vs.get("added_ttfb_p50_ms")),
                ms(figures["cpu_ms_per_req"]),
                micro(cell["cpu_us_per_chunk"].get(name)),
                count(figures.get("cpu_percent")),
                ms(figures["rss_max_mb"]),
                times(gw.get("rps_ratio")),
                times(gw.get("cpu_ratio")),
                Text(str(errors), style="bold red" if errors else ""),
            )
            first = False
        table.add_section()
    return table


def error_lines(document: Mapping[str, Any]) -> list[Text]:
    lines = []
    for cell in document["cells"]:
        for name, figures in cell["targets"].items():
            if figures["errors"]:
                kinds = ", ".join(f"{k}: {v}" for k, v in sorted(figures["errors"].items()))
                lines.append(Text(f"errors in {cell['cell']} through {name}: {kinds}", "red"))
            if figures.get("gateway_log"):
                levels = ", ".join(f"{k}: {v}" for k, v in figures["gateway_log"].items())
                lines.append(Text(f"{name} logged in {cell['cell']}: {levels}", "yellow"))
    return lines


def idle_table(idle: Mapping[str, Any]) -> Table:
    table = Table(
        title="Idle open streams (held after their first byte)",
        caption="KB/stream: RSS above the base, per open stream; step: what the streams "
        "added since the previous level, per stream. Flat: the last step is within 25% "
        "(+2 KB) of the one before.",
        caption_justify="left",
        box=box.SIMPLE_HEAD,
    )
    for header in ("target", "base RSS MB", "streams", "open", "RSS MB", "KB/stream", "step KB"):
        table.add_column(header, justify="left" if header == "target" else "right")
    table.add_column("flat")
    for name, probe in idle.items():
        steps = probe["kb_per_stream_steps"]
        for i, level in enumerate(probe["levels"]):
            last = i == len(probe["levels"]) - 1
            table.add_row(
                Text(name) if i == 0 else "",
                ms(probe["base_rss_mb"]) if i == 0 else "",
                count(level["streams"]),
                count(level["open"]),
                ms(level["rss_mb"]),
                micro(level["kb_per_stream"]),
                micro(steps[i]) if i < len(steps) else MISSING,
                verdict(probe["flat"]) if last else "",
            )
        table.add_section()
    return table


def verdict(passed: bool | None) -> Text:
    if passed is None:
        return Text("n/a", "dim")
    return Text("PASS", "bold green") if passed else Text("FAIL", "bold red")


def value_text(value: float | None, unit: str) -> str:
    if value is None:
        return MISSING
    return times(value) if unit == "x" else f"{ms(value)} {unit}"


def goals_table(rows: Sequence[Mapping[str, Any]], names: Sequence[str]) -> Table:
    table = Table(title="Targets", box=box.SIMPLE_HEAD, caption_justify="left")
    table.caption = (
        "Judged for the first gateway at the concurrency shown (costs at the run's highest, "
        "where they bound throughput); 'by concurrency' gives the figure at each."
    )
    table.add_column("target")
    table.add_column("limit", justify="right")
    table.add_column("at", justify="right")
    for name in names:
        table.add_column(Text(name), justify="right")
    table.add_column("result")
    table.add_column(f"by concurrency ({names[0]})" if names else "by concurrency")
    for row in rows:
        at = row["concurrency"]
        every = row["by_concurrency"].get(names[0], {}) if names else {}
        table.add_row(
            row["goal"],
            row["limit"],
            f"c{at}" if at else "",
            *(value_text(row["values"].get(name), row["unit"]) for name in names),
            verdict(row["pass"]),
            "  ".join(f"c{c}: {value_text(v, row['unit'])}" for c, v in every.items()),
        )
    return table


def growth_table(growth: Mapping[str, Any]) -> Table:
    table = Table(
        title="Cost growth (CPU per request as one dimension grows)",
        caption="marginal: what each further unit cost between this point and the previous "
        "one. Linear or better: the last marginal is within 30% of the largest before it; "
        "for open streams, CPU per request stays within 25% of none open.",
        caption_justify="left",
        box=box.SIMPLE_HEAD,
    )
    for header in ("dimension", "target", "at", "CPU ms/req", "req/s", "marginal", "verdict"):
        right = header not in ("dimension", "target", "verdict")
        table.add_column(header, justify="right" if right else "left")
    for axis, per_target in growth.items():
        for name, series in per_target.items():
            for i, point in enumerate(series["points"]):
                table.add_row(
                    axis if i == 0 else "",
                    Text(name) if i == 0 else "",
                    point["label"],
                    ms(point["cpu_ms_per_req"]),
                    count(point["rps"]),
                    point.get("marginal_text", MISSING),
                    verdict(series["linear"]) if i == len(series["points"]) - 1 else "",
                )
            table.add_section()
    return table


def tables(document: Mapping[str, Any]) -> list[RenderableType]:
    out: list[RenderableType] = []
    names = [t["name"] for t in document["targets"] if t["role"] != "direct"]
    if document.get("cells"):
        out.append(matrix_table(document))
        out += error_lines(document)
    if document.get("idle"):
        out.append(idle_table(document["idle"]))
    if document.get("growth"):
        out.append(growth_table(document["growth"]))
    if document.get("goals"):
        out.append(goals_table(document["goals"], names))
    return out


def write_json(document: Mapping[str, Any], destination: str) -> None:
    data = orjson.dumps(document, option=orjson.OPT_INDENT_2 | orjson.OPT_NON_STR_KEYS)
    if destination == "-":
        sys.stdout.buffer.write(data + b"\n")
        sys.stdout.flush()
    else:
        Path(destination).write_bytes(data + b"\n")
