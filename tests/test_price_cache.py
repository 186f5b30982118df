"""The price child's answers kept on disk (gateway.price_cache): a start with an answer of the
installed table for its providers runs no child and prices exactly as the child's answer does;
another table's answers are never read; a kept answer that does not read is dropped (the whole
table prices meanwhile); a cache that cannot be written costs nothing but the saving."""

from __future__ import annotations

import asyncio
from pathlib import Path

from gateway.price_cache import PriceCache, table_stamp
from gateway.price_subset import PendingPrices, hints_of
from gateway.price_table import whole_table
from gateway.settings import parse_settings

SETTINGS = parse_settings(
    {
        "providers": {
            "o": {"kind": "openai", "base_url": "http://127.0.0.1:9/v1"},
            "a": {"kind": "anthropic", "base_url": "http://127.0.0.1:9"},
        }
    }
)


def started(cache: PriceCache) -> PendingPrices:
    pending = PendingPrices.begin(cache)
    pending.ask(SETTINGS)
    return pending


def test_an_answer_is_kept_and_the_next_start_runs_no_child(tmp_path: Path) -> None:
    cache = PriceCache(tmp_path / "cache", table_stamp())
    first = started(cache)
    assert first.process is not None  # nothing kept yet: the child
    answer = first.answer()
    assert answer and cache.read(hints_of(SETTINGS) or {}) == answer
    again = started(cache)
    assert again.process is None and again.cached == answer
    one, two = asyncio.run(first.result()), asyncio.run(again.result())
    assert dict(one.providers) == dict(two.providers) == {"o": "openai", "a": "anthropic"}
    assert [p.id for p in two.table.providers] == [p.id for p in one.table.providers]
    assert two.table is not whole_table()


def test_another_providers_answer_is_not_theirs(tmp_path: Path) -> None:
    cache = PriceCache(tmp_path, table_stamp())
    started(cache).answer()
    other = parse_settings({"providers": {"g": {"kind": "openai", "base_url": "https://x.io/v1"}}})
    pending = PendingPrices.begin(cache)
    assert pending.process is None  # an answer of this table is kept: the child waits for ask
    pending.ask(other)
    assert pending.cached is None and pending.process is not None  # none for these: the child
    pending.abandon()


def test_another_tables_answers_are_never_read(tmp_path: Path) -> None:
    started(PriceCache(tmp_path, "an-older-table")).answer()
    pending = PendingPrices.begin(PriceCache(tmp_path, table_stamp()))
    assert pending.process is not None
    pending.abandon()


def test_a_kept_answer_that_does_not_read_is_dropped(tmp_path: Path) -> None:
    cache = PriceCache(tmp_path, table_stamp())
    hints = hints_of(SETTINGS) or {}
    cache.write(hints, b"not a pickle")
    pending = started(cache)
    assert pending.process is None and pending.cached == b"not a pickle"
    prices = asyncio.run(pending.result())
    assert prices.table is whole_table()  # still priced right, with the whole table
    assert cache.read(hints) is None


def test_a_cache_that_cannot_be_written_costs_nothing_but_the_saving(tmp_path: Path) -> None:
    blocked = tmp_path / "a-file"
    blocked.write_text("")
    cache = PriceCache(blocked / "cache", table_stamp())  # under a file: mkdir fails
    pending = started(cache)
    assert pending.answer() and not cache.has_stamp()
    assert dict(asyncio.run(pending.result()).providers) == {"o": "openai", "a": "anthropic"}


def test_the_stamp_is_stable_and_the_folder_private(tmp_path: Path) -> None:
    assert table_stamp() == table_stamp()
    cache = PriceCache(tmp_path / "c", table_stamp())
    started(cache).answer()
    assert (tmp_path / "c").stat().st_mode & 0o777 == 0o700
