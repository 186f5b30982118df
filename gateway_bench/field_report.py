"""The field suite's report: latency, capacity, footprint, the published table beside this run,
and the targets, as rich tables; a Markdown rendering of the same for docs/.

Every figure with a direct counterpart is followed by its ratio to the direct call of the same
run (`x direct`), the figure that does not depend on the host's speed. Target names come from
the command line (`--compare-name`) and are shown as plain text, never read as markup.

    console.print(*field_tables(document))
    print(markdown(document))
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any, Final

from rich import box
from rich.console import RenderableType
from rich.table import Table
from rich.text import Text

from gateway_bench.report import MISSING, count, ms

DIRECT: Final = "direct"


def times(value: float | None) -> str:
    if value is None:
        return MISSING
    if value >= 100:
        return f"{value:,.0f}x"
    if value >= 10:
        return f"{value:.1f}x"
    return f"{value:.2f}x" if value >= 0.1 else f"{value:.4f}x"


def errors(row: Mapping[str, Any]) -> str:
    found = row.get("errors") or {}
    return ", ".join(f"{kind}: {n}" for kind, n in sorted(found.items())) or "0"


def seconds(value: float | None) -> str:
    return MISSING if value is None else f"{value:.3f}"


def mb(value: float | None) -> str:
    return MISSING if value is None else f"{value:.1f}"


def verdict(met: bool | None) -> str:
    return "n/a" if met is None else ("PASS" if met else "FAIL")


# --- the rows each table shows, as plain strings (the terminal and Markdown share them) -------


def latency_rows(document: Mapping[str, Any]) -> tuple[list[str], list[list[str]]]:
    head = [
        "workload",
        "target",
        "p50 ms",
        "x direct",
        "p99 ms",
        "x direct",
        "TTFT p50",
        "TTFT p99",
        "x direct",
        "errors",
    ]
    rows = []
    for row in document["workloads"]:
        streamed = row["stream"]
        rows.append(
            [
                row["label"],
                row["target"],
                ms(row["p50_ms"]),
                ratio_cell(row, "p50_x_direct"),
                ms(row["p99_ms"]),
                ratio_cell(row, "p99_x_direct"),
                ms(row["ttft_p50_ms"]) if streamed else MISSING,
                ms(row["ttft_p99_ms"]) if streamed else MISSING,
                ratio_cell(row, "ttft_p50_x_direct") if streamed else MISSING,
                errors(row),
            ]
        )
    return head, rows


def ratio_cell(row: Mapping[str, Any], key: str) -> str:
    return MISSING if row["target"] == DIRECT else times(row.get(key))


def capacity_rows(document: Mapping[str, Any]) -> tuple[list[str], list[list[str]]]:
    sweep = document["plan"]["sweep"]
    head = ["workload", "target", *(f"c{c} req/s" for c in sweep), "peak", "x direct", "CPU ms/req"]
    rows = []
    for row in document["workloads"]:
        by = row["rps_by_concurrency"]
        peak = count(row["peak_rps"])
        if row["peak_at"] is not None:
            peak += f" (c{row['peak_at']})"
        rows.append(
            [
                row["label"],
                row["target"],
                *(count(by.get(str(c))) for c in sweep),
                peak,
                ratio_cell(row, "peak_x_direct"),
                ms(row["cpu_ms_per_req_at_peak"]),
            ]
        )
    return head, rows


def footprint_rows(document: Mapping[str, Any]) -> tuple[list[str], list[list[str]]]:
    head = [
        "target",
        "peak RSS MB (tree)",
        "largest process MB",
        "x direct",
        "cold start s (median)",
        "starts (min-max)",
        "x direct",
    ]
    rows = []
    for row in document["footprint"]:
        runs = row["cold_start_runs_s"]
        spread = f"{len(runs)}: {runs[0]:.3f}-{runs[-1]:.3f}" if runs else MISSING
        rows.append(
            [
                row["target"],
                mb(row["rss_mb"]),
                mb(row["process_rss_mb"]),
                ratio_cell(row, "process_rss_x_direct"),
                seconds(row["cold_start_s"]),
                spread,
                ratio_cell(row, "cold_start_x_direct"),
            ]
        )
    return head, rows


def field_rows(document: Mapping[str, Any]) -> tuple[list[str], list[list[str]]]:
    """The published table (Chat non-stream, c10), with this run's gateways below it."""
    head = ["gateway", "where", "p50 ms", "p99 ms", "peak req/s", "peak RSS MB", "cold start s"]
    rows = [
        [
            p["gateway"],
            "published",
            ms(p["p50_ms"]),
            ms(p["p99_ms"]),
            count(p["peak_rps"]),
            mb(p["peak_rss_mb"]),
            seconds(p["cold_start_s"]),
        ]
        for p in document["published"]["rows"]
    ]
    footprint = {row["target"]: row for row in document["footprint"]}
    for row in document["workloads"]:
        if row["workload"] != "chat":
            continue
        foot = footprint.get(row["target"], {})
        rows.append(
            [
                row["target"],
                "this run",
                ms(row["p50_ms"]),
                ms(row["p99_ms"]),
                count(row["peak_rps"]),
                mb(foot.get("rss_mb")),
                seconds(foot.get("cold_start_s")),
            ]
        )
    return head, rows


