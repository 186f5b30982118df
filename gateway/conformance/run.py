"""One conformance run: the plan of exchanges, the target's reach, the cases run concurrently, a
`Result` per exchange (or per skipped combination, with its reason).

    results = await run_cases(target, Selection(formats, wires, cases), progress)

The upstream's log of what reached it (`/_conformance/requests`) is read at the end: a case
whose request reached another wire than its model names (or none) says so in its notes.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

import aiohttp
import orjson

from gateway.conformance.cases import CASES, FORMATS, WIRES, Case, parse_model
from gateway.conformance.client import Exchange, Reply, Target, send
from gateway.conformance.judge import judge
from gateway.conformance.observe import Observation, observe
from gateway.conformance.upstream import REQUESTS_PATH

SKIPPED: Final = "skipped"


class Unreachable(Exception):
    """The target answers nothing at all (no HTTP server there)."""


@dataclass(frozen=True)
class Selection:
    formats: Sequence[str] = FORMATS
    wires: Sequence[str] = WIRES
    cases: Sequence[Case] = CASES


@dataclass
class Result:
    case: str
    client: str
    wire: str
    stream: bool
    verdict: str
    lost: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    saw: dict[str, Any] = field(default_factory=dict)
    reason: str | None = None  # why skipped
    seconds: float = 0.0

    @property
    def id(self) -> str:
        return f"{self.case}/{self.wire}/{self.client}/{'stream' if self.stream else 'whole'}"


def plan(selection: Selection) -> tuple[list[Exchange], list[Result]]:
    """The exchanges to run, and the combinations that cannot exist (with why)."""
    runs: list[Exchange] = []
    skipped: list[Result] = []
    for case in selection.cases:
        for wire in selection.wires:
            for client in selection.formats:
                for stream in (False, True):
                    reason = case.skip.get(wire) if case.script(wire) is None else None
                    reason = reason or (case.no_stream if stream else case.no_whole)
                    if reason is not None:
                        skipped.append(
                            Result(case.id, client, wire, stream, SKIPPED, reason=reason)
                        )
                    else:
                        runs.append(Exchange(client, case, wire, stream))
    return runs, skipped


def saw(seen: Observation, reply: Reply) -> dict[str, Any]:
    """What the client saw, for the JSON report and the terminal's details."""
    tools = [
        {"id": tool.id, "name": tool.name, "arguments": tool.arguments[:80], "status": tool.status}
        for tool in seen.tools
    ]
    shown: dict[str, Any] = {
        "http_status": seen.status,
        "stream": seen.sse,
        "stop": seen.stop,
        "terminator": seen.terminator,
        "error_event": seen.error_event,
        "text": seen.text[:120],
        "refusal": seen.refusal[:120] or None,
        "tool_calls": tools,
        "usage": list(seen.usage) if seen.usage is not None else None,
        "end": reply.end,
        "seconds": round(reply.seconds, 3),
        "extension": seen.extension,
        "native": seen.native,
    }
    if seen.stop_sequence is not None:
        shown["stop_sequence"] = seen.stop_sequence
    if seen.unreadable:
        shown["unreadable_lines"] = seen.unreadable
    if reply.failure is not None:
        shown["transport_error"] = reply.failure
    if seen.status is not None and seen.status >= 400:
        shown["body"] = reply.body[:300].decode("utf-8", "replace")
    return shown


async def reachable(session: aiohttp.ClientSession, target: Target) -> None:
    try:
        async with session.get(target.base_url + "/", headers=dict(target.headers)) as response:
            await response.read()
    except aiohttp.ClientConnectorError as exc:
        raise Unreachable(f"cannot reach {target.base_url}: {exc.os_error or exc}") from None
    except (aiohttp.ClientError, TimeoutError) as exc:
        raise Unreachable(f"no HTTP answer from {target.base_url}: {type(exc).__name__}") from None


async def served(
    session: aiohttp.ClientSession, target: Target, selection: Selection
) -> dict[str, str]:
    """client format -> why it is not served (an endpoint answering 404/405 that is not the
    format's own error JSON, as for a route the target does not have)."""
    stop = next((case for case in CASES if case.id == "stop"), CASES[0])
    wire = selection.wires[0]
    absent: dict[str, str] = {}
    for client in selection.formats:
        reply = await send(session, target, Exchange(client, stop, wire, stream=False))
        seen = observe(client, reply)
        if reply.status in (404, 405) and not seen.error_shape:
            absent[client] = f"the target does not serve this format (HTTP {reply.status})"
    return absent


