"""Settings of what the gateway does when an upstream fails: retry tables, route targets,
circuits (gateway.resilience reads them) and the recovery of cut streams."""

from __future__ import annotations

from functools import cached_property
from typing import Annotated, Literal

from pydantic import Field, field_validator

from gateway.settings_fields import Frozen, NonEmptyStr, Seconds
from gateway.settings_fields import parse_duration as _duration
from gateway.settings_price import PriceSettings


class RetrySettings(Frozen):
    """When a failed attempt is tried again (at the next target of its route), and after how long.

    Only before the first byte reached the client; backoff is full jitter (a random wait up to
    `backoff * 2**(n-1)`, at most `max_backoff`), taken when the next target was tried already;
    a `retry-after` longer than `max_retry_after` ends the retries there."""

    attempts: Annotated[int, Field(ge=1, le=100)] = 3  # tries in all, the first one included
    backoff: Seconds = 0.5
    max_backoff: Seconds = 8.0
    max_retry_after: Annotated[float, Field(ge=0, allow_inf_nan=False)] = 30.0
    deadline: Seconds = 60.0  # no attempt starts later than this after the request arrived
    on_status: Annotated[tuple[Annotated[int, Field(ge=400, le=599)], ...], Field(strict=False)] = (
        408,
        429,
        500,
        502,
        503,
        504,
        529,
    )

    _durations = field_validator(
        "backoff", "max_backoff", "max_retry_after", "deadline", mode="before"
    )(classmethod(lambda cls, v: _duration(v)))


class TargetSettings(Frozen):
    """One place a route's requests may go: a provider and the model name it is asked for."""

    provider: NonEmptyStr
    upstream_model: NonEmptyStr | None = None  # None: the client's own model name
    # Share of the route's traffic; 0: a fallback only, tried when the others failed.
    weight: Annotated[float, Field(ge=0, allow_inf_nan=False, strict=False)] = 1.0
    price: PriceSettings | None = None  # None: the route's price, else the price table's

    @cached_property  # in the instance's __dict__ once read: a pydantic private attribute
    def key(self) -> str:  # would go through __getattr__ on every request
        """The target's name in circuits, /health and metrics: "provider/upstream_model", with
        "*" for the client's own model name."""
        return f"{self.provider}/{self.upstream_model or '*'}"


class CircuitSettings(Frozen):
    """Per target: after `failures` failures in a row it is skipped for `cooldown`, then one
    request probes it (half-open): a success closes the circuit, a failure opens it again."""

    failures: Annotated[int, Field(ge=0)] = 5  # 0: no circuit breaking
    cooldown: Seconds = 30.0

    _cooldown = field_validator("cooldown", mode="before")(classmethod(lambda cls, v: _duration(v)))


class RecoverySettings(Frozen):
    """What the gateway does with a streamed answer that was cut after its first byte reached
    the client (gateway.handlers.recovery). Off by default: the client gets the cut as it is.

    `mid_stream = "continue"`: a stream that broke during text (a reset, an idle timeout, an
    upstream error event, no terminator) is continued by the route's next target (or the same
    one), at most `max_recoveries` times. `max_tokens = "continue"`: a text answer cut at max
    tokens is continued the same way, at most `max_continuations` times. Either way the client's
    stream goes on where it stopped, and the `gateway` object and the record say so."""

    mid_stream: Literal["off", "continue"] = "off"
    max_recoveries: Annotated[int, Field(ge=0, le=10)] = 1
    max_tokens: Literal["off", "continue"] = "off"
    max_continuations: Annotated[int, Field(ge=0, le=10)] = 1

    @property
    def enabled(self) -> bool:
        return (self.mid_stream == "continue" and self.max_recoveries > 0) or (
            self.max_tokens == "continue" and self.max_continuations > 0
        )
