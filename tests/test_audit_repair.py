"""A record the store cannot hold: refused as such, repaired or set aside, never blocking the rest.

The stores tell a value they cannot hold (`RecordRejected`) from being down (anything else); the
writer splits a refused batch so every good record lands, writes the bad one with the fields it
could not hold emptied, and sets aside, counted, only what even that cannot save.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import math
import time
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from gateway.audit import conform
from gateway.audit.conform import REPAIRS, check, repaired
from gateway.audit.migrations import LATEST_VERSION, MIGRATIONS, Migration
from gateway.audit.record import AuditRecord, coerce_text
from gateway.audit.store import RecordRejected
from gateway.audit.writer import AuditWriter
from gateway.formats.shape import INT64_MAX
from gateway.formats.shape import count as coerce_count
from tests.audit_util import (
    BACKENDS,
    Backend,
    FakeStore,
    full_record,
    open_backend,
    sparse_record,
)


@pytest.fixture(params=BACKENDS)
async def backend(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Backend]:
    async with open_backend(request.param, tmp_path) as b:
        yield b


# Values some store cannot hold in that field, each with what the repair makes of it.
UNHOLDABLE: dict[str, tuple[str, Any, Any]] = {
    "int64_overflow": ("input_tokens", 2**63, None),
    "list_in_int": ("output_tokens", [1, 2], None),
    "str_in_int": ("cache_read_tokens", "12", None),
    "float_in_int": ("cache_creation_tokens", 1.5, None),
    "bool_in_int": ("input_tokens", True, None),
    "int32_overflow": ("tool_calls", 2**40, 0),
    "str_in_bool": ("truncated", "yes", False),
    "int_in_optional_bool": ("terminator_seen", 1, None),
    "dict_in_text": ("native_stop_reason", {"reason": "x"}, None),
    "lone_surrogate": ("model", "gpt-\ud800", "gpt-\ufffd"),
    "str_in_real": ("first_byte_at", "soon", None),
    "unserializable_json": ("parse_failures", [{"offset": object()}], [{"offset": None}]),
    "int_beyond_json": ("withheld_tool_calls", [{"id": "c", "n": 2**70}], [{"id": "c", "n": None}]),
    "nul_in_text": ("model", "a\x00b", "a\ufffdb"),
    "nul_in_json": ("content", {"k\x00": ["v\x00"]}, {"k\ufffd": ["v\ufffd"]}),
    "negative_count": ("output_tokens", -1, None),
    "none_in_required_text": ("model", None, ""),
    "dict_in_name_list": ("dropped_fields", {"seed": 1}, None),
    "nul_in_name_list": ("dropped_fields", ["se\x00ed"], ["se\ufffded"]),
    "int32_overflow_in_drop_count": ("dropped_tools", 2**40, 0),
    "str_in_drop_count": ("dropped_input_items", "3", 0),
    "dict_in_response_id": ("response_id", {"id": "resp_1"}, None),
    "int_in_previous_response_id": ("previous_response_id", 7, None),
}


# --- the stores refuse such a value as a record problem ----------------------------------------


@pytest.mark.parametrize("case", UNHOLDABLE)
async def test_a_value_the_store_cannot_hold_is_refused_as_a_record_problem(
    backend: Backend, case: str
) -> None:
    name, value, _ = UNHOLDABLE[case]
    store = backend.store()
    await store.open()
    with pytest.raises(RecordRejected):
        await store.write([full_record(1), full_record(2, **{name: value})])
    assert await backend.count() == 0  # one transaction: the good record went back too
    await store.write([full_record(1)])  # the store itself is fine
    assert await backend.count() == 1


async def test_an_escaped_backslash_before_u0000_is_text_not_a_nul(backend: Backend) -> None:
    """`\\u0000` typed out in a prompt is six characters of text, not NUL: kept exactly."""
    store = backend.store()
    content = {"text": "write \\u0000 in JSON", "deeper": ["\\\\u0000"]}
    await store.write([full_record(1, content=content)])
    [got] = await store.fetch()
    assert got.content == content


def refusing(model: str) -> tuple[Migration, ...]:
    """The migrations plus a test-only one after which the store refuses records of `model`:
    a constraint the database enforces and `check` knows nothing of."""
    extra = Migration(
        LATEST_VERSION + 1,
        "test: refuse a model",
        {
            "sqlite": [
                "CREATE TRIGGER test_refuse BEFORE INSERT ON audit_records "
                f"WHEN NEW.model = '{model}' BEGIN SELECT RAISE(ABORT, 'refused'); END"
            ],
            "postgresql": [
                f"ALTER TABLE audit_records ADD CONSTRAINT test_refuse CHECK (model <> '{model}')"
            ],
        },
    )
    return (*MIGRATIONS, extra)


async def test_a_row_the_database_refuses_is_a_record_problem(backend: Backend) -> None:
    store = backend.store(migrations=refusing("never"))
    with pytest.raises(RecordRejected) as refused:
        await store.write([full_record(1), full_record(2, model="never")])
    cause = "IntegrityError" if backend.kind == "sqlite" else "CheckViolationError"
    assert type(refused.value.__cause__).__name__ == cause
    assert "never" not in str(refused.value)
    assert await backend.count() == 0
    await store.write([full_record(1)])
    assert await backend.count() == 1


# Values of every kind a field may be given, plainly fine or not, for the check's plans.
PALETTE: tuple[Any, ...] = (
    None, "", "x", "héllo", "a\x00b", "gpt-\ud800", 0, -1, 7, 2**31, 2**63 - 1, 2**63,
    1.5, 1e308, math.nan, math.inf, -math.inf, True, False, [], {}, [1], {"a": 1},
)  # fmt: skip


def _refusal(run: Any, record: AuditRecord) -> str | None:
    try:
        run(record)
    except RecordRejected as exc:
        return exc.field
    return None


@pytest.mark.parametrize("start", [full_record, sparse_record])
def test_the_check_refuses_what_checking_each_field_refuses(start: Any) -> None:
    """`check` passes a record by a plan made once for its types; whatever it passes, the
    field-by-field check passes too, and it refuses the same field. Each value of the palette
    in each field, alone and beside a second one, and three times of 1e308 (their sum
    overflows); every record twice, the second time by the plan kept."""
    each = lambda record: conform._check_each(conform._VALUES(record))  # noqa: E731
    names = list(REPAIRS)
    for at, name in enumerate(names):
        for value in PALETTE:
            second = names[(at + 9) % len(names)]
            for overrides in (
                {name: value},
                {name: value, second: PALETTE[(at * 5) % len(PALETTE)]},
            ):
                record = dataclasses.replace(start(3), **overrides)
                expected = _refusal(each, record)
                assert _refusal(check, record) == expected, overrides
                assert _refusal(check, record) == expected, overrides
    times = {"started_at": 1e308, "first_byte_at": 1e308, "ended_at": 1e308}
    overflowing = dataclasses.replace(start(4), **times)
    assert _refusal(check, overflowing) is _refusal(each, overflowing) is None
    assert conform._PLANS  # the plans were made and kept


# --- the repair --------------------------------------------------------------------------------


def test_every_field_has_a_repair() -> None:
    assert set(REPAIRS) == {f for f in AuditRecord.__dataclass_fields__}


def test_a_sound_record_is_left_as_it_is() -> None:
    record = full_record(1)
    assert repaired(record) == record


@pytest.mark.parametrize("case", UNHOLDABLE)
def test_repair_empties_exactly_the_field_that_cannot_be_held(case: str) -> None:
    name, value, fixed = UNHOLDABLE[case]
    result = repaired(full_record(1, **{name: value}))
    assert result is not None
    assert getattr(result, name) == fixed
    assert result == full_record(1, **{name: fixed})


@pytest.mark.parametrize(
    "overrides",
    [{"id": ["req"]}, {"started_at": math.nan}, {"started_at": "now"}, {"client_format": None}],
)
def test_a_record_without_identity_cannot_be_repaired(overrides: dict[str, Any]) -> None:
    assert repaired(full_record(1, **overrides)) is None


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (0, 0),
        (1234, 1234),
        (INT64_MAX, INT64_MAX),
        (INT64_MAX + 1, None),
        (-1, None),
        (12.0, 12),
        (12.5, None),
        (math.inf, None),
        (math.nan, None),
        (True, None),
        ("12", None),
        ([1], None),
        (None, None),
    ],
)
def test_coerce_count(value: object, expected: int | None) -> None:
    got = coerce_count(value)
    assert got == expected and type(got) is type(expected)


def test_coerce_count_with_a_smaller_limit() -> None:
    assert coerce_count(2**31 - 1, limit=2**31 - 1) == 2**31 - 1
    assert coerce_count(2**31, limit=2**31 - 1) is None


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("gpt-4o", "gpt-4o"),
        ("", ""),
        ("a\x00b", "a\ufffdb"),
        ("x\udc80y", "x\ufffdy"),
        ("\x1b[31m", "\x1b[31m"),  # control characters are data here; renderers escape them
        (5, None),
        (None, None),
        (b"bytes", None),
    ],
)
def test_coerce_text(value: object, expected: str | None) -> None:
    assert coerce_text(value) == expected


# --- the writer --------------------------------------------------------------------------------


async def test_one_unholdable_record_does_not_block_the_trail(backend: Backend) -> None:
    """The issue's case: 2**63 in the usage and a list in an int field, amid good records, and
    more exchanges behind them than the queue holds."""
    store = backend.store()
    await store.open()
    writer = AuditWriter(store, max_queue=8, batch_size=16, retry_initial=0.01, linger=0.05)
    writer.start()
    bad = {3: {"input_tokens": 2**63}, 7: {"output_tokens": [1, 2]}}
    started = time.monotonic()
    for i in range(50):
        await asyncio.wait_for(writer.submit(full_record(i, **bad.get(i, {}))), 2)
    assert await asyncio.wait_for(writer.close(), 5) == 0
    assert time.monotonic() - started < 5

    got = {r.id: r for r in await store_fetch(backend)}
    assert sorted(got) == [f"req-{i:05d}" for i in range(50)]
    assert got["req-00003"] == full_record(3, input_tokens=None)
    assert got["req-00007"] == full_record(7, output_tokens=None)
    assert got["req-00004"] == full_record(4)
    assert writer.repaired_records == 2 and writer.rejected_records == 0


async def test_a_record_beyond_repair_is_set_aside_counted_and_logged_by_class(
    backend: Backend, caplog: pytest.LogCaptureFixture
) -> None:
    store = backend.store()
    rejected: list[int] = []
    writer = AuditWriter(
        store, batch_size=10, on_rejected=lambda: rejected.append(writer.rejected_records)
    )
    records = [full_record(i) for i in range(6)]
    records[2] = full_record(2, id=["SECRET-id"], model="SECRET-model")
    for record in records:
        await writer.submit(record)
    with caplog.at_level(logging.WARNING, logger="gateway.audit"):
        writer.start()
        assert await asyncio.wait_for(writer.close(), 5) == 0
    assert sorted(r.id for r in await store_fetch(backend)) == [
        f"req-{i:05d}" for i in (0, 1, 3, 4, 5)
    ]
    assert writer.rejected_records == 1 and rejected == [1]
    assert "set aside" in caplog.text
    assert "SECRET" not in caplog.text


async def test_a_record_still_refused_once_repaired_is_set_aside(
    backend: Backend, caplog: pytest.LogCaptureFixture
) -> None:
    store = backend.store(migrations=refusing("never"))
    rejected: list[None] = []
    writer = AuditWriter(store, batch_size=8, on_rejected=lambda: rejected.append(None))
    for i in range(8):
        await writer.submit(full_record(i, model="never" if i == 5 else f"m{i}"))
    with caplog.at_level(logging.WARNING, logger="gateway.audit"):
        writer.start()
        assert await asyncio.wait_for(writer.close(), 5) == 0
    assert sorted(r.id for r in await store_fetch(backend)) == [
        f"req-{i:05d}" for i in range(8) if i != 5
    ]
    assert writer.rejected_records == 1 and writer.repaired_records == 0 and len(rejected) == 1
    refused_by = "IntegrityError" if backend.kind == "sqlite" else "CheckViolationError"
    assert refused_by in caplog.text and "never" not in caplog.text
    assert writer.depth == 0


async def test_a_store_that_is_down_is_retried_not_split() -> None:
    store = FakeStore(fail_times=3)
    writer = AuditWriter(store, batch_size=10, retry_initial=0.01)
    for i in range(6):
        await writer.submit(full_record(i))
    writer.start()
    assert await writer.close() == 0
    assert store.batches == [6] and writer.rejected_records == 0 and writer.repaired_records == 0


async def store_fetch(backend: Backend) -> Sequence[AuditRecord]:
    reader = backend.store()
    try:
        return await reader.fetch()
    finally:
        await reader.close()