async def one(session: aiohttp.ClientSession, target: Target, exchange: Exchange) -> Result:
    reply = await send(session, target, exchange)
    seen = observe(exchange.client, reply)
    verdict = judge(exchange, seen, reply)
    return Result(
        exchange.case.id,
        exchange.client,
        exchange.wire,
        exchange.stream,
        verdict.verdict,
        verdict.lost,
        verdict.notes,
        saw(seen, reply),
        seconds=reply.seconds,
    )


async def upstream_log(session: aiohttp.ClientSession, upstream: str) -> list[dict[str, Any]]:
    try:
        async with session.get(upstream + REQUESTS_PATH) as response:
            entries = orjson.loads(await response.read())
    except (aiohttp.ClientError, orjson.JSONDecodeError, TimeoutError):
        return []
    return entries if isinstance(entries, list) else []


def note_routes(results: list[Result], log: list[dict[str, Any]], run: str) -> None:
    """Say where each exchange's request went; one the target sent to a wire that has no such
    case (LiteLLM sends an Anthropic client's OpenAI model to the Responses API) is skipped."""
    reached: dict[tuple[str, str, str, bool], dict[str, bool]] = {}
    for entry in log:
        if not isinstance(entry, dict) or entry.get("run") != run:
            continue
        found = parse_model(str(entry.get("model")))
        if found is not None:
            key = (*found, str(entry.get("client")), entry.get("mode") == "stream")
            reached.setdefault(key, {})[str(entry.get("wire"))] = entry.get("played") is True
    for result in results:
        wires = reached.get((result.wire, result.case, result.client, result.stream), {})
        result.saw["reached"] = sorted(wires)
        if not wires:
            result.notes.append("the request never reached the upstream")
        elif result.wire not in wires:
            result.notes.append(f"the target sent it to the {', '.join(sorted(wires))} wire")
            if not any(wires.values()):
                result.reason = f"the target sent it to the {', '.join(sorted(wires))} wire, "
                result.reason += "which has no such case"
                result.verdict, result.lost = SKIPPED, []


def apply_baseline(results: list[Result]) -> None:
    """Where the plain stop case itself failed (an error status, no answer), the target cannot
    serve that client format from that wire in that mode at all (Portkey answers an Anthropic
    client of an OpenAI model with HTTP 500 "messages is not supported by openai"): the other
    cases there say nothing of truncation, so they are skipped and the stop case's error stands."""
    failed: dict[tuple[str, str, bool], str] = {}
    for result in results:
        status = result.saw.get("http_status")
        if result.case == "stop" and result.verdict == "error":
            shown = f"HTTP {status}" if status is not None else "no HTTP answer"
            failed[(result.client, result.wire, result.stream)] = shown
    for result in results:
        why = failed.get((result.client, result.wire, result.stream))
        if why is not None and result.case != "stop" and result.verdict != SKIPPED:
            result.reason = f"the plain stop case failed here ({why}): the target cannot serve it"
            result.verdict, result.lost = SKIPPED, []


async def run_cases(
    target: Target,
    selection: Selection,
    upstream: str,
    concurrency: int = 8,
    on_start: Callable[[int], None] = lambda total: None,
    on_done: Callable[[Result], None] = lambda result: None,
) -> list[Result]:
    """Every selected exchange against `target`; raises Unreachable when nothing answers."""
    runs, skipped = plan(selection)
    timeout = aiohttp.ClientTimeout(total=None, connect=10)
    connector = aiohttp.TCPConnector(limit=concurrency, force_close=True)
    async with aiohttp.ClientSession(timeout=timeout, connector=connector) as session:
        await reachable(session, target)
        absent = await served(session, target, selection)
        for exchange in [run for run in runs if run.client in absent]:
            why = absent[exchange.client]
            case, client, wire = exchange.case.id, exchange.client, exchange.wire
            skipped.append(Result(case, client, wire, exchange.stream, SKIPPED, reason=why))
        runs = [run for run in runs if run.client not in absent]
        on_start(len(runs))
        gate = asyncio.Semaphore(concurrency)

        async def gated(exchange: Exchange) -> Result:
            async with gate:
                result = await one(session, target, exchange)
            on_done(result)
            return result

        results = list(await asyncio.gather(*(gated(run) for run in runs)))
        note_routes(results, await upstream_log(session, upstream), target.run)
    apply_baseline(results)
    order = {case.id: number for number, case in enumerate(CASES)}
    every = results + skipped
    every.sort(
        key=lambda r: (order[r.case], WIRES.index(r.wire), FORMATS.index(r.client), r.stream)
    )
    return every