def goal_rows(document: Mapping[str, Any]) -> tuple[list[str], list[list[str]]]:
    head = ["target", "limit", "measured", "", "ratio limit", "x direct", ""]
    rows = [
        [
            goal["name"],
            goal["limit"],
            goal["measured"],
            verdict(goal["met"]),
            goal["ratio_limit"],
            goal["ratio"],
            verdict(goal["ratio_met"]),
        ]
        for goal in document["goals"]
    ]
    return head, rows


SECTIONS: Final = (
    ("latency", "Latency at concurrency {concurrency}, {requests:,} requests a run", latency_rows),
    ("capacity", "Capacity sweep, {sweep_duration:g} s a run", capacity_rows),
    ("footprint", "Memory and cold start", footprint_rows),
    ("field", "The field's published table (Chat non-stream, c10) and this run", field_rows),
    ("goals", "Targets, for {judged} (audit trail on)", goal_rows),
)


def caption(document: Mapping[str, Any]) -> str:
    plan = document["plan"]
    workers = document.get("workers")
    return (
        f"Medians of {plan['trials']} trials in randomized order (seed {plan['seed']}), each run "
        f"in {plan.get('rounds', 1)} slices interleaved with the other runs'. x direct: "
        "the target's figure over the direct call to the fake upstream in the same trial, then "
        "the median; for memory and cold start, over the fake upstream's own process. TTFT: "
        "time to the first content word of a stream. Peak: the highest of the sweep's per-"
        "concurrency medians. Largest process: a worker, under a supervisor. Cold start: process "
        "start to the first answer, the median of the starts after one not counted (it compiles "
        "the bytecode and reads the files into the page cache). Gateway workers: "
        f"{workers if workers is not None else 'one per core'}. "
        f"Published: {document['published']['source']}."
    )


def sections(document: Mapping[str, Any]) -> Iterator[tuple[str, list[str], list[list[str]]]]:
    values = {**document["plan"], "judged": document["judged"]}
    for _, title, build in SECTIONS:
        head, rows = build(document)
        yield title.format(**values), head, rows


def field_tables(document: Mapping[str, Any]) -> list[RenderableType]:
    out: list[RenderableType] = []
    for title, head, rows in sections(document):
        table = Table(title=title, box=box.SIMPLE_HEAD)
        for index, name in enumerate(head):
            table.add_column(name, justify="left" if index < 2 else "right")
        previous = None
        for row in rows:
            if previous is not None and row[0] != previous:
                table.add_section()
            previous = row[0]
            table.add_row(*(Text(cell) for cell in row))
        out.append(table)
    out.append(Text(caption(document)))
    return out


def markdown_table(head: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(cell.replace("|", "\\|") for cell in row) + " |" for row in rows]
    return "\n".join(lines)


def markdown(document: Mapping[str, Any]) -> str:
    parts = []
    for title, head, rows in sections(document):
        parts.append(f"**{title}**\n\n{markdown_table(head, rows)}")
    parts.append(caption(document))
    return "\n\n".join(parts) + "\n"
