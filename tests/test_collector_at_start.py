"""`gateway serve` and a worker start with the garbage collector off (its collections during the
imports were 30-50 ms of CPU before the first answer); once the process listens,
`settle_collector` collects the start's garbage, freezes what start-up made, and turns the
collector back on: a serving process never runs without it."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator

import pytest

from gateway.serving import settle_collector


@pytest.fixture
def collector_state() -> Iterator[None]:
    enabled = gc.isenabled()
    yield
    gc.unfreeze()
    if enabled:
        gc.enable()
    else:
        gc.disable()


class Cycle:
    def __init__(self) -> None:
        self.me = self


def test_settle_collector_collects_the_start_freezes_it_and_turns_the_collector_on(
    collector_state: None,
) -> None:
    gc.unfreeze()
    gc.disable()
    garbage = Cycle()
    gone = weakref.ref(garbage)
    alive = Cycle()
    del garbage  # a cycle: only the collector frees it, and the collector is off
    assert gone() is not None
    settle_collector()
    assert gone() is None  # collected before the freeze, not frozen with the rest
    assert gc.isenabled()
    assert gc.get_freeze_count() > 0  # what start-up made is out of the collector's walks
    assert alive.me is alive
