"""A verdict per exchange, from what the client saw (`Observation`) and the contract (`expect`).

- `faithful`: the client sees what its format's standard says for the upstream's answer;
- `lossy`: something was lost, and named ("context window shown as max_tokens", "usage
  dropped", "stream ended without an error event");
- `hidden`: a cut answer presented as complete, the worst: a whole-answer stop (or the stream's
  terminator) for an answer cut at max tokens or a broken stream, or a cut tool call delivered as
  a normal complete one;
- `error`: a clean error where an answer was possible (an HTTP 500 for a max-tokens answer).

    verdict = judge(exchange, observe(exchange.client, reply), reply)
    verdict.verdict, verdict.lost, verdict.notes
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Final

import orjson

from gateway.conformance.cases import (
    ERROR_STATUS,
    REFUSAL,
    STOP_SEQUENCE,
    TOOL_ARGS,
    TOOL_NAME,
    UNKNOWN_VALUE,
    USAGE,
    Fault,
    Meaning,
)
from gateway.conformance.client import Exchange, Reply
from gateway.conformance.expect import (
    CALL_STATUS,
    COMPLETE,
    CUT,
    EXPECT,
    REFUSAL_IN_TEXT,
    WHAT,
)
from gateway.conformance.observe import Observation

RANK: Final = {"faithful": 0, "lossy": 1, "error": 2, "hidden": 3}


@dataclass
class Verdict:
    verdict: str = "faithful"
    lost: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def flag(self, verdict: str, what: str) -> None:
        self.lost.append(what)
        if RANK[verdict] > RANK[self.verdict]:
            self.verdict = verdict


def _shown(seen: Observation) -> str:
    if seen.stop is not None:
        return seen.stop
    return "its terminator with no stop value" if seen.terminator else "no stop value"


def _error_body(verdict: Verdict, seen: Observation, client: str) -> None:
    if not seen.error_shape:
        verdict.flag("lossy", f"the HTTP {seen.status} body is not the {client} error JSON")


def judge(exchange: Exchange, seen: Observation, reply: Reply) -> Verdict:
    verdict = Verdict()
    meaning = exchange.case.meaning
    if meaning is Meaning.GARBAGE and not exchange.stream:
        meaning = Meaning.BROKEN  # the whole body is not JSON: no answer to give
    if seen.extension:
        native = f" ({seen.native})" if seen.native else ""
        verdict.notes.append(f"native value kept in the gateway's extension{native}")
    if seen.status is None:
        severity = "lossy" if meaning in (Meaning.BROKEN, Meaning.UPSTREAM_ERROR) else "error"
        verdict.flag(severity, f"no HTTP answer: the connection {reply.end}")
        return verdict
    if meaning is Meaning.UPSTREAM_ERROR:
        _upstream_error(verdict, exchange, seen)
    elif meaning is Meaning.BROKEN:
        _broken(verdict, exchange, seen, reply)
    else:
        _answer(verdict, exchange, seen, meaning)
    return verdict


# --- an answer there was to give ---------------------------------------------------------------


def _answer(verdict: Verdict, exchange: Exchange, seen: Observation, meaning: Meaning) -> None:
    what, client = WHAT[meaning], exchange.client
    if seen.status != 200:
        verdict.flag("error", f"HTTP {seen.status} for {what}")
        return
    if exchange.stream and not seen.sse:
        verdict.notes.append("a streamed request answered with a whole body")
    if seen.error_event is not None and meaning is not Meaning.GARBAGE:
        verdict.flag("error", f"an error event ({seen.error_event}) for {what}")
        return
    if not seen.sse and not seen.json_ok:
        verdict.flag("lossy", "HTTP 200 with a body that is not JSON")
        return
    if meaning is Meaning.GARBAGE:
        _garbage(verdict, exchange, seen)
        return
    _stop(verdict, exchange, seen, meaning)
    if meaning is Meaning.TOOLS:
        _whole_tool(verdict, seen)
    elif meaning is Meaning.TOOL_CUT:
        _cut_tool(verdict, client, seen)
    elif meaning is Meaning.WHOLE_REFUSAL:
        _whole_refusal(verdict, client, seen)
    if meaning is not Meaning.WHOLE_REFUSAL:
        _text(verdict, exchange, seen)
    sequence = meaning is Meaning.STOP_SEQUENCE and seen.stop == "stop_sequence"
    if sequence and seen.stop_sequence != STOP_SEQUENCE:
        verdict.flag("lossy", "the matched stop_sequence dropped")
    if meaning is Meaning.UNKNOWN and client == exchange.wire and seen.stop != UNKNOWN_VALUE:
        verdict.flag("lossy", f"the unknown value {UNKNOWN_VALUE} rewritten to {_shown(seen)}")
    if exchange.case.check_usage:
        _usage(verdict, seen)
    if seen.sse and not seen.terminator:
        verdict.notes.append("the stream ended without its terminator")


def _stop(verdict: Verdict, exchange: Exchange, seen: Observation, meaning: Meaning) -> None:
    expect, what, stop = EXPECT[meaning][exchange.client], WHAT[meaning], seen.stop
    refused = meaning is Meaning.REFUSAL and exchange.client != "anthropic" and bool(seen.refusal)
    if refused or (stop is not None and stop in expect.faithful):
        return
    if stop is None:
        cut = meaning in (Meaning.LENGTH, Meaning.CONTEXT, Meaning.FILTER, Meaning.REFUSAL)
        if seen.terminator and (cut or meaning is Meaning.TOOL_CUT):
            verdict.flag("hidden", f"{what} ended by {_shown(seen)}")
        else:
            verdict.flag("lossy", f"{what} shown with no stop value")
    elif stop in expect.lossy:
        verdict.flag("lossy", expect.lossy[stop])
    elif stop in expect.hidden:
        verdict.flag("hidden", f"{what} shown as {stop}")
    else:
        verdict.flag("lossy", f"{what} shown as {stop}")


def _text(verdict: Verdict, exchange: Exchange, seen: Observation) -> None:
    script = exchange.case.script(exchange.wire)
    expected = "".join(script.text) if script else ""
    if seen.text == expected:
        return
    if not seen.text and expected:
        verdict.flag("lossy", "the text dropped")
    elif expected.startswith(seen.text) and seen.stop in COMPLETE[exchange.client]:
        shown = f"{len(seen.text)} of {len(expected)} characters"
        verdict.flag("hidden", f"part of the text lost ({shown}), shown as complete")
    else:
        verdict.flag("lossy", f"the text changed: {seen.text[:60]!r}")


def _tool_arguments(arguments: str) -> object:
    try:
        return orjson.loads(arguments or "{}")
    except orjson.JSONDecodeError:
        return None


def _whole_tool(verdict: Verdict, seen: Observation) -> None:
    tools = [tool for tool in seen.tools if tool.name == TOOL_NAME]
    if not tools:
        verdict.flag("lossy", "the tool call dropped")
    elif _tool_arguments(tools[0].arguments) != TOOL_ARGS:
        verdict.flag("lossy", f"the tool arguments changed: {tools[0].arguments[:60]!r}")


def _cut_tool(verdict: Verdict, client: str, seen: Observation) -> None:
    if not seen.tools:
        verdict.notes.append("the cut tool call was withheld")
        return
    if seen.stop in COMPLETE[client]:
        verdict.flag("hidden", "the cut tool call delivered as a complete one")
        return
    verdict.notes.append(f"the cut tool call was delivered, flagged by {_shown(seen)}")
    if client in CALL_STATUS and seen.tools[0].status == "completed":
        verdict.flag("lossy", "the cut tool call's item marked completed")


def _whole_refusal(verdict: Verdict, client: str, seen: Observation) -> None:
    refusal = "".join(REFUSAL)
    if client in REFUSAL_IN_TEXT:  # its refusal is the text, with stop_reason refusal
        if refusal not in seen.text:
            verdict.flag("lossy", "the refusal text dropped")
    elif refusal in seen.refusal:
        return
    elif refusal in seen.text:
        if seen.stop != "incomplete:content_filter":
            verdict.flag("lossy", "the refusal delivered as ordinary text")
    else:
        verdict.flag("lossy", "the refusal text dropped")


def _usage(verdict: Verdict, seen: Observation) -> None:
    if seen.usage is None or seen.usage == (None, None):
        verdict.flag("lossy", "usage dropped")
    elif seen.usage != USAGE:
        shown = f"{seen.usage[0]}/{seen.usage[1]}"
        verdict.flag("lossy", f"usage changed: {USAGE[0]}/{USAGE[1]} in/out shown as {shown}")


def _garbage(verdict: Verdict, exchange: Exchange, seen: Observation) -> None:
    if seen.error_event is not None:
        verdict.notes.append(f"the garbage line ended the stream with {seen.error_event}")
        return
    if seen.stop is None:
        verdict.flag("lossy", "the stream ended without an error event or a stop value")
        return
    _stop(verdict, exchange, seen, Meaning.STOP)
    _text(verdict, exchange, seen)
    if verdict.verdict == "faithful":
        verdict.notes.append("the garbage line was skipped")


# --- no answer to give -------------------------------------------------------------------------


def _broken(verdict: Verdict, exchange: Exchange, seen: Observation, reply: Reply) -> None:
    client = exchange.client
    script = exchange.case.script(exchange.wire)
    if script is not None and script.fault is Fault.STALL:
        verdict.notes.append(f"ended after {reply.seconds:.1f} s")
    if seen.status != 200:
        verdict.notes.append(f"HTTP {seen.status}")
        _error_body(verdict, seen, client)
        return
    if seen.error_event is not None:
        verdict.notes.append(f"ended with {seen.error_event}")
        return
    if seen.stop == "failed":  # a whole Responses body that says so
        return
    if seen.sse and seen.terminator and seen.stop not in CUT[client]:
        verdict.flag("hidden", f"a broken stream ended by {_shown(seen)}, no error event")
    elif seen.stop in COMPLETE[client]:
        verdict.flag("hidden", f"a broken answer shown as {seen.stop}")
    elif seen.stop is not None:
        verdict.flag("lossy", f"a broken answer shown as {seen.stop}, no error")
    elif seen.sse:
        how = {"reset": " (the connection broke)", "timeout": " (the client gave up waiting)"}
        verdict.flag("lossy", "stream ended without an error event" + how.get(reply.end, ""))
    else:
        verdict.flag("lossy", f"HTTP 200 with a broken body ({reply.end}), no error")


def _upstream_error(verdict: Verdict, exchange: Exchange, seen: Observation) -> None:
    sent = ERROR_STATUS[exchange.wire]
    if seen.status == 200:
        if seen.error_event is not None:
            verdict.flag("lossy", f"upstream HTTP {sent} became a 200 stream with an error event")
        elif seen.terminator or seen.stop in COMPLETE[exchange.client]:
            verdict.flag("hidden", f"upstream HTTP {sent} shown as a complete answer")
        else:
            verdict.flag("lossy", f"upstream HTTP {sent} shown as an HTTP 200 without an error")
        return
    assert seen.status is not None
    if seen.status // 100 != sent // 100:
        verdict.flag("lossy", f"upstream HTTP {sent} shown as HTTP {seen.status}")
    _error_body(verdict, seen, exchange.client)
