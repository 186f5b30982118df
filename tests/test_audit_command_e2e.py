"""`gateway audit` as a subprocess over a store seeded through real exchanges.

The store is filled by a real gateway app (the exchanges of tests/test_audit_e2e.py, one after the
other so the newest-first order of `--truncated` is known), not by writing records by hand. Then
`gateway audit --store sqlite:///...` runs as a subprocess in every format and grouping. The JSON
and CSV shapes are compared with golden files (tests/golden/e2e_*) once the volatile fields are
normalized: request ids, times and latencies become placeholders; counts, stop reasons, withheld
tool names, token sums and the order of groups and rows stay as they are. Regenerate the golden
files after an intended change with `UPDATE_GOLDEN=1 pytest tests/test_audit_command_e2e.py`.
"""

from __future__ import annotations

import asyncio
import csv
import io
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import pytest

from gateway.app import build_app
from gateway.audit.sqlite_store import SQLiteStore
from tests.test_audit_e2e import (
    Servers,
    exchange_cases,
    gateway_settings,
    script_all,
    send,
)
from tests.upstream import FakeUpstream

GATEWAY = str(Path(sys.executable).parent / "gateway")
GOLDEN = Path(__file__).resolve().parent / "golden"
TIME_FIELDS = ("ttfb_p50_ms", "ttfb_p95_ms", "total_p50_ms", "total_p95_ms")
MS = "<ms>"

# Each is one `gateway audit` process (about half a second of imports each): kept to a few.
COMMANDS: dict[str, list[str]] = {
    "provider_json": ["--format", "json"],
    "provider_csv": ["--format", "csv"],
    "provider_table": [],  # table is the default format
    "model_csv": ["--by", "model", "--format", "csv"],
    "route_json": ["--by", "route", "--format", "json"],
    "client_since_json": ["--by", "client", "--since", "1h", "--format", "json"],
    "truncated_json": ["--truncated", "--limit", "5", "--format", "json"],
    "truncated_csv": ["--truncated", "--limit", "5", "--format", "csv"],
    "truncated_table": ["--truncated", "--limit", "5"],
}


def check_golden(name: str, text: str) -> None:
    path = GOLDEN / name
    if os.environ.get("UPDATE_GOLDEN"):
        path.write_text(text)
    assert path.exists(), f"{path} missing: run with UPDATE_GOLDEN=1 once"
    assert text == path.read_text(), f"{name} differs from its golden file"


def normalize_summary_json(text: str) -> str:
    groups = orjson.loads(text)
    for group in groups:
        for key in TIME_FIELDS:
            if group[key] is not None:
                assert isinstance(group[key], float) and group[key] >= 0
                group[key] = MS
    return orjson.dumps(groups, option=orjson.OPT_INDENT_2).decode() + "\n"


def normalize_summary_csv(text: str) -> str:
    rows = list(csv.reader(io.StringIO(text)))
    header, body = rows[0], rows[1:]
    columns = [header.index(key) for key in TIME_FIELDS]
    for row in body:
        for index in columns:
            if row[index]:
                float(row[index])
                row[index] = MS
    out = io.StringIO()
    csv.writer(out, lineterminator="\n").writerows([header, *body])
    return out.getvalue()


def normalize_truncated_json(text: str) -> str:
    items = orjson.loads(text)
    for item in items:
        assert len(item["id"]) >= 16 and item["time"].endswith("Z")
        item["id"], item["time"] = "<id>", "<time>"
    return orjson.dumps(items, option=orjson.OPT_INDENT_2).decode() + "\n"


def normalize_truncated_csv(text: str) -> str:
    rows = list(csv.reader(io.StringIO(text)))
    assert rows[0][:2] == ["id", "time"]
    for row in rows[1:]:
        row[0], row[1] = "<id>", "<time>"
    out = io.StringIO()
    csv.writer(out, lineterminator="\n").writerows(rows)
    return out.getvalue()


async def run_audit(url: str, args: list[str]) -> tuple[int, str, str]:
    proc = await asyncio.create_subprocess_exec(
        GATEWAY,
        "audit",
        "--store",
        url,
        *args,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, "COLUMNS": "120"},
    )
    out, err = await asyncio.wait_for(proc.communicate(), 30)
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


