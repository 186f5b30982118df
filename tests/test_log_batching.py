"""gateway.logs.LoopBatchedHandler: info lines logged on a loop go out together, in one write,
at most LINGER later; a warning goes out at once, after the lines before it; without a loop
every line is written at once; `flush` writes what waits."""

from __future__ import annotations

import asyncio
import io
import logging
from collections.abc import Iterator

import orjson
import pytest

from gateway import logs


class CountingStream(io.StringIO):
    def __init__(self) -> None:
        super().__init__()
        self.writes = 0

    def write(self, text: str) -> int:
        self.writes += 1
        return super().write(text)


@pytest.fixture
def logged() -> Iterator[tuple[logging.Logger, CountingStream]]:
    stream = CountingStream()
    handler = logs.LoopBatchedHandler(stream)
    handler.setFormatter(logs.JsonFormatter())
    logger = logging.getLogger("test.batching")
    logger.handlers[:] = [handler]
    logger.propagate = False
    logger.setLevel(logging.INFO)
    yield logger, stream
    logger.handlers[:] = []


def messages(stream: CountingStream) -> list[str]:
    return [orjson.loads(line)["message"] for line in stream.getvalue().splitlines()]


async def test_info_lines_on_a_loop_are_written_together_after_the_linger(logged) -> None:
    logger, stream = logged
    for n in range(50):
        logger.info("exchange %d", n, extra={logs.FIELDS: b'{"id":"r"}'})
    assert stream.writes == 0  # waiting for the timer
    await asyncio.sleep(logs.LINGER * 2)
    assert stream.writes == 1
    assert messages(stream) == [f"exchange {n}" for n in range(50)]
    assert orjson.loads(stream.getvalue().splitlines()[0])["id"] == "r"


async def test_a_warning_is_written_at_once_after_the_lines_before_it(logged) -> None:
    logger, stream = logged
    logger.info("first")
    logger.warning("second")
    assert messages(stream) == ["first", "second"]
    logger.info("third")
    await asyncio.sleep(logs.LINGER * 2)
    assert messages(stream) == ["first", "second", "third"]


def test_without_a_loop_each_line_is_written_at_once(logged) -> None:
    logger, stream = logged
    logger.info("one")
    assert messages(stream) == ["one"]
    logger.info("two")
    assert messages(stream) == ["one", "two"]


async def test_a_full_batch_is_written_without_waiting(logged) -> None:
    logger, stream = logged
    big = "x" * 1000
    for _ in range(logs.BATCH // 1000 + 1):
        logger.info(big)
    assert stream.writes == 1


async def test_flush_writes_what_waits(logged) -> None:
    logger, stream = logged
    logger.info("waiting")
    logger.handlers[0].flush()
    assert messages(stream) == ["waiting"]


def test_info_fields_writes_the_line_logging_would(logged) -> None:
    logger, stream = logged
    logger.propagate = True  # the root's handler, as `configure` sets it up
    logger.handlers[:] = []
    root = logging.getLogger()
    saved = root.handlers[:]
    handler = logs.LoopBatchedHandler(stream, batching=False)
    handler.setFormatter(logs.JsonFormatter({"worker": 2}))
    root.handlers[:] = [handler]
    try:
        logs.info_fields(logger, "exchange", b'{"id":"r1","n":1}')
        logger.info("exchange", extra={logs.FIELDS: b'{"id":"r1","n":1}'})
    finally:
        root.handlers[:] = saved
    direct, through_logging = (orjson.loads(line) for line in stream.getvalue().splitlines())
    assert direct.pop("ts")[:19] == through_logging.pop("ts")[:19]
    assert (
        direct
        == through_logging
        == {
            "level": "info",
            "logger": "test.batching",
            "message": "exchange",
            "worker": 2,
            "id": "r1",
            "n": 1,
        }
    )


def test_info_fields_goes_through_logging_when_others_listen(caplog) -> None:
    caplog.set_level(logging.INFO)
    logs.info_fields(logging.getLogger("test.captured"), "exchange", b'{"id":"r2"}')
    (record,) = [r for r in caplog.records if r.name == "test.captured"]
    assert vars(record)[logs.FIELDS] == b'{"id":"r2"}'
