"""How many cores this process may run on: the default worker count. A module of its own so
that `gateway serve` can ask before it imports the settings' models (gateway.workers does)."""

from __future__ import annotations

import os


def default_count() -> int:
    """The cores this process may run on (its CPU affinity mask), at least 1."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # no affinity mask on this platform (macOS)
        return os.cpu_count() or 1
