"""Rereading the configuration file for a hot reload: the signal that asks for it, and what of the
file a running process can take.

SIGUSR1 asks: SIGHUP stays a stop (a closed terminal sends it). Its default action ends a
process, so `gateway serve` blocks it until it can reload, and the supervisor starts each worker
with it blocked, as it does the stop signals. Below the app, so the supervisor and
`gateway reload` use it without importing the serving path.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path

from gateway.settings import ConfigError, Settings, load_settings

# What only a restart changes: the listening address and workers, the stores, telemetry.
KEPT_SECTIONS = ("server", "audit", "state", "responses", "telemetry")
KEPT_LIMITS = ("max_body_bytes", "max_header_bytes", "max_headers", "metric_models")


class ReloadRefused(Exception):
    """The file cannot replace the running configuration; the message is one line."""


def reread(
    path: Path | None,
    env: Mapping[str, str],
    running: Settings,
    adapt: Callable[[Settings], Settings] = lambda settings: settings,
) -> tuple[Settings, list[str]]:
    """The file's settings over what only a restart changes (kept from `running`), and the names
    of what the file changes there and is not applied. `adapt`: what the process did to the
    file's settings at its start (gateway.workers.for_workers), done to the new ones before they
    are compared. ReloadRefused when it does not load."""
    try:
        fresh = adapt(load_settings(path, env))
    except ConfigError as exc:
        raise ReloadRefused("; ".join(str(exc).splitlines())) from None
    kept: dict[str, object] = {name: getattr(running, name) for name in KEPT_SECTIONS}
    ignored = [name for name in KEPT_SECTIONS if getattr(fresh, name) != kept[name]]
    limits = {name: getattr(running.limits, name) for name in KEPT_LIMITS}
    ignored += [f"limits.{n}" for n in KEPT_LIMITS if getattr(fresh.limits, n) != limits[n]]
    kept["limits"] = fresh.limits.model_copy(update=limits)
    # --log-level and --log-format made the running [logging]: it stays, and is not reported.
    kept["logging"] = running.logging
    return fresh.model_copy(update=kept), ignored
