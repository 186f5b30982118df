"""The background audit writer: records leave the request path through a bounded queue.

    writer = AuditWriter(
        store, on_depth=gauge.set, on_backpressure=counter.inc, on_rejected=rejected.inc
    )
    writer.start()
    await writer.submit(record)        # at the end of each exchange: an enqueue, never a write
    ...
    await writer.close(timeout=10)     # at shutdown: flush everything queued, close the store

Nothing is dropped while the store is down. When the queue is full, `submit` waits for room
(back-pressure, reported through `on_backpressure`), and a batch the store failed to take is
retried with a growing delay until it lands. Only `close` gives up, after its timeout, and says
how many records it could not write.

A record the store cannot hold (`RecordRejected`: 2**63 tokens, a list in a count) would fail
every retry and stall the trail behind it, so it is not retried: the batch is split in halves
until the good records have landed, the bad one is written with the fields it cannot hold
emptied (`repaired_records`), and only one that cannot be written even so is set aside
(`rejected_records`, `on_rejected`). Failures are logged by exception class only: a driver's
message may quote the data.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence

from gateway.audit.conform import repaired
from gateway.audit.record import AuditRecord
from gateway.audit.store import AuditStore, RecordRejected

log = logging.getLogger("gateway.audit")


class AuditWriter:
    """Drains a bounded queue of records into `store` in batches of up to `batch_size`.

    `depth` counts records accepted but not yet written (queued or in the batch being written);
    `on_depth(depth)` is called after each change of it.
    """

    def __init__(
        self,
        store: AuditStore,
        *,
        max_queue: int = 10_000,
        batch_size: int = 500,
        on_depth: Callable[[int], object] | None = None,
        on_backpressure: Callable[[], object] | None = None,
        on_rejected: Callable[[], object] | None = None,
        retry_initial: float = 0.05,
        retry_max: float = 5.0,
        linger: float = 0.02,
    ) -> None:
        if max_queue < 1 or batch_size < 1:
            raise ValueError("max_queue and batch_size must be at least 1")
        self.store = store
        self._queue: asyncio.Queue[AuditRecord | None] = asyncio.Queue(maxsize=max_queue)
        self._batch_size = batch_size
        self._on_depth = on_depth
        self._on_backpressure = on_backpressure
        self._on_rejected = on_rejected
        self._retry_initial = retry_initial
        self._retry_max = retry_max
        # At low traffic each record would be a transaction of its own; waiting this long for
        # company after the first one turns them into batches (a record is durable <= linger
        # later; close() never waits for it).
        self._linger = linger
        self._pending = 0
        self._blocked = 0  # submits waiting for room
        self._unblocked = asyncio.Event()
        self._unblocked.set()
        self._task: asyncio.Task[None] | None = None
        self._closing = False
        self._closed: int | None = None  # unwritten count, once closed
        self.backpressure_events = 0
        self.write_failures = 0
        self.repaired_records = 0  # written with the fields the store refused emptied
        self.rejected_records = 0  # set aside: refused even so

    @property
    def depth(self) -> int:
        return self._pending

    def start(self) -> None:
        """Launch the drain task on the running loop (idempotent)."""
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._drain(), name="audit-writer")

    @property
    def full(self) -> bool:
        """`submit` would wait for room (or the writer is closed)."""
        return self._closing or self._queue.full()

    def submit_nowait(self, record: AuditRecord) -> None:
        """Queue `record` now; only when not `full` (asyncio.QueueFull otherwise)."""
        if self._closing:
            raise RuntimeError("the audit writer is closed")
        self._queue.put_nowait(record)
        self._pending += 1
        self._call(self._on_depth, self._pending)

    async def submit(self, record: AuditRecord) -> None:
        """Queue `record`; when the queue is full, wait for room rather than drop it."""
        if self._closing:
            raise RuntimeError("the audit writer is closed")
        try:
            self._queue.put_nowait(record)
        except asyncio.QueueFull:
            self.backpressure_events += 1
            self._call(self._on_backpressure)
            self._blocked += 1
            self._unblocked.clear()
            try:
                await self._queue.put(record)
            finally:
                self._blocked -= 1
                if not self._blocked:
                    self._unblocked.set()
        self._pending += 1
        self._call(self._on_depth, self._pending)

    async def close(self, timeout: float | None = 30.0) -> int:
        """Stop accepting, write everything queued, close the store; returns how many records
        could not be written within `timeout` seconds (0 unless the store stayed down)."""
        if self._closed is not None:
            return self._closed
        self._closing = True
        self.start()
        assert self._task is not None
        unwritten = 0
        try:
            await asyncio.wait_for(self._finish(self._task), timeout)
        except TimeoutError:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            unwritten = self._pending
            log.error("audit writer: %d records not written within %ss", unwritten, timeout)
        self._closed = unwritten
        await self.store.close()
        return unwritten

    async def _finish(self, task: asyncio.Task[None]) -> None:
        # Submits already waiting for room were accepted before close: let them in first, so
        # the stop marker is the last item queued.
        await self._unblocked.wait()
        await self._queue.put(None)
        await task

    async def _drain(self) -> None:
        while True:
            first = await self._queue.get()
            if first is None:
                return
            batch = [first]
            stop = False
            if self._linger and self._queue.empty() and not self._closing:
                await asyncio.sleep(self._linger)
            while len(batch) < self._batch_size:
                try:
                    item = self._queue.get_nowait()
                except asyncio.QueueEmpty:
                    break
                if item is None:
                    stop = True
                    break
                batch.append(item)
            await self._write(batch)
            self._pending -= len(batch)
            self._call(self._on_depth, self._pending)
            if stop:
                return

    async def _write(self, batch: Sequence[AuditRecord]) -> None:
        try:
            await self._write_while_down(batch)
        except RecordRejected as exc:
            if len(batch) == 1:
                await self._write_refused(batch[0], exc)
                return
            middle = len(batch) // 2
            await self._write(batch[:middle])
            await self._write(batch[middle:])

    async def _write_while_down(self, batch: Sequence[AuditRecord]) -> None:
        """Write `batch`, retrying while the store fails; a `RecordRejected` is not retried."""
        delay = self._retry_initial
        attempt = 0
        while True:
            try:
                await self.store.write(batch)
                return
            except RecordRejected:
                raise
            except Exception as exc:  # the store is down: retried until it lands
                attempt += 1
                self.write_failures += 1
                log.warning(
                    "audit write of %d records failed (%s), attempt %d; retrying in %.2fs",
                    len(batch),
                    type(exc).__name__,
                    attempt,
                    delay,
                )
            await asyncio.sleep(delay)
            delay = min(delay * 2, self._retry_max)

    async def _write_refused(self, record: AuditRecord, refused: RecordRejected) -> None:
        fixed = repaired(record)
        if fixed is not None and fixed != record:
            try:
                await self._write_while_down([fixed])
            except RecordRejected as again:
                refused = again
            else:
                self.repaired_records += 1
                log.warning(
                    "audit record refused by the store (%s); written with the fields it could "
                    "not hold emptied",
                    _cause(refused),
                )
                return
        self.rejected_records += 1
        log.error(
            "audit record set aside: the store cannot hold it, and no repair helps (%s); "
            "%d set aside",
            _cause(refused),
            self.rejected_records,
        )
        self._call(self._on_rejected)

    @staticmethod
    def _call(hook: Callable[..., object] | None, *args: object) -> None:
        """Run a metrics hook; a broken hook must not stop the trail."""
        if hook is None:
            return
        try:
            hook(*args)
        except Exception as exc:
            log.warning("audit writer hook %r failed (%s)", hook, type(exc).__name__)


def _cause(refused: RecordRejected) -> str:
    """The refusing exception's class, and the field when the store named it: never a message."""
    cause = refused.__cause__ or refused
    name = type(cause).__name__
    return f"{name}, field {refused.field}" if refused.field else name
