"""Values from requests in `gateway audit` tables: shown as plain, escaped text.

A model name is whatever a client sent, a tool name whatever an upstream sent: rich markup
(`[/x]` would make the table raise), terminal escape sequences and other control characters must
reach the terminal as visible text. JSON and CSV stay the exact data.
"""

from __future__ import annotations

import asyncio
import csv
import io
import os
import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from gateway.audit.record import AuditRecord
from gateway.audit.render import (
    render_csv,
    render_json,
    render_table,
    render_truncated_csv,
    render_truncated_json,
    render_truncated_table,
)
from gateway.audit.report import summarize, truncated_list
from gateway.audit.sqlite_store import SQLiteStore

GATEWAY = str(Path(sys.executable).parent / "gateway")
T0 = 1_700_000_000.0

HOSTILE = {
    "markup_close": "[/x]",
    "markup_style": "[bold red]loud[/]",
    "emoji_code": "gpt:thumbs_up:",
    "csi": "\x1b[31mred\x1b[0m",
    "osc_title": "\x1b]0;pwned\x07",
    "carriage_return": "safe\rEVIL",
    "newline": "two\nlines",
    "backspace": "abc\x08\x08\x08xyz",
    "c1_csi": "c1\x9b31m",
    "delete": "del\x7f",
    "bidi_override": "abc\u202edcba",
    "line_separator": "a\u2028b",
}
# Nothing of these may reach the terminal raw.
RAW_CONTROLS = [chr(c) for c in (*range(0x20), *range(0x7F, 0xA0))] + ["\u202e", "\u2028"]


def record(i: int, model: str, **fields: object) -> AuditRecord:
    values: dict[str, object] = {
        "id": f"req-{i:03d}",
        "started_at": T0 + i,
        "client_format": "openai",
        "stream": True,
        "model": model,
        "provider": "mock",
        "route": model,
        "stop_reason": "length",
        "truncated": True,
        "cut_reason": "length",
        "withheld_tool_calls": [{"id": f"call_{i}", "name": model}],
    }
    values.update(fields)
    return AuditRecord(**values)  # type: ignore[arg-type]


RECORDS = [record(i, model) for i, model in enumerate(HOSTILE.values())]


def assert_shown_escaped(text: str) -> None:
    raw = [repr(c) for c in RAW_CONTROLS if c in text.replace("\n", "")]
    assert not raw, f"raw control characters in the table: {raw}"
    assert "[/x]" in text
    assert "[bold red]loud[/]" in text
    assert "gpt:thumbs_up:" in text
    assert "\\x1b[31mred\\x1b[0m" in text
    assert "safe\\rEVIL" in text
    assert "c1\\x9b31m" in text
    assert "abc\\u202edcba" in text


@pytest.mark.parametrize("by", ["model", "route"])
def test_summary_table_shows_group_names_escaped(by: str) -> None:
    text = render_table(summarize(RECORDS, by), by, console_width=160)
    assert_shown_escaped(text)


@pytest.mark.parametrize("name", HOSTILE)
def test_each_hostile_name_alone_renders(name: str) -> None:
    records = [record(0, HOSTILE[name], provider=HOSTILE[name])]
    render_table(summarize(records, "provider"), "provider")
    render_table(summarize(records, "model"), "model")
    render_truncated_table(truncated_list(records))


def test_truncated_table_shows_every_cell_escaped() -> None:
    records = [*RECORDS, record(99, "m", provider="[/x]", id="\x1b[2Jid", cut_reason="\x1b[5m")]
    text = render_truncated_table(truncated_list(records, limit=None), console_width=200)
    assert_shown_escaped(text)
    assert "\\x1b[5m" in text


def test_json_and_csv_keep_the_exact_values() -> None:
    summaries = summarize(RECORDS, "model")
    assert {s["group"] for s in orjson.loads(render_json(summaries))} == set(HOSTILE.values())
    rows = list(csv.reader(io.StringIO(render_csv(summaries), newline="")))
    assert {row[1] for row in rows[1:]} == set(HOSTILE.values())
    items = truncated_list(RECORDS, limit=None)
    assert {t["model"] for t in orjson.loads(render_truncated_json(items))} == set(HOSTILE.values())
    rows = list(csv.reader(io.StringIO(render_truncated_csv(items), newline="")))
    assert {row[3] for row in rows[1:]} == set(HOSTILE.values())


async def _seed(db: Path) -> None:
    store = SQLiteStore(db)
    try:
        await store.write(RECORDS)
    finally:
        await store.close()


@pytest.mark.parametrize("args", [["--by", "model"], ["--by", "route"], ["--truncated"]])
def test_gateway_audit_shows_a_real_store_escaped(tmp_path: Path, args: list[str]) -> None:
    db = tmp_path / "audit.db"
    asyncio.run(_seed(db))
    proc = subprocess.run(
        [GATEWAY, "audit", "--store", f"sqlite:///{db}", "--limit", "50", *args],
        capture_output=True,
        env={**os.environ, "COLUMNS": "160"},
        timeout=30,
    )
    assert proc.returncode == 0, proc.stderr.decode()
    assert b"Traceback" not in proc.stderr
    assert b"\x1b" not in proc.stdout and b"\r" not in proc.stdout and b"\x07" not in proc.stdout
    assert_shown_escaped(proc.stdout.decode())
