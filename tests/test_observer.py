"""The observer: in-flight accounting that shutdown waits on before closing the writer."""

from __future__ import annotations

import asyncio

import pytest

from gateway.audit.record import AuditRecord
from gateway.metrics import GatewayMetrics
from gateway.observer import ExchangeObserver


class SlowWriter:
    def __init__(self) -> None:
        self.release = asyncio.Event()
        self.records: list[AuditRecord] = []

    async def submit(self, record: AuditRecord) -> None:
        await self.release.wait()
        self.records.append(record)


async def test_wait_idle_waits_until_every_record_is_handed_over():
    observer = ExchangeObserver(GatewayMetrics())
    writer = SlowWriter()
    observer.writer = writer  # type: ignore[assignment]
    observer.started()
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
