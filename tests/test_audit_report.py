"""`gateway audit` from hand-built records: every counted column, the percentiles, the grouping
keys, `--since`, the stable JSON/CSV shapes (golden files), the table, and the command itself over
an in-memory store. The real SQLite/PostgreSQL stores are tested elsewhere.

Regenerate the golden files after an intended shape change with `UPDATE_GOLDEN=1 pytest ...`,
then read the diff: those files are the contract scripts rely on.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Sequence
from pathlib import Path

import orjson
import pytest

import gateway.audit.opening as store_module
from gateway.audit.command import add_audit_parser, main_audit, redact_url, run_audit
from gateway.audit.record import NO_PROVIDER, NO_STOP_REASON, AuditRecord
from gateway.audit.render import (
    SUMMARY_COLUMNS,
    render_csv,
    render_json,
    render_table,
    render_truncated_csv,
    render_truncated_json,
    render_truncated_table,
)
from gateway.audit.report import (
    STOP_REASON_KEYS,
    STOP_REASONS,
    GroupSummary,
    TruncatedExchange,
    iso_utc,
    parse_since,
    percentile,
    summarize,
    truncated_list,
)

GOLDEN = Path(__file__).resolve().parent / "golden"
T0 = 1_700_000_000.0  # 2023-11-14T22:13:20Z; offsets below are binary fractions, so times are exact


def rec(
    id: str,
    offset: float,
    *,
    provider: str | None,
    model: str,
    route: str | None,
    client: str = "openai",
    stream: bool = True,
    ttfb: float | None = None,
    total: float | None = None,
    **fields: object,
) -> AuditRecord:
    start = T0 + offset
    return AuditRecord(
        id=id,
        started_at=start,
        client_format=client,
        stream=stream,
        model=model,
        route=route,
        provider=provider,
        first_byte_at=None if ttfb is None else start + ttfb,
        ended_at=None if total is None else start + total,
        **fields,  # type: ignore[arg-type]
    )


def records() -> list[AuditRecord]:
    """Nine exchanges over four providers (one unrouted), in no particular order."""
    return [
        rec(
            "req-01",
            0,
            provider="openai",
            model="gpt-4o",
            route="gpt-*",
            ttfb=0.125,
            total=1.0,
            http_status=200,
            stop_reason="stop",
            native_stop_reason="stop",
            terminator_seen=True,
            input_tokens=100,
            output_tokens=20,
        ),
        rec(
            "req-05",
            5,
            provider="anthropic",
            model="claude-sonnet-4",
            route="claude-*",
            client="anthropic",
            ttfb=0.375,
            total=3.0,
            http_status=200,
            stop_reason="tool_calls",
            tool_calls=1,
            input_tokens=300,
            output_tokens=40,
        ),
        rec(
            "req-02",
            10,
            provider="openai",
            model="gpt-4o",
            route="gpt-*",
            client="anthropic",
            ttfb=0.25,
            total=2.5,
            http_status=200,
            stop_reason="length",
            truncated=True,
            cut_reason="length",
            tool_calls=1,
            withheld_tool_calls=[{"id": "call_1", "name": "get_weather"}],
            input_tokens=200,
            output_tokens=50,
        ),
        rec(
            "req-06",
            15,
            provider="anthropic",
            model="claude-sonnet-4",
            route="claude-*",
            stream=False,
            ttfb=2.0,
            total=2.0,
            http_status=200,
            stop_reason="context_window",
            truncated=True,
            cut_reason="context_window",
            parse_failures=[{"error_class": "ValueError", "offset": 0, "length": 5}],
            input_tokens=1000,
            output_tokens=0,
        ),
        rec(
            "req-03",
            20,
            provider="openai",
            model="gpt-4o-mini",
            route="gpt-*",
            ttfb=0.5,
            total=4.0,
            http_status=200,
            stop_reason="error",
            truncated=True,
            cut_reason="missing_terminator",
            terminator_seen=False,
            tool_calls=2,
            withheld_tool_calls=[
                {"id": "call_2", "name": "search"},
                {"id": "call_3", "name": "fetch_url"},
            ],
            parse_failures=[{"error_class": "JSONDecodeError", "offset": 12, "length": 30}],
            error_class="StreamBrokenError",
            input_tokens=50,
        ),
        rec(
            "req-07",
            25,
            provider="anthropic",
            model="claude-haiku",
            route="claude-*",
            client="anthropic",
            total=0.5,
            http_status=200,
            stop_reason="aborted",
            truncated=True,
            cut_reason="cancelled",
            client_aborted=True,
            ended_by="client",
        ),
        rec(
            "req-04",
            30,
            provider="openai",
            model="gpt-4o",
            route="gpt-*",
            stream=False,
            ttfb=1.5,
            total=1.5,
            http_status=502,
            error_class="UpstreamHTTPError",
        ),
        rec(
            "req-08",
            35,
            provider="mock",
            model="mock-echo",
            route="mock*",
            ttfb=0.0625,
            total=0.125,
            http_status=200,
            stop_reason="stop",
            input_tokens=10,
            output_tokens=5,
        ),
        rec(
            "req-09",
            40,
            provider=None,
            model="nope-1",
            route=None,
            total=0.0078125,
            http_status=404,
            error_class="NoRouteError",
        ),
    ]


def stops(**counts: int) -> dict[str, int]:
    return {name: counts.get(name, 0) for name in STOP_REASON_KEYS}


def by_group(summaries: Sequence[GroupSummary]) -> dict[str, GroupSummary]:
    return {s.group: s for s in summaries}


# --- parse_since ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("90s", 90), ("30m", 1800), ("24h", 86400), ("7d", 604800), ("2w", 1209600), (" 1h ", 3600)],
)
def test_parse_since_units(text: str, seconds: int) -> None:
    assert parse_since(text) == seconds


@pytest.mark.parametrize("text", ["", "24", "h", "1.5h", "-1h", "24H", "1y", "24 h", "0h", "1h30m"])
def test_parse_since_rejects(text: str) -> None:
    with pytest.raises(ValueError, match="invalid duration"):
        parse_since(text)


# --- percentiles ---------------------------------------------------------------------------------


def test_percentile_nearest_rank() -> None:
    one_to_twenty = [float(v) for v in range(20, 0, -1)]  # unsorted on purpose
    assert percentile(one_to_twenty, 50) == 10.0
    assert percentile(one_to_twenty, 95) == 19.0
    assert percentile([float(v) for v in range(1, 101)], 95) == 95.0
    assert percentile([10.0, 20.0, 30.0, 40.0], 50) == 20.0
    assert percentile([10.0, 20.0, 30.0, 40.0], 95) == 40.0
    assert percentile([10.0, 20.0, 30.0], 50) == 20.0
    assert percentile([7.0], 50) == percentile([7.0], 95) == 7.0
    assert percentile([], 50) is None
    with pytest.raises(ValueError):
        percentile([1.0], 0)


# --- summarize -----------------------------------------------------------------------------------


def test_summary_by_provider_every_column() -> None:
    summaries = summarize(records(), "provider")
    assert [s.group for s in summaries] == ["openai", "anthropic", "-", "mock"]
    assert all(s.by == "provider" for s in summaries)
    groups = by_group(summaries)

    openai = groups["openai"]
    assert openai.requests == 4
    assert openai.errors == 2  # req-03 (error class) and req-04 (502 and error class)
    assert openai.stop_reasons == stops(stop=1, length=1, error=1, none=1)  # req-04: a 502
    assert list(openai.stop_reasons) == [*STOP_REASONS, "none"]
    assert openai.truncated == 2
    assert openai.truncated_rate == 0.5
    assert openai.withheld_tool_calls == 3
    assert openai.parse_failures == 1
    assert openai.missing_terminators == 1
    assert (openai.ttfb_p50_ms, openai.ttfb_p95_ms) == (250.0, 1500.0)  # of 125, 250, 500, 1500
    assert (openai.total_p50_ms, openai.total_p95_ms) == (1500.0, 4000.0)  # 1000 .. 4000
    assert (openai.input_tokens, openai.output_tokens) == (350, 70)

    anthropic = groups["anthropic"]
    assert anthropic.requests == 3
    assert anthropic.errors == 0
    assert anthropic.stop_reasons == stops(tool_calls=1, context_window=1, aborted=1)
    assert anthropic.truncated == 2
    assert anthropic.truncated_rate == pytest.approx(2 / 3)
    assert anthropic.withheld_tool_calls == 0
    assert anthropic.parse_failures == 1
    assert anthropic.missing_terminators == 0
    assert (anthropic.ttfb_p50_ms, anthropic.ttfb_p95_ms) == (375.0, 2000.0)  # req-07: none
    assert (anthropic.total_p50_ms, anthropic.total_p95_ms) == (2000.0, 3000.0)
    assert (anthropic.input_tokens, anthropic.output_tokens) == (1300, 40)

    unrouted = groups["-"]
    assert (unrouted.requests, unrouted.errors, unrouted.truncated) == (1, 1, 0)
    assert unrouted.stop_reasons == stops(none=1)
    assert unrouted.truncated_rate == 0.0
    assert (unrouted.ttfb_p50_ms, unrouted.ttfb_p95_ms) == (None, None)
    assert unrouted.total_p50_ms == unrouted.total_p95_ms == 7.8125
    assert (unrouted.input_tokens, unrouted.output_tokens) == (0, 0)

    mock = groups["mock"]
    assert (mock.requests, mock.errors, mock.truncated) == (1, 0, 0)
    assert mock.stop_reasons == stops(stop=1)
    assert (mock.ttfb_p50_ms, mock.total_p95_ms) == (62.5, 125.0)
    assert (mock.input_tokens, mock.output_tokens) == (10, 5)

    for s in summaries:  # every record lands in exactly one stop-reason bucket
        assert sum(s.stop_reasons.values()) == s.requests
    assert sum(s.requests for s in summaries) == len(records())


def test_summary_by_model() -> None:
    summaries = summarize(records(), "model")
    assert [(s.group, s.requests) for s in summaries] == [
        ("gpt-4o", 3),
        ("claude-sonnet-4", 2),
        ("claude-haiku", 1),
        ("gpt-4o-mini", 1),
        ("mock-echo", 1),
        ("nope-1", 1),
    ]
    gpt4o = by_group(summaries)["gpt-4o"]
    assert gpt4o.errors == 1
    assert gpt4o.stop_reasons == stops(stop=1, length=1, none=1)
    assert (gpt4o.truncated, gpt4o.withheld_tool_calls) == (1, 1)
    assert gpt4o.truncated_rate == pytest.approx(1 / 3)
    assert (gpt4o.ttfb_p50_ms, gpt4o.ttfb_p95_ms) == (250.0, 1500.0)  # of 125, 250, 1500
    mini = by_group(summaries)["gpt-4o-mini"]
    assert (mini.missing_terminators, mini.withheld_tool_calls, mini.parse_failures) == (1, 2, 1)
    assert (mini.input_tokens, mini.output_tokens) == (50, 0)


def test_summary_by_route_and_missing_route() -> None:
    summaries = summarize(records(), "route")
    assert [(s.group, s.requests, s.truncated) for s in summaries] == [
        ("gpt-*", 4, 2),
        ("claude-*", 3, 2),
        ("-", 1, 0),
        ("mock*", 1, 0),
    ]


def test_summary_by_client_format() -> None:
    summaries = summarize(records(), "client")
    assert [(s.group, s.requests) for s in summaries] == [("openai", 6), ("anthropic", 3)]
    groups = by_group(summaries)
    assert groups["anthropic"].stop_reasons == stops(tool_calls=1, length=1, aborted=1)
    assert (groups["anthropic"].truncated, groups["openai"].truncated) == (2, 2)
    assert (groups["anthropic"].errors, groups["openai"].errors) == (0, 3)
    assert groups["openai"].missing_terminators == 1


def test_summary_edge_cases() -> None:
    assert summarize([], "provider") == []
    with pytest.raises(ValueError, match="cannot group by"):
        summarize(records(), "region")
    odd = rec("x", 0, provider="p", model="", route=None, stop_reason="weird", http_status=400)
    [s] = summarize([odd], "model")
    assert s.group == "-"
    assert s.stop_reasons == stops(unknown=1)  # outside the closed set counts as unknown
    assert s.errors == 1  # a 4xx with no error class is still an error
    assert (s.ttfb_p50_ms, s.total_p50_ms) == (None, None)


def test_no_stop_reason_is_none_not_unknown() -> None:
    """One vocabulary with /metrics: an exchange that never got a stop reason (refused before
    routing, an upstream error) counts under `none`; `unknown` is a stop reason the upstream
    sent that the gateway does not know."""
    assert (NO_PROVIDER, NO_STOP_REASON) == ("-", "none")
    assert (*STOP_REASONS, NO_STOP_REASON) == STOP_REASON_KEYS  # appended, per the contract
    refused = rec("a", 0, provider=None, model="nope", route=None, http_status=404)
    odd = rec("b", 1, provider="p", model="m", route="m", stop_reason="weird")
    unknown = rec("c", 2, provider="p", model="m", route="m", stop_reason="unknown")
    groups = by_group(summarize([refused, odd, unknown], "provider"))
    assert groups[NO_PROVIDER].stop_reasons == stops(none=1)
    assert groups["p"].stop_reasons == stops(unknown=2)
    parsed = orjson.loads(render_json(summarize([refused], "provider")))
    assert list(parsed[0]["stop_reasons"])[-1] == "none"
    assert parsed[0]["group"] == "-" and parsed[0]["stop_reasons"]["none"] == 1
    header, row = render_csv(summarize([refused], "provider")).splitlines()
    assert header.endswith(
        ",output_tokens,stop_none,dropped_fields,retried,fallbacks,cost_usd,cost_unknown,"
        "other_operations,recovered"
    )
    assert row.endswith(",0,0,1,0,0,0,,0,0,0") and ",".join(["provider", "-"]) in row
    table = render_table(summarize([refused], "provider"), "provider")
    assert "none" in table and "unknown" not in table


# --- truncated_list ------------------------------------------------------------------------------


def test_truncated_list_newest_first() -> None:
    items = truncated_list(records(), 20)
    assert items == [
        TruncatedExchange(
            "req-07",
            "2023-11-14T22:13:45.000Z",
            "anthropic",
            "claude-haiku",
            "cancelled",
            (),
            ended_by="client",
        ),
        TruncatedExchange(
            "req-03",
            "2023-11-14T22:13:40.000Z",
            "openai",
            "gpt-4o-mini",
            "missing_terminator",
            ("search", "fetch_url"),
        ),
        TruncatedExchange(
            "req-06",
            "2023-11-14T22:13:35.000Z",
            "anthropic",
            "claude-sonnet-4",
            "context_window",
            (),
        ),
        TruncatedExchange(
            "req-02", "2023-11-14T22:13:30.000Z", "openai", "gpt-4o", "length", ("get_weather",)
        ),
    ]
    assert [t.id for t in truncated_list(records(), 2)] == ["req-07", "req-03"]


def test_truncated_list_ties_and_time_format() -> None:
    same = [
        rec(i, 0.25, provider=None, model="m", route=None, truncated=True) for i in ("b", "a", "c")
    ]
    assert [t.id for t in truncated_list(same, 10)] == ["a", "b", "c"]
    assert truncated_list(same, 10)[0].time == "2023-11-14T22:13:20.250Z"
    assert iso_utc(0) == "1970-01-01T00:00:00.000Z"
    assert truncated_list([], 5) == []


def test_a_lost_connection_is_cut_but_not_a_missing_terminator() -> None:
    """A reset mid-stream (`connection_lost`) and a stream that ended without its terminator
    are both cut; only the second counts as a missing terminator, and the truncated list says
    which each was."""
    cut = {"truncated": True, "stop_reason": "error", "error_class": "stream_connection_lost"}
    both = [
        rec("reset", 1, provider="p", model="m", route=None, cut_reason="connection_lost", **cut),
        rec(
            "eof",
            2,
            provider="p",
            model="m",
            route=None,
            truncated=True,
            stop_reason="error",
            error_class="stream_truncated",
            cut_reason="missing_terminator",
        ),
    ]
    (summary,) = summarize(both)
    assert (summary.truncated, summary.missing_terminators, summary.errors) == (2, 1, 2)
    assert [(t.id, t.why) for t in truncated_list(both)] == [
        ("eof", "missing_terminator"),
        ("reset", "connection_lost"),
    ]
    table = render_truncated_table(truncated_list(both), console_width=120)
    assert "connection_lost" in table and "missing_terminator" in table


# --- golden JSON / CSV shapes --------------------------------------------------------------------


def check_golden(name: str, text: str) -> None:
    path = GOLDEN / name
    if os.environ.get("UPDATE_GOLDEN"):
        path.parent.mkdir(exist_ok=True)
        path.write_text(text, encoding="utf-8", newline="")
    assert text == path.read_text(encoding="utf-8")


def test_golden_summary_json() -> None:
    text = render_json(summarize(records(), "provider"))
    check_golden("audit_summary.json", text)
    parsed = orjson.loads(text)
    assert list(parsed[0]) == [
        "by",
        "group",
        "requests",
        "errors",
        "stop_reasons",
        "truncated",
        "truncated_rate",
        "withheld_tool_calls",
        "parse_failures",
        "missing_terminators",
        "ttfb_p50_ms",
        "ttfb_p95_ms",
        "total_p50_ms",
        "total_p95_ms",
        "input_tokens",
        "output_tokens",
        "dropped_fields",
        "retried",
        "fallbacks",
        "cost_usd",
        "cost_unknown",
        "other_operations",
        "recovered",
    ]
    assert list(parsed[0]["stop_reasons"]) == list(STOP_REASON_KEYS)
    assert parsed[1]["truncated_rate"] == 0.6667


def test_golden_summary_csv() -> None:
    text = render_csv(summarize(records(), "provider"))
    check_golden("audit_summary.csv", text)
    lines = text.splitlines()
    assert lines[0] == ",".join(SUMMARY_COLUMNS)
    assert [c for c in lines[0].split(",") if c.startswith("stop_")] == [
        f"stop_{name}" for name in STOP_REASON_KEYS
    ]
    # new columns are only appended
    assert lines[0].endswith(
        ",stop_none,dropped_fields,retried,fallbacks,cost_usd,cost_unknown,other_operations"
        ",recovered"
    )
    assert len(lines) == 5


def test_golden_truncated_json() -> None:
    check_golden("audit_truncated.json", render_truncated_json(truncated_list(records(), 20)))


def test_golden_truncated_csv() -> None:
    check_golden("audit_truncated.csv", render_truncated_csv(truncated_list(records(), 20)))


def test_truncated_shapes_carry_who_ended_the_exchange_last() -> None:
    server = rec(
        "req-10",
        50,
        provider="openai",
        model="gpt-4o",
        route="gpt-*",
        stop_reason="aborted",
        truncated=True,
        cut_reason="cancelled",
        ended_by="server",
    )
    items = truncated_list([*records(), server], 20)
    parsed = orjson.loads(render_truncated_json(items))
    assert [list(item)[-1] for item in parsed] == ["ended_by"] * len(parsed)
    assert [(item["id"], item["ended_by"]) for item in parsed[:3]] == [
        ("req-10", "server"),
        ("req-07", "client"),
        ("req-03", None),
    ]
    lines = render_truncated_csv(items).splitlines()
    assert lines[0] == "id,time,provider,model,why,withheld_tools,ended_by"
    assert lines[1].endswith(",cancelled,,server") and lines[3].endswith(",search;fetch_url,")
    table = render_truncated_table(items, console_width=100)
    assert "cancelled by server" in table and "cancelled by client" in table
    assert "missing_terminator by" not in table


def test_empty_json_and_csv() -> None:
    assert render_json([]) == "[]\n"
    assert render_csv([]) == ",".join(SUMMARY_COLUMNS) + "\n"
    assert render_truncated_json([]) == "[]\n"
    assert render_truncated_csv([]) == "id,time,provider,model,why,withheld_tools,ended_by\n"


# --- tables --------------------------------------------------------------------------------------


def table_rows(text: str) -> dict[str, list[list[str]]]:
    """Group name -> the cells of its row in each table, in table order."""
    rows: dict[str, list[list[str]]] = {}
    for line in text.splitlines():
        cells = line.split("  ")  # columns are two spaces apart; "2 (50.0%)" has one
        cells = [c.strip() for c in cells if c.strip()]
        if cells and cells[0] in ("openai", "anthropic", "-", "mock"):
            rows.setdefault(cells[0], []).append(cells[1:])
    return rows


@pytest.mark.parametrize("width", [80, 100, 120])
def test_summary_table(width: int) -> None:
    text = render_table(summarize(records(), "provider"), "provider", console_width=width)
    assert max(len(line) for line in text.splitlines()) <= width
    assert "9 requests by provider" in text
    assert "stop reasons by provider" in text
    for header in (
        "provider",
        "requests",
        "errors",
        "truncated",
        "withheld",
        "arg parse",
        "missing",
        "terminators",
        "ttfb ms",
        "total ms",
        "p50/p95",
        "tokens",
        "in/out",
    ):
        assert header in text
    # only the stop reasons some group has
    for shown in (
        "stop",
        "tool",
        "calls",
        "length",
        "context",
        "window",
        "error",
        "aborted",
        "none",
    ):
        assert shown in text
    for absent in ("filter", "refusal", "pause", "malformed", "sequence", "unknown"):
        assert absent not in text
    counts = ["4", "2", "2 (50.0%)", "3", "1", "1"]
    times = ["250/1500", "1500/4000", "350/70"]
    stop_cells = ["1", "0", "1", "0", "1", "0", "1"]  # stop, tool calls, length, ctx, error, ...
    rows = table_rows(text)
    if width >= 120:  # counts, times and tokens fit one table
        assert rows["openai"] == [counts + times, stop_cells]
    else:
        assert "times and tokens by provider" in text
        assert rows["openai"] == [counts, times, stop_cells]
    assert rows["anthropic"][0][:6] == ["3", "0", "2 (66.7%)", "0", "1", "0"]
    assert rows["anthropic"][-1] == ["0", "1", "0", "1", "0", "1", "0"]
    assert rows["-"][0][:6] == ["1", "1", "0 (0.0%)", "0", "0", "0"]
    assert rows["mock"][0][:3] == ["1", "0", "0 (0.0%)"]
    assert "-" in rows["-"][-2]  # no first byte: the ttfb cell shows "-"


def test_exchanges_that_dropped_fields_are_counted_and_shown_when_there_are_any() -> None:
    dropping = [
        rec("d-1", 0, provider="anthropic", model="m", route="m", dropped_fields=["seed"]),
        rec("d-2", 1, provider="anthropic", model="m", route="m", dropped_fields=["a", "b"]),
        rec("d-3", 2, provider="anthropic", model="m", route="m", dropped_tools=2),
        rec("d-4", 3, provider="openai", model="m", route="m", dropped_input_items=4),
    ]
    summaries = summarize([*records(), *dropping], "provider")
    groups = by_group(summaries)
    assert groups["anthropic"].dropped_fields == 2  # exchanges, not fields; tools do not count
    assert groups["openai"].dropped_fields == 0
    as_json = {item["group"]: item for item in orjson.loads(render_json(summaries))}
    assert (as_json["anthropic"]["dropped_fields"], as_json["openai"]["dropped_fields"]) == (2, 0)
    csv_rows = {line.split(",")[1]: line for line in render_csv(summaries).splitlines()[1:]}
    assert csv_rows["anthropic"].endswith(",2,0,0,,3,0,0")
    assert csv_rows["openai"].endswith(",0,0,0,,3,0,0")
    for width in (80, 120):
        text = render_table(summaries, "provider", console_width=width)
        assert max(len(line) for line in text.splitlines()) <= width
        assert "field" in text and "drops" in text
        assert table_rows(text)["anthropic"][0][6] == "2"
    assert "drops" not in render_table(summarize(records(), "provider"), "provider")


def attempt(provider: str, outcome: str, model: str = "m") -> dict[str, object]:
    return {"provider": provider, "upstream_model": model, "outcome": outcome, "duration_ms": 1.0}


def test_retried_and_fallback_exchanges_are_counted_and_shown_when_there_are_any() -> None:
    tried = [
        # a retry at the same target that answered: retried, not a fallback
        rec(
            "r-1",
            0,
            provider="openai",
            model="m",
            route="m",
            attempts=[attempt("openai", "error_status"), attempt("openai", "answered")],
        ),
        # a fallback to another provider: both
        rec(
            "r-2",
            1,
            provider="anthropic",
            model="m",
            route="m",
            attempts=[attempt("openai", "timeout"), attempt("anthropic", "answered")],
        ),
        # the first target skipped for its open circuit: a fallback, but one attempt only
        rec(
            "r-3",
            2,
            provider="anthropic",
            model="m",
            route="m",
            attempts=[attempt("openai", "circuit_open"), attempt("anthropic", "answered")],
        ),
        # every attempt failed: retried, no fallback
        rec(
            "r-4",
            3,
            provider="anthropic",
            model="m",
            route="m",
            attempts=[attempt("openai", "unreachable"), attempt("anthropic", "error_status")],
        ),
        rec(
            "r-5",
            4,
            provider="openai",
            model="m",
            route="m",
            attempts=[attempt("openai", "answered")],
        ),
    ]
    summaries = summarize([*records(), *tried], "provider")
    groups = by_group(summaries)
    assert (groups["openai"].retried, groups["openai"].fallbacks) == (1, 0)
    assert (groups["anthropic"].retried, groups["anthropic"].fallbacks) == (2, 2)
    as_json = {item["group"]: item for item in orjson.loads(render_json(summaries))}
    assert (as_json["anthropic"]["retried"], as_json["anthropic"]["fallbacks"]) == (2, 2)
    csv_rows = {line.split(",")[1]: line for line in render_csv(summaries).splitlines()[1:]}
    assert csv_rows["anthropic"].endswith(",2,2,,3,0,0")
    assert csv_rows["openai"].endswith(",1,0,,3,0,0")
    for width in (80, 120):
        text = render_table(summaries, "provider", console_width=width)
        assert max(len(line) for line in text.splitlines()) <= width
        assert "retried/" in text and "fallback" in text
        assert any("2/2" in row for row in table_rows(text)["anthropic"])
    assert "retried/" not in render_table(summarize(records(), "provider"), "provider")


def test_summary_table_by_model_and_empty() -> None:
    text = render_table(summarize(records(), "model"), "model", console_width=100)
    assert "9 requests by model" in text
    for name in ("gpt-4o", "gpt-4o-mini", "claude-sonnet-4", "claude-haiku", "mock-echo"):
        assert name in text
    assert render_table([], "model") == "no audit records in this window\n"


def test_truncated_table() -> None:
    text = render_truncated_table(truncated_list(records(), 20), console_width=100)
    assert max(len(line) for line in text.splitlines()) <= 100
    for expected in (
        "time (UTC)",
        "withheld tools",
        "2023-11-14 22:13:45",
        "req-07",
        "missing_terminator",
        "search, fetch_url",
        "get_weather",
        "claude-haiku",
        "cancelled by client",
    ):
        assert expected in text
    assert text.index("req-07") < text.index("req-03") < text.index("req-06")
    assert render_truncated_table([]) == "no truncated exchanges in this window\n"


# --- run_audit over an in-memory store -----------------------------------------------------------


class MemoryStore:
    """The AuditStore protocol over a list: fetch filters like the real stores, newest first."""

    def __init__(self, items: list[AuditRecord], url: str = "memory://") -> None:
        self.url = url
        self.items = list(items)
        self.fetches: list[tuple[float | None, bool, int | None]] = []
        self.opened = self.closed = False

    async def open(self) -> None:
        self.opened = True

    async def write(self, records: Sequence[AuditRecord]) -> None:
        self.items.extend(records)

    async def fetch(
        self, since: float | None = None, truncated_only: bool = False, limit: int | None = None
    ) -> list[AuditRecord]:
        self.fetches.append((since, truncated_only, limit))
        rows = [
            r
            for r in self.items
            if (since is None or r.started_at >= since) and (r.truncated or not truncated_only)
        ]
        rows.sort(key=lambda r: r.started_at, reverse=True)
        return rows if limit is None else rows[:limit]

    async def close(self) -> None:
        self.closed = True


async def test_run_audit_formats_match_renderers() -> None:
    store = MemoryStore(records())

    async def audit(fmt: str) -> str:
        return await run_audit(store, since=None, by="provider", fmt=fmt, truncated=False, limit=20)

    assert await audit("json") == (GOLDEN / "audit_summary.json").read_text()
    assert await audit("csv") == (GOLDEN / "audit_summary.csv").read_text()
    assert "9 requests by provider" in await audit("table")
    assert store.fetches == [(None, False, None)] * 3


async def test_run_audit_since_window() -> None:
    store = MemoryStore(records())
    text = await run_audit(
        store, since="75s", by="model", fmt="json", truncated=False, limit=20, now=T0 + 100
    )
    assert store.fetches == [(T0 + 25, False, None)]
    assert [(g["group"], g["requests"]) for g in orjson.loads(text)] == [
        ("claude-haiku", 1),
        ("gpt-4o", 1),
        ("mock-echo", 1),
        ("nope-1", 1),
    ]


async def test_run_audit_truncated() -> None:
    store = MemoryStore(records())
    text = await run_audit(
        store, since="1h", by="provider", fmt="json", truncated=True, limit=3, now=T0 + 100
    )
    assert store.fetches == [(T0 + 100 - 3600, True, 3)]
    assert [t["id"] for t in orjson.loads(text)] == ["req-07", "req-03", "req-06"]
    csv_text = await run_audit(
        store, since=None, by="provider", fmt="csv", truncated=True, limit=20
    )
    assert csv_text == (GOLDEN / "audit_truncated.csv").read_text()
    table = await run_audit(store, since=None, by="provider", fmt="table", truncated=True, limit=1)
    assert "req-07" in table and "req-03" not in table


async def test_run_audit_rejects_bad_arguments_before_fetching() -> None:
    store = MemoryStore(records())
    for kwargs, message in (
        ({"since": "yesterday", "by": "provider", "fmt": "json"}, "invalid duration"),
        ({"since": None, "by": "region", "fmt": "json"}, "cannot group by"),
        ({"since": None, "by": "provider", "fmt": "xml"}, "unknown format"),
    ):
        with pytest.raises(ValueError, match=message):
            await run_audit(store, truncated=False, limit=20, **kwargs)  # type: ignore[arg-type]
    assert store.fetches == []


# --- the command line ----------------------------------------------------------------------------


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="gateway")
    add_audit_parser(parser.add_subparsers(dest="command", required=True))
    return parser.parse_args(["audit", *argv])


def test_parser_defaults_and_choices(capsys: pytest.CaptureFixture[str]) -> None:
    args = parse([])
    assert (args.store, args.config, args.since, args.by, args.format) == (
        None,
        None,
        None,
        "provider",
        "table",
    )
    assert (args.truncated, args.limit) == (False, 20)
    args = parse(
        [
            "--store",
            "sqlite:///a.db",
            "--since",
            "7d",
            "--by",
            "client",
            "--format",
            "csv",
            "--truncated",
            "--limit",
            "5",
        ]
    )
    assert (args.store, args.since, args.by, args.format, args.truncated, args.limit) == (
        "sqlite:///a.db",
        "7d",
        "client",
        "csv",
        True,
        5,
    )
    for bad in (["--by", "region"], ["--format", "xml"], ["--limit", "0"], ["--limit", "x"]):
        with pytest.raises(SystemExit) as info:
            parse(bad)
        assert info.value.code == 2
    capsys.readouterr()


@pytest.fixture
def opened(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> list[MemoryStore]:
    """Replace `open_store` with one handing out in-memory stores; the list collects them.

    The SQLite files the tests name exist (empty) in the working directory: `gateway audit`
    refuses to read a store that is not there."""
    stores: list[MemoryStore] = []
    monkeypatch.chdir(tmp_path)
    for name in ("x.db", "from-config.db", "gateway-audit.db"):
        (tmp_path / name).touch()

    def fake_open_store(url: str) -> MemoryStore:
        store = MemoryStore(records(), url)
        stores.append(store)
        return store

    monkeypatch.setattr(store_module, "open_store", fake_open_store)
    monkeypatch.delenv("GATEWAY_CONFIG", raising=False)
    return stores


def test_main_audit_prints_and_closes(
    opened: list[MemoryStore], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main_audit(parse(["--store", "sqlite:///x.db", "--format", "csv"])) == 0
    out, err = capsys.readouterr()
    assert out == (GOLDEN / "audit_summary.csv").read_text()
    assert err == ""
    [store] = opened
    assert (store.url, store.opened, store.closed) == ("sqlite:///x.db", True, True)


def test_main_audit_default_store_from_config(
    opened: list[MemoryStore],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    conf = tmp_path / "conf"
    conf.mkdir()
    (conf / "from-config.db").touch()
    default = tmp_path / "xdg" / "llm-gateway" / "audit.db"
    default.parent.mkdir(parents=True)
    default.touch()
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    config = conf / "gw.toml"
    config.write_text('[audit]\nstore = "sqlite:///from-config.db"\n', encoding="utf-8")
    assert main_audit(parse(["--config", str(config), "--format", "json"])) == 0
    monkeypatch.setenv("GATEWAY_CONFIG", str(config))
    assert main_audit(parse(["--truncated", "--format", "json"])) == 0
    monkeypatch.delenv("GATEWAY_CONFIG")
    assert main_audit(parse(["--format", "json"])) == 0
    assert [s.url for s in opened] == [
        f"sqlite:///{conf}/from-config.db",  # beside the configuration file, not in the cwd
        f"sqlite:///{conf}/from-config.db",
        f"sqlite:///{default}",  # the built-in default: the per-user data directory
    ]
    capsys.readouterr()


def test_main_audit_refuses_a_missing_sqlite_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    assert main_audit(parse(["--store", "sqlite:///absent.db"])) == 2
    assert "no audit store at sqlite:///absent.db" in capsys.readouterr().err
    assert not (tmp_path / "absent.db").exists()


def test_main_audit_bad_since(
    opened: list[MemoryStore], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main_audit(parse(["--store", "sqlite:///x.db", "--since", "yesterday"])) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert "--since" in err and "invalid duration 'yesterday'" in err
    assert opened == []  # rejected before touching the store


def test_main_audit_bad_config(
    opened: list[MemoryStore], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main_audit(parse(["--config", "/nonexistent/gw.toml"])) == 2
    assert "file not found" in capsys.readouterr().err
    assert opened == []


def test_main_audit_unreachable_store(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    class Unreachable(MemoryStore):
        async def open(self) -> None:
            raise ConnectionRefusedError(111, "Connect call failed with hunter2")

    monkeypatch.setattr(store_module, "open_store", lambda url: Unreachable([], url))
    url = "postgresql://audit:hunter2@127.0.0.1:1/db"
    assert main_audit(parse(["--store", url])) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert "cannot open audit store postgresql://audit:***@127.0.0.1:1/db" in err
    assert "ConnectionRefusedError" in err and "Connect call failed" in err
    assert "hunter2" not in err


def test_main_audit_unknown_scheme(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def refuse(url: str) -> MemoryStore:
        raise ValueError(f"unsupported audit store URL: {url}")

    monkeypatch.setattr(store_module, "open_store", refuse)
    assert main_audit(parse(["--store", "mysql://x/y"])) == 2
    assert "unsupported audit store URL" in capsys.readouterr().err


def test_redact_url() -> None:
    assert redact_url("sqlite:///gateway-audit.db") == "sqlite:///gateway-audit.db"
    assert redact_url("postgresql://u:p%40ss@h:5432/db") == "postgresql://u:***@h:5432/db"
    assert redact_url("postgresql://u@h/db") == "postgresql://u@h/db"
