"""Rereading the configuration file for a hot reload: the signal that asks for it, and what of the
file a running process can take.

SIGUSR1 asks: SIGHUP stays a stop (a closed terminal sends it). Its default action ends a
process, so `gateway serve` blocks it until it can reload, and the supervisor starts each worker
with it blocked, as it does the stop signals. Below the app, so the supervisor and
`gateway reload` use it without importing the serving path.
"""

from __future__ import annotations

import signal
from collections.abc import Mapping
from pathlib import Path

from gateway.responses_store.base import SHARED_MEMORY
from gateway.settings import ConfigError, Settings, load_settings

RELOAD_SIGNAL = signal.SIGUSR1
# What only a restart changes: the listening address and workers, the stores, telemetry.
KEPT_SECTIONS = ("server", "audit", "state", "responses", "telemetry")
KEPT_LIMITS = ("max_body_bytes", "max_header_bytes", "max_headers", "metric_models")


class ReloadRefused(Exception):
    """The file cannot replace the running configuration; the message is one line."""


def reread(
    path: Path | None, env: Mapping[str, str], running: Settings
) -> tuple[Settings, list[str]]:
    """The file's settings over what only a restart changes (kept from `running`), and the names
    of what the file changes there and is not applied. ReloadRefused when it does not load."""
    try:
        fresh = load_settings(path, env)
    except ConfigError as exc:
        raise ReloadRefused("; ".join(str(exc).splitlines())) from None
    kept: dict[str, object] = {name: getattr(running, name) for name in KEPT_SECTIONS}
    ignored = [
        name for name in KEPT_SECTIONS if getattr(fresh, name) != _as_configured(running, name)
    ]
    limits = {name: getattr(running.limits, name) for name in KEPT_LIMITS}
    ignored += [f"limits.{n}" for n in KEPT_LIMITS if getattr(fresh.limits, n) != limits[n]]
    kept["limits"] = fresh.limits.model_copy(update=limits)
    # --log-level and --log-format made the running [logging]: it stays, and is not reported.
    kept["logging"] = running.logging
    return fresh.model_copy(update=kept), ignored


def _as_configured(running: Settings, name: str) -> object:
    """The running section as the file said it: workers share the in-memory Responses store as
    one SQLite file (gateway.workers.for_workers)."""
    section = getattr(running, name)
    if name == "responses" and running.responses.store.startswith(SHARED_MEMORY):
        return section.model_copy(update={"store": "memory"})
    return section
