"""The background audit writer: nothing dropped, nothing written on the request path."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Sequence
from pathlib import Path

import pytest

from gateway.audit.record import AuditRecord
from gateway.audit.writer import AuditWriter
from tests.audit_util import BACKENDS, Backend, FakeStore, full_record, open_backend


@pytest.fixture(params=BACKENDS)
async def backend(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Backend]:
    async with open_backend(request.param, tmp_path) as b:
        yield b


async def test_n_concurrent_submits_give_exactly_n_rows(backend: Backend) -> None:
    n = 1000
    store = backend.store()
    await store.open()
    writer = AuditWriter(store, max_queue=100, batch_size=64)
    writer.start()

    async def exchange(i: int) -> None:
        await asyncio.sleep(0)  # interleave the submitters
        await writer.submit(full_record(i))

    await asyncio.gather(*(exchange(i) for i in range(n)))
    assert await writer.close() == 0
    assert writer.depth == 0
    assert await backend.count() == n
    ids = {r[0] for r in await backend.rows("SELECT id FROM audit_records")}
    assert ids == {f"req-{i:05d}" for i in range(n)}


async def test_submit_enqueues_and_never_waits_for_the_store() -> None:
    store = FakeStore()
    store.gate.clear()  # every write hangs until released
    writer = AuditWriter(store, max_queue=10)
    writer.start()
    started = time.monotonic()
    for i in range(5):
        await writer.submit(full_record(i))
    await asyncio.wait_for(store.write_started.wait(), 1)
    assert time.monotonic() - started < 0.5
    assert store.records == [] and writer.depth == 5
    store.gate.set()
    assert await writer.close() == 0
    assert [r.id for r in store.records] == [f"req-{i:05d}" for i in range(5)]


async def test_a_full_queue_applies_back_pressure_instead_of_dropping() -> None:
    store = FakeStore()
    store.gate.clear()
    pressure: list[int] = []
    writer = AuditWriter(
        store, max_queue=2, batch_size=1, on_backpressure=lambda: pressure.append(writer.depth)
    )
    writer.start()
    await writer.submit(full_record(0))
    await asyncio.wait_for(store.write_started.wait(), 1)  # record 0 is being written, held
    await writer.submit(full_record(1))
    await writer.submit(full_record(2))  # the queue (2) is full now
    assert pressure == []

    blocked = asyncio.create_task(writer.submit(full_record(3)))
    await asyncio.sleep(0.05)
    assert not blocked.done()  # waiting for room, not dropped and not failed
    assert pressure == [3] and writer.backpressure_events == 1
    assert writer.depth == 3

    store.gate.set()
    await asyncio.wait_for(blocked, 1)
    assert await writer.close() == 0
    assert [r.id for r in store.records] == [f"req-{i:05d}" for i in range(4)]
    assert store.batches == [1, 1, 1, 1]


async def test_slow_store_under_back_pressure_stores_everything(backend: Backend) -> None:
    real = backend.store()

    class Slow(FakeStore):
        async def write(self, records: Sequence[AuditRecord]) -> None:
            await asyncio.sleep(0.01)
            await real.write(records)

        async def close(self) -> None:
            await real.close()

    calls: list[None] = []
    writer = AuditWriter(
        Slow(), max_queue=2, batch_size=2, on_backpressure=lambda: calls.append(None)
    )
    writer.start()
    await asyncio.gather(*(writer.submit(full_record(i)) for i in range(30)))
    assert await writer.close() == 0
    assert len(calls) >= 10 and writer.backpressure_events == len(calls)
    assert await backend.count() == 30


async def test_a_store_failing_twice_loses_nothing(caplog: pytest.LogCaptureFixture) -> None:
    store = FakeStore(fail_times=2)
    writer = AuditWriter(store, batch_size=10, retry_initial=0.01)
    for i in range(5):
        await writer.submit(full_record(i))
    with caplog.at_level(logging.WARNING, logger="gateway.audit"):
        writer.start()
        assert await writer.close() == 0
    assert [r.id for r in store.records] == [f"req-{i:05d}" for i in range(5)]
    assert store.attempts == 3 and store.batches == [5] and writer.write_failures == 2
    warnings = [r.getMessage() for r in caplog.records if r.name == "gateway.audit"]
    assert len(warnings) == 2
    assert all("FlakyStoreError" in w and "5 records" in w for w in warnings)
    assert "SECRET" not in caplog.text and "req-00000" not in caplog.text  # class only


async def test_close_flushes_a_writer_never_started() -> None:
    store = FakeStore()
    writer = AuditWriter(store, batch_size=7)
    for i in range(100):
        await writer.submit(full_record(i))
    assert store.records == []
    assert await writer.close() == 0
    assert [r.id for r in store.records] == [f"req-{i:05d}" for i in range(100)]
    assert store.batches == [7] * 14 + [2]
    assert store.closed and writer.depth == 0


@pytest.mark.parametrize("release_first", [False, True])
async def test_close_lets_blocked_submitters_in_first(release_first: bool) -> None:
    """Submits waiting for room when close() starts were accepted: they must be written.

    With `release_first`, close() starts just as the store frees room, before the woken
    submitter has run: the close marker must still not overtake it."""
    store = FakeStore()
    store.gate.clear()
    writer = AuditWriter(store, max_queue=1, batch_size=1)
    writer.start()
    await writer.submit(full_record(0))
    await asyncio.wait_for(store.write_started.wait(), 1)
    await writer.submit(full_record(1))
    waiting = [asyncio.create_task(writer.submit(full_record(i))) for i in range(2, 6)]
    await asyncio.sleep(0.01)
    assert writer.backpressure_events == 4
    if release_first:
        store.gate.set()
        closing = asyncio.create_task(writer.close(timeout=None))
    else:
        closing = asyncio.create_task(writer.close())
        await asyncio.sleep(0.01)
        store.gate.set()
    assert await asyncio.wait_for(closing, 2) == 0
    await asyncio.wait_for(asyncio.gather(*waiting), 1)
    assert [r.id for r in store.records] == [f"req-{i:05d}" for i in range(6)]
    assert writer.depth == 0


async def test_submit_after_close_is_refused() -> None:
    writer = AuditWriter(FakeStore())
    await writer.close()
    with pytest.raises(RuntimeError, match="closed"):
        await writer.submit(full_record(0))
    assert await writer.close() == 0  # a second close is harmless


async def test_close_gives_up_after_its_timeout_on_a_dead_store() -> None:
    store = FakeStore(fail_forever=True)
    writer = AuditWriter(store, retry_initial=0.01, retry_max=0.02)
    for i in range(3):
        await writer.submit(full_record(i))
    started = time.monotonic()
    assert await writer.close(timeout=0.2) == 3
    assert time.monotonic() - started < 1
    assert store.records == [] and store.attempts >= 3 and store.closed


async def test_depth_hook_follows_every_change() -> None:
    depths: list[int] = []
    writer = AuditWriter(FakeStore(), batch_size=2, on_depth=depths.append)
    for i in range(3):
        await writer.submit(full_record(i))
    assert depths == [1, 2, 3]
    await writer.close()
    assert depths == [1, 2, 3, 1, 0]


async def test_a_broken_hook_does_not_stop_the_trail() -> None:
    store = FakeStore()

    def broken(*_: object) -> None:
        raise ZeroDivisionError

    writer = AuditWriter(store, on_depth=broken, on_backpressure=broken, max_queue=1)
    writer.start()
    await asyncio.gather(*(writer.submit(full_record(i)) for i in range(4)))
    assert await writer.close() == 0
    assert len(store.records) == 4


def test_bad_sizes_are_refused() -> None:
    with pytest.raises(ValueError):
        AuditWriter(FakeStore(), max_queue=0)
    with pytest.raises(ValueError):
        AuditWriter(FakeStore(), batch_size=0)
