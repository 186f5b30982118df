"""When the supervisor of `gateway serve --workers N` restarts a dead worker, and when it gives up
instead (gateway.supervisor runs the workers; this is its policy, on plain numbers).

    delay = restart_delay(quick_deaths)
    if gives_up(failed_starts, listening=True, serving=0): ...
"""

from __future__ import annotations

from typing import Final

RESTART_DELAY_MIN: Final = 0.5
RESTART_DELAY_MAX: Final = 30.0
QUICK_DEATH: Final = 10.0  # seconds: a worker that dies sooner after its start died quickly
GIVE_UP_AFTER: Final = 5  # failed starts in a row with no worker serving, once listening


def restart_delay(quick_deaths: int) -> float:
    """Seconds before a restart: none after a worker that ran a while, then doubling with each
    quick death in a row, so a worker that crashes at once does not spin the machine."""
    if quick_deaths <= 0:
        return 0.0
    return float(min(RESTART_DELAY_MAX, RESTART_DELAY_MIN * 2 ** (quick_deaths - 1)))


def gives_up(failed_starts: int, *, listening: bool, serving: int) -> bool:
    """Whether a worker that failed to start (`failed_starts` in a row) ends the gateway: at the
    first start (nothing was served yet: the configuration or the machine is at fault, as with one
    process), or later once no worker serves and this one failed GIVE_UP_AFTER times. While others
    serve, it keeps being restarted: a passing outage (the audit database restarting) must not
    take a serving gateway down."""
    if not listening:
        return True
    return serving == 0 and failed_starts >= GIVE_UP_AFTER
