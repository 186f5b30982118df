"""The id every exchange carries: in the client's answer, its error, its log line and its record."""

from __future__ import annotations

import random
import time


def new_request_id() -> str:
    """24 hex digits: the time in milliseconds, then 48 random bits.

    Time first, so ids grow with time: the audit store's primary-key index takes each new record
    at its right edge, and an insert costs the same with a thousand records or millions (a random
    id lands on any page of the index: once the index outgrows the page cache, on one not in it).
    `random` is reseeded in a forked child, so workers never share a sequence."""
    return f"{time.time_ns() // 1_000_000:012x}{random.getrandbits(48):012x}"
