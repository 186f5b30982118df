"""The pieces the attempt loop composes, alone: circuit states, retry delays, target order."""

from __future__ import annotations

import email.utils
import random
import time

import pytest

from gateway.resilience.balance import Balancer
from gateway.resilience.circuit import CLOSED, HALF_OPEN, OPEN, Circuits
from gateway.resilience.outcome import Outcome
from gateway.resilience.retry import RetryPolicy, retry_after_seconds
from gateway.settings import RetrySettings, parse_settings


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def circuits(failures: int = 2, cooldown: float = 10.0) -> tuple[Circuits, Clock, list]:
    clock = Clock()
    changes: list[tuple[str, str]] = []
    made = Circuits(failures, cooldown, clock=clock, on_state=lambda t, s: changes.append((t, s)))
    return made, clock, changes


def test_a_circuit_opens_after_failures_in_a_row_and_a_success_resets_the_count() -> None:
    c, _, changes = circuits()
    c.failed("t")
    c.succeeded("t")
    c.failed("t")
    assert c.admits("t") and c.state("t") == CLOSED  # not two in a row
    c.failed("t")
    assert c.state("t") == OPEN and not c.admits("t")
    assert changes == [("t", OPEN)]


def test_after_the_cooldown_one_probe_goes_and_its_outcome_decides() -> None:
    c, clock, changes = circuits()
    c.failed("t")
    c.failed("t")
    clock.now += 9.9
    assert not c.admits("t")
    clock.now += 0.2
    assert c.state("t") == HALF_OPEN
    assert c.admits("t")  # the probe
    assert not c.admits("t")  # one at a time
    c.failed("t")  # the probe failed: open again, for a new cool-down
    assert c.state("t") == OPEN and not c.admits("t")
    clock.now += 10.1
    assert c.admits("t")
    c.succeeded("t")
    assert c.state("t") == CLOSED and c.admits("t") and c.admits("t")
    assert changes == [("t", OPEN), ("t", HALF_OPEN), ("t", OPEN), ("t", HALF_OPEN), ("t", CLOSED)]


def test_a_probe_that_neither_succeeds_nor_fails_lets_the_next_one_go() -> None:
    c, clock, _ = circuits()
    c.failed("t")
    c.failed("t")
    clock.now += 11
    assert c.admits("t")
    c.released("t")  # the client left mid-probe
    assert c.admits("t")


def test_retry_in_is_the_time_to_the_first_half_open() -> None:
    c, clock, _ = circuits(failures=1)
    c.failed("a")
    clock.now += 4
    c.failed("b")
    assert c.retry_in(["a", "b"]) == pytest.approx(6.0)
    assert c.retry_in(["other"]) == 0.0


def test_no_circuit_with_failures_zero() -> None:
    c, _, _ = circuits(failures=0)
    for _ in range(100):
        c.failed("t")
    assert c.admits("t") and c.snapshot() == {}


def test_a_circuit_a_peer_opened_opens_here_for_the_rest_of_its_cooldown() -> None:
    c, clock, changes = circuits()
    c.opened_elsewhere("t", ago=4.0)
    assert not c.admits("t")
    assert c.snapshot()["t"]["half_open_in_s"] == pytest.approx(6.0)
    clock.now += 6.1
    assert c.admits("t")
    c.opened_elsewhere("u", ago=10.0)  # its cool-down is over already
    assert c.admits("u")
    local: list[tuple[str, str]] = []
    c.on_local = lambda t, s: local.append((t, s))
    c.opened_elsewhere("v", ago=1.0)
    assert local == []  # a peer's news is not sent back to the peers
    assert ("v", OPEN) in changes


@pytest.mark.parametrize(
    ("header", "seconds"),
    [("3", 3.0), ("0.25", 0.25), (" 7 ", 7.0), ("-4", 0.0), ("soon", None), ("", None)],
)
def test_retry_after_in_seconds(header: str, seconds: float | None) -> None:
    assert retry_after_seconds(header) == seconds


def test_retry_after_as_an_http_date() -> None:
    now = time.time()
    header = email.utils.formatdate(now + 30, usegmt=True)
    assert retry_after_seconds(header, now=now) == pytest.approx(30, abs=1)
    assert retry_after_seconds("Mon, 32 Foo 2026 99:00:00 GMT") is None


def policy(**table: float) -> RetryPolicy:
    return RetryPolicy(RetrySettings(**table))  # type: ignore[arg-type]


def test_a_new_target_is_tried_at_once_and_a_revisited_one_after_a_jittered_backoff() -> None:
    random.seed(7)
    retries = policy(attempts=5, backoff=1.0, max_backoff=4.0).begin(time.monotonic())
    failure = Outcome("error_status", retryable=True, status=503)
    assert retries.after_failure(failure, revisit=False) == 0.0
    waits = [retries.after_failure(failure, revisit=True) for _ in range(3)]
    assert all(w is not None for w in waits)
    assert 0 <= waits[0] <= 2.0 and 0 <= waits[1] <= 4.0 and 0 <= waits[2] <= 4.0  # type: ignore[operator]
    assert retries.after_failure(failure, revisit=True) is None  # five attempts made


def test_retry_after_is_a_floor_and_beyond_the_cap_it_ends_the_retries() -> None:
    retries = policy(backoff=0.01, max_retry_after=5).begin(time.monotonic())
    assert retries.after_failure(
        Outcome("error_status", retryable=True, retry_after="2"), revisit=True
    ) == pytest.approx(2.0)
    retries = policy(backoff=0.01, max_retry_after=5).begin(time.monotonic())
    assert (
        retries.after_failure(
            Outcome("error_status", retryable=True, retry_after="6"), revisit=True
        )
        is None
    )


def test_no_retry_past_the_deadline_nor_for_what_is_not_retryable() -> None:
    late = policy(deadline=1.0).begin(time.monotonic() - 2.0)
    assert late.after_failure(Outcome("timeout", retryable=True), revisit=False) is None
    fresh = policy().begin(time.monotonic())
    assert fresh.after_failure(Outcome("error_status", status=400), revisit=False) is None


def route(targets: list[dict[str, object]], balance: str = "weighted"):
    settings = parse_settings(
        {
            "providers": {name: {"kind": "mock"} for name in ("a", "b", "c")},
            "routes": [{"match": "*", "targets": targets, "balance": balance}],
        }
    )
    resolved = settings.resolve_route("m")
    assert resolved is not None
    return resolved


def test_the_order_puts_the_drawn_target_first_and_fallbacks_last() -> None:
    r = route([{"provider": "a"}, {"provider": "c", "weight": 0}, {"provider": "b"}])
    balancer = Balancer(random.Random(1))
    orders = {tuple(t.provider_name for t in balancer.order(r)) for _ in range(50)}
    assert orders == {("a", "b", "c"), ("b", "a", "c")}


def test_least_in_flight_picks_the_idlest_and_ties_go_to_the_first() -> None:
    r = route([{"provider": "a"}, {"provider": "b"}], balance="least_in_flight")
    balancer = Balancer()
    assert balancer.order(r)[0].provider_name == "a"
    balancer.started("a/*")
    assert balancer.order(r)[0].provider_name == "b"
    balancer.ended("a/*")
    assert balancer.order(r)[0].provider_name == "a" and balancer.in_flight == {}