@pytest.fixture(scope="module")
def seeded(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """One store seeded through a real gateway, and every command's output over it."""
    tmp = tmp_path_factory.mktemp("audit-cli")
    return asyncio.run(_seed_and_report(tmp / "audit.db"))


async def _seed_and_report(db: Path) -> dict[str, Any]:
    cases = exchange_cases(sdk=False)
    upstream = FakeUpstream()
    script_all(upstream, cases)
    servers = Servers()
    try:
        _, upstream_url = await servers.start(upstream.app())
        runner, base = await servers.start(
            build_app(gateway_settings(upstream_url, f"sqlite:///{db}"), env={})
        )
        sent = []
        async with aiohttp.ClientSession() as session:
            for case in cases:  # one after the other: a known newest-first order
                sent.append(await send(session, base, case))
        await servers.stop(runner)
    finally:
        await servers.close()
    store = SQLiteStore(db)
    try:
        records = await store.fetch()
    finally:
        await store.close()
    url = f"sqlite:///{db}"
    results = await asyncio.gather(*(run_audit(url, args) for args in COMMANDS.values()))
    return {
        "cases": cases,
        "sent": sent,
        "records": records,
        "out": dict(zip(COMMANDS, results, strict=True)),
    }


def output(seeded: dict[str, Any], name: str) -> str:
    code, out, err = seeded["out"][name]
    assert code == 0, (name, err)
    assert err == "", (name, err)
    assert out.endswith("\n")
    return out


def test_seeded_through_real_exchanges(seeded):
    records, sent = seeded["records"], seeded["sent"]
    assert len(records) == len(seeded["cases"]) >= 60
    assert sorted(r.id for r in records) == sorted(s.request_id for s in sent)


def test_summary_json_by_provider_matches_golden(seeded):
    text = output(seeded, "provider_json")
    groups = orjson.loads(text)
    expected = Counter(r.provider or "-" for r in seeded["records"])
    assert {g["group"]: g["requests"] for g in groups} == expected
    assert {g["by"] for g in groups} == {"provider"}
    for g in groups:
        assert sum(g["stop_reasons"].values()) == g["requests"]
    check_golden("e2e_audit_by_provider.json", normalize_summary_json(text))


def test_summary_csv_by_provider_matches_golden(seeded):
    text = output(seeded, "provider_csv")
    rows = list(csv.DictReader(io.StringIO(text)))
    json_groups = orjson.loads(output(seeded, "provider_json"))
    assert [r["group"] for r in rows] == [g["group"] for g in json_groups]
    assert [int(r["truncated"]) for r in rows] == [g["truncated"] for g in json_groups]
    check_golden("e2e_audit_by_provider.csv", normalize_summary_csv(text))


def test_other_groupings_match_golden(seeded):
    records = seeded["records"]
    model = output(seeded, "model_csv")
    check_golden("e2e_audit_by_model.csv", normalize_summary_csv(model))
    rows = list(csv.DictReader(io.StringIO(model)))
    assert {r["group"]: int(r["requests"]) for r in rows} == Counter(
        r.model or "-" for r in records
    )
    route = output(seeded, "route_json")
    check_golden("e2e_audit_by_route.json", normalize_summary_json(route))
    expected = Counter(r.route or "-" for r in records)
    assert {g["group"]: g["requests"] for g in orjson.loads(route)} == expected
    assert set(expected) == {"oa-*", "an-*", "mock-*", "-"}


def test_by_client_since_an_hour_keeps_every_fresh_record(seeded):
    text = output(seeded, "client_since_json")
    check_golden("e2e_audit_by_client.json", normalize_summary_json(text))
    expected = Counter(r.client_format for r in seeded["records"])
    assert {g["group"]: g["requests"] for g in orjson.loads(text)} == expected
    assert sum(expected.values()) == len(seeded["records"])


def test_table_shows_providers_and_counts(seeded):
    table = output(seeded, "provider_table")
    records = seeded["records"]
    assert f"{len(records)} requests by provider" in table
    counts = Counter(r.provider or "-" for r in records)
    truncated = Counter(r.provider or "-" for r in records if r.truncated)
    lines = table.splitlines()
    for provider, n in counts.items():
        row = next(line for line in lines if line.split() and line.split()[0] == provider)
        cells = row.split()
        assert cells[1] == str(n), row  # requests
        assert f"{truncated[provider]} (" in row, row
    assert "stop reasons by provider" in table


def test_truncated_lists_withheld_tool_names(seeded):
    text = output(seeded, "truncated_json")
    items = orjson.loads(text)
    assert len(items) == 5
    cut = sorted((r for r in seeded["records"] if r.truncated), key=lambda r: -r.started_at)
    assert [i["id"] for i in items] == [r.id for r in cut[:5]]  # the newest five, newest first
    check_golden("e2e_audit_truncated.json", normalize_truncated_json(text))
    csv_text = output(seeded, "truncated_csv")
    rows = list(csv.DictReader(io.StringIO(csv_text)))
    assert [r["id"] for r in rows] == [i["id"] for i in items]
    assert [r["withheld_tools"] for r in rows] == [";".join(i["withheld_tools"]) for i in items]
    check_golden("e2e_audit_truncated.csv", normalize_truncated_csv(csv_text))

    names = {name for item in items for name in item["withheld_tools"]}
    assert names == {"lookup", "search", "get_weather"}
    by_id = {r.id: r for r in cut}
    for item in items:
        record = by_id[item["id"]]
        assert item["withheld_tools"] == [c["name"] for c in record.withheld_tool_calls]
        assert item["why"] == record.cut_reason

    table = output(seeded, "truncated_table")
    assert "latest 5 truncated exchanges" in table
    for item in items:
        assert item["model"] in table
        if item["withheld_tools"]:
            assert ", ".join(item["withheld_tools"]) in table
