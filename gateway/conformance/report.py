"""The scorecard: a rich table per run, the findings, a summary line, and the JSON document.

The scorecard has a row per (case, upstream wire) and a column per (client format, whole or
stream), each cell the verdict. The findings list every exchange that is not faithful, with what
was lost and what the client saw. Text from the target (error bodies, stop values) is shown as
plain text, never read as markup.

    console.print(scorecard(results, formats)); console.print(findings(results))
    print(summary_line(results)); write_json(document(results, meta), "out.json")
"""

from __future__ import annotations

import sys
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Final

import orjson
from rich import box
from rich.table import Table
from rich.text import Text

from gateway.conformance.run import SKIPPED, Result

VERDICTS: Final = ("faithful", "lossy", "error", "hidden", SKIPPED)
STYLE: Final = {
    "faithful": ("ok", "green"),
    "lossy": ("lossy", "yellow"),
    "error": ("error", "magenta"),
    "hidden": ("HIDDEN", "bold red"),
    SKIPPED: ("-", "dim"),
}
COLUMN: Final = {"openai": "chat", "anthropic": "msgs", "responses": "resp"}


def cell(result: Result | None) -> Text:
    if result is None:
        return Text("")
    label, style = STYLE[result.verdict]
    return Text(label, style=style)


def scorecard(results: Sequence[Result], formats: Sequence[str]) -> Table:
    table = Table(
        title="gateway conformance: a row per case and upstream wire, a column per client format "
        "(chat: OpenAI Chat, msgs: Anthropic Messages, resp: OpenAI Responses)",
        caption="ok faithful, lossy (something named was lost), HIDDEN (a cut answer shown "
        "complete), error (an error where an answer was possible), - no such combination",
        box=box.SIMPLE_HEAD,
        title_justify="left",
        caption_justify="left",
    )
    table.add_column("case", no_wrap=True)
    table.add_column("wire", no_wrap=True)
    columns = [(client, stream) for client in formats for stream in (False, True)]
    for client, stream in columns:
        table.add_column(
            f"{COLUMN[client]}\n{'stream' if stream else 'whole'}",
            justify="center",
            min_width=6,
            no_wrap=True,
        )
    rows: dict[tuple[str, str], dict[tuple[str, bool], Result]] = {}
    for result in results:
        rows.setdefault((result.case, result.wire), {})[(result.client, result.stream)] = result
    for (case, wire), cells in rows.items():
        if all(result.verdict == SKIPPED for result in cells.values()):
            continue  # the wire has no such case: the JSON says why
        table.add_row(
            Text(case),
            Text(COLUMN[wire]),
            *(cell(cells.get(column)) for column in columns),
        )
    return table


def seen_text(saw: Mapping[str, Any]) -> str:
    parts = [f"HTTP {saw.get('http_status')}", "SSE" if saw.get("stream") else "JSON"]
    parts.append(f"stop={saw.get('stop')}")
    if saw.get("error_event"):
        parts.append(f"error event={saw['error_event']}")
    if saw.get("tool_calls"):
        parts.append(f"tool calls={len(saw['tool_calls'])}")
    if saw.get("end") != "eof":
        parts.append(f"end={saw.get('end')}")
    if "body" in saw:
        parts.append(f"body={str(saw['body'])[:80]}")
    return ", ".join(parts)


def findings(results: Sequence[Result]) -> Table | None:
    bad = [r for r in results if r.verdict not in ("faithful", SKIPPED)]
    if not bad:
        return None
    bad.sort(key=lambda r: VERDICTS.index(r.verdict), reverse=True)
    table = Table(title="not faithful", box=box.SIMPLE_HEAD, title_justify="left")
    for name in ("verdict", "case / wire / client / mode", "what was lost", "what the client saw"):
        table.add_column(name, overflow="fold")
    for result in bad:
        table.add_row(
            cell(result),
            Text(result.id),
            Text("; ".join(result.lost)),
            Text(seen_text(result.saw)),
        )
    return table


def counts(results: Sequence[Result]) -> dict[str, int]:
    counted = Counter(result.verdict for result in results)
    return {verdict: counted.get(verdict, 0) for verdict in VERDICTS}


def summary_line(results: Sequence[Result]) -> Text:
    line = Text()
    for number, (verdict, count) in enumerate(counts(results).items()):
        style = STYLE[verdict][1]
        line.append(" · " if number else "")
        line.append(f"{verdict} {count}", style=style if count else "dim")
    kept = sum(1 for r in results if r.saw.get("extension"))
    ran = sum(1 for r in results if r.verdict != SKIPPED)
    line.append(f"   (native value in an extension: {kept} of {ran})", style="dim")
    return line


def document(results: Sequence[Result], meta: Mapping[str, Any]) -> dict[str, Any]:
    return {
        **meta,
        "summary": counts(results),
        "results": [
            {
                "id": result.id,
                "case": result.case,
                "client_format": result.client,
                "upstream_wire": result.wire,
                "stream": result.stream,
                "verdict": result.verdict,
                "lost": result.lost,
                "notes": result.notes,
                "saw": result.saw,
                **({"reason": result.reason} if result.reason else {}),
            }
            for result in results
        ],
    }


def write_json(doc: Mapping[str, Any], where: str) -> None:
    data = orjson.dumps(doc, option=orjson.OPT_INDENT_2) + b"\n"
    if where == "-":
        sys.stdout.buffer.write(data)
        sys.stdout.flush()
    else:
        Path(where).write_bytes(data)
