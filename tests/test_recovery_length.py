"""[recovery] max_tokens = "continue": a text answer cut at max tokens is continued like a broken
stream, and the client sees the continuation's stop; and how a recovered exchange shows in the
record, `gateway audit`, /metrics and the dashboard's aggregates."""

from __future__ import annotations

import asyncio
import urllib.request

import pytest
from prometheus_client.parser import text_string_to_metric_families

from gateway.audit.record import AuditRecord
from gateway.audit.report import summarize
from gateway.audit.sqlite_store import SQLiteStore
from gateway.dashboard import aggregate
from gateway.dashboard.aggregate import Window
from tests.recovery_support import (
    AT,
    CLIENTS,
    COMPLETE,
    TEXT,
    WIRES,
    RecoveryStack,
    data_objects,
    expected_continuation,
    last_turns,
    raw_stream,
)
from tests.recovery_upstream import INPUT_TOKENS, Stream

LENGTH = {"chat": "length", "messages": "max_tokens", "responses": "max_output_tokens"}


@pytest.fixture(scope="module")
def rstack(tmp_path_factory: pytest.TempPathFactory):
    s = RecoveryStack(tmp_path_factory.mktemp("recovery-length"))
    s.start()
    yield s
    s.stop()


@pytest.mark.parametrize("wire", list(WIRES))
@pytest.mark.parametrize("client", list(CLIENTS))
def test_an_answer_cut_at_max_tokens_is_continued(rstack, client, wire):
    model = rstack.scripted("rc", wire, Stream(TEXT[:AT], end="length"), Stream(TEXT[AT:]))
    seen = CLIENTS[client](rstack, model)
    assert (seen.error, seen.text, seen.stop) == (None, TEXT, COMPLETE[client])
    assert seen.endings == 1  # one finish reason (chat), one text block (messages): no seam
    assert seen.gateway is not None
    assert seen.gateway["recovered"]["max_tokens"] == 1
    assert seen.gateway["recovered"]["causes"] == ["length"]
    assert last_turns(rstack.requests(model)[1]) == expected_continuation(wire, TEXT[:AT])
    record = rstack.record(model)
    assert (record["stop_reason"], record["truncated"]) == ("stop", 0)
    assert [a["outcome"] for a in record["attempts"]] == ["answered", "answered"]
    assert record["input_tokens"] == 2 * INPUT_TOKENS  # both answers' usage, summed
    assert record["output_tokens"] == -(-AT // 6) + -(-(len(TEXT) - AT) // 6)


@pytest.mark.parametrize("client", list(CLIENTS))
def test_the_client_sees_the_continuations_own_stop(rstack, client):
    """Cut at max tokens again: the continuation's stop is what the client is told."""
    model = rstack.scripted(
        "rc", "anthropic", Stream(TEXT[:AT], end="length"), Stream(TEXT[AT:60], end="length")
    )
    seen = CLIENTS[client](rstack, model)
    assert (seen.text, seen.stop) == (TEXT[:60], LENGTH[client])
    record = rstack.record(model)
    assert (record["stop_reason"], record["truncated"], record["cut_reason"]) == (
        "length",
        1,
        "length",
    )
    assert record["recovered"]["causes"] == ["length"]  # the first cut, kept beside the last


@pytest.mark.parametrize(("client", "wire"), [("chat", "openai"), ("messages", "anthropic")])
def test_without_max_tokens_continue_a_length_stop_comes_through_unchanged(rstack, client, wire):
    """The `mid` routes have only the top-level table: mid_stream on, max_tokens off."""
    model = rstack.scripted("mid", wire, Stream(TEXT[:AT], end="length"), Stream(TEXT[AT:]))
    seen = CLIENTS[client](rstack, model)
    assert (seen.text, seen.stop) == (TEXT[:AT], LENGTH[client])
    assert len(rstack.requests(model)) == 1


def test_a_relayed_finish_at_max_tokens_is_sent_when_no_target_continues(rstack):
    """The OpenAI relay holds the `length` finish while a continuation may follow; when every
    target refuses, the held finish (and the usage chunk after it) still goes out, once."""
    model = rstack.scripted("fb", "openai", Stream(TEXT[:AT], end="length"), Stream("", status=400))
    asked = {"stream_options": {"include_usage": True}}
    objects = data_objects(raw_stream(rstack, "chat", model, **asked)[1])
    finishes = [o["choices"][0]["finish_reason"] for o in objects if o.get("choices")]
    assert [f for f in finishes if f] == ["length"]
    text = "".join(
        o["choices"][0]["delta"].get("content") or "" for o in objects if o.get("choices")
    )
    assert text == TEXT[:AT]
    assert any("usage" in o for o in objects)
    assert objects[-2]["gateway"]["truncated"] is True and "recovered" not in objects[-2]["gateway"]


def scrape(rstack: RecoveryStack) -> dict[tuple[str, ...], float]:
    with urllib.request.urlopen(rstack.url + "/metrics", timeout=10) as reply:
        text = reply.read().decode()
    found = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == "gateway_recovered_exchanges_total":
                key = (sample.labels["provider"], sample.labels["cause"])
                found[key] = found.get(key, 0.0) + sample.value  # summed over the models
    return found


def records(rstack: RecoveryStack) -> list[AuditRecord]:
    async def read() -> list[AuditRecord]:
        store = SQLiteStore(str(rstack.db))
        await store.open()
        try:
            return list(await store.fetch())
        finally:
            await store.close()

    return asyncio.run(read())


def test_recovered_exchanges_are_counted_in_metrics_audit_and_dashboard(rstack):
    before = scrape(rstack)
    broken = rstack.scripted(
        "rc", "gemini", Stream(TEXT, cut_at=AT, how="error"), Stream(TEXT[AT:])
    )
    cut = rstack.scripted("rc", "gemini", Stream(TEXT[:AT], end="length"), Stream(TEXT[AT:]))
    plain = rstack.scripted("rc", "gemini", Stream(TEXT))
    for model in (broken, cut, plain):
        assert CLIENTS["chat"](rstack, model).text == TEXT
        rstack.record(model)  # written
    after = scrape(rstack)
    assert after[("gm", "upstream_error")] - before.get(("gm", "upstream_error"), 0) == 1
    assert after[("gm", "length")] - before.get(("gm", "length"), 0) == 1
    everything = records(rstack)
    mine = [r for r in everything if r.model in (broken, cut, plain)]
    (summary,) = summarize(mine, "provider")
    assert (summary.requests, summary.recovered) == (3, 2)
    by_provider = {s.group: s for s in summarize(everything, "provider")}
    expected = sum(1 for r in everything if r.provider == "gm" and r.recovered)

    async def dashboard() -> dict[str, int]:
        store = SQLiteStore(str(rstack.db))
        await store.open()
        try:
            groups = await aggregate.summarize(store, "provider", Window(None, None, None, None))
            return {s.group: s.recovered for s in groups}
        finally:
            await store.close()

    assert asyncio.run(dashboard())["gm"] == by_provider["gm"].recovered == expected


def whole(rstack: RecoveryStack, client: str, model: str) -> tuple[str, str, dict | None]:
    """(text, stop, gateway object) of a non-streamed answer, through the client's SDK."""
    if client == "chat":
        reply = rstack.openai().chat.completions.create(
            model=model, messages=[{"role": "user", "content": "Tell me"}]
        )
        choice = reply.choices[0]
        return choice.message.content or "", choice.finish_reason, reply.model_extra["gateway"]
    if client == "messages":
        message = rstack.anthropic().messages.create(
            model=model, max_tokens=256, messages=[{"role": "user", "content": "Tell me"}]
        )
        texts = [block.text for block in message.content if block.type == "text"]
        assert len(texts) == 1
        return texts[0], message.stop_reason or "", message.model_extra["gateway"]
    response = rstack.openai().responses.create(model=model, input="Tell me")
    reason = response.incomplete_details.reason if response.incomplete_details else None
    return response.output_text, reason or response.status, response.model_extra["gateway"]


@pytest.mark.parametrize("wire", list(WIRES))
@pytest.mark.parametrize("client", list(CLIENTS))
def test_a_whole_answer_cut_at_max_tokens_is_continued(rstack, client, wire):
    model = rstack.scripted("rc", wire, Stream(TEXT[:AT], end="length"), Stream(TEXT[AT - 6 :]))
    text, stop, ext = whole(rstack, client, model)
    assert (text, stop) == (TEXT, COMPLETE[client])  # " the la" repeated, and trimmed
    assert ext is not None and ext["recovered"]["causes"] == ["length"]
    seen = rstack.requests(model)
    assert len(seen) == 2 and not seen[1].body.get("stream")
    assert last_turns(seen[1]) == expected_continuation(wire, TEXT[:AT])
    record = rstack.record(model)
    assert (record["stream"], record["stop_reason"], record["truncated"]) == (0, "stop", 0)
    assert record["input_tokens"] == 2 * INPUT_TOKENS


@pytest.mark.parametrize("client", list(CLIENTS))
def test_a_whole_answer_is_not_continued_without_max_tokens_continue(rstack, client):
    model = rstack.scripted("mid", "openai", Stream(TEXT[:AT], end="length"), Stream(TEXT[AT:]))
    text, stop, ext = whole(rstack, client, model)
    assert (text, stop) == (TEXT[:AT], LENGTH[client])
    assert ext is not None and "recovered" not in ext
    assert len(rstack.requests(model)) == 1
