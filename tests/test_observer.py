"""The observer: in-flight accounting that shutdown waits on before closing the writer, and
when a finished exchange is handed over (after its answer is written)."""

from __future__ import annotations

import asyncio
import time
import uuid
from typing import Any

import pytest

from gateway.audit.record import AuditRecord
from gateway.lean_http import LeanConnection
from gateway.metrics import GatewayMetrics
from gateway.observer import ExchangeObserver
from tests.conftest import Stack, openai_client


def started_with(writer: object) -> ExchangeObserver:
    """An observer handing records to `writer`, with one exchange started."""
    observer = ExchangeObserver(GatewayMetrics())
    observer.writer = writer  # type: ignore[assignment]
    observer.started()
    return observer


class SlowWriter:
    def __init__(self) -> None:
        self.release = asyncio.Event()
        self.records: list[AuditRecord] = []

    async def submit(self, record: AuditRecord) -> None:
        await self.release.wait()
        self.records.append(record)


async def test_wait_idle_waits_until_every_record_is_handed_over():
    writer = SlowWriter()
    observer = started_with(writer)
    record = AuditRecord("r1", 0.0, "openai", stream=False)
    finishing = asyncio.create_task(observer.finished(record))
    assert await observer.wait_idle(timeout=0.05) is False  # submit still blocked
    assert observer.in_flight == 1
    writer.release.set()
    assert await observer.wait_idle(timeout=1.0) is True
    await finishing
    assert writer.records == [record]
    assert observer.in_flight == 0


async def test_idle_from_the_start_and_after_a_failing_finish():
    observer = ExchangeObserver(GatewayMetrics())
    assert await observer.wait_idle(timeout=0.01) is True

    class Broken:
        async def submit(self, record: AuditRecord) -> None:
            raise RuntimeError("closed")

    observer.writer = Broken()  # type: ignore[assignment]
    observer.started()
    with pytest.raises(RuntimeError):
        await observer.finished(AuditRecord("r2", 0.0, "anthropic", stream=True))
    assert observer.in_flight == 0
    assert await observer.wait_idle(timeout=0.01) is True


class FullThenRoomy:
    """A writer whose queue is full when first asked, then takes records."""

    def __init__(self) -> None:
        self.full = True
        self.records: list[AuditRecord] = []

    async def submit(self, record: AuditRecord) -> None:
        self.records.append(record)


async def test_finish_soon_hands_over_in_the_next_turn_or_waits_in_a_task():
    writer = FullThenRoomy()
    observer = started_with(writer)
    record = AuditRecord("r3", 0.0, "openai", stream=False)
    # The queue filled after the exchange looked: the record waits in a task, never dropped.
    observer.finish_soon(record)
    assert observer.in_flight == 1 and writer.records == []  # not before the loop's next turn
    assert await observer.wait_idle(timeout=1.0) is True
    assert writer.records == [record] and observer.in_flight == 0


def test_a_whole_answer_is_written_before_its_record_is_reported(
    stack: Stack, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The metrics, the log line and the audit queue run after the answer went out, so the
    client does not wait for them; the record still comes."""
    events: list[str] = []
    write_whole = LeanConnection._write_whole
    report = ExchangeObserver._report

    def written(self: LeanConnection, *args: Any) -> bool:
        events.append("written")
        return write_whole(self, *args)

    def reported(self: ExchangeObserver, record: AuditRecord, *args: Any) -> None:
        if record.model == model:
            events.append("reported")
        report(self, record, *args)

    model = f"mock-order-{uuid.uuid4().hex[:8]}"
    monkeypatch.setattr(LeanConnection, "_write_whole", written)
    monkeypatch.setattr(ExchangeObserver, "_report", reported)
    reply = openai_client(stack).chat.completions.create(
        model=model, messages=[{"role": "user", "content": "hi"}]
    )
    assert reply.choices[0].message.content
    deadline = time.monotonic() + 5
    while "reported" not in events and time.monotonic() < deadline:
        time.sleep(0.01)
    assert events == ["written", "reported"]
