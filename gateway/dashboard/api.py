"""The dashboard's JSON API: a query string in, the figures out (`gateway.dashboard.routes` serves
it, importing this module on the first call, so a gateway whose dashboard is never opened does not
carry the aggregates).

    overview(store, {"since": "24h", "provider": "openai"})   # every panel of the page
    summary(store, {"by": "model", "since": "7d"})            # gateway audit --format json
    truncated(store, {"limit": "50"})                         # gateway audit --truncated ...

Bad parameters raise `InvalidRequest`, saying which and why.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any, Final

from gateway.audit.objects import summary_object, truncated_object
from gateway.audit.report import GROUP_BY, parse_since
from gateway.audit.store import AuditStore
from gateway.dashboard import aggregate
from gateway.dashboard.aggregate import Window
from gateway.errors import InvalidRequest

MAX_LIMIT: Final = 1000


async def overview(store: AuditStore, query: Mapping[str, str]) -> Any:
    window = _window(query)
    until = window.until if window.until is not None else time.time()
    step = aggregate.bucket_seconds(window.since, until)
    return await aggregate.overview(store, window, step)


async def summary(store: AuditStore, query: Mapping[str, str]) -> Any:
    by = query.get("by", "provider")
    if by not in GROUP_BY:
        raise InvalidRequest(f"by must be one of {', '.join(GROUP_BY)}")
    return [summary_object(s) for s in await aggregate.summarize(store, by, _window(query))]


async def truncated(store: AuditStore, query: Mapping[str, str]) -> Any:
    limit = _int(query.get("limit", "20"), "limit", 1, MAX_LIMIT)
    cut = await aggregate.latest_cut(store, _window(query), limit)
    return [truncated_object(t) for t in cut]


def _window(query: Mapping[str, str]) -> Window:
    until = _number(query["until"], "until") if query.get("until") else None
    since: float | None = None
    if query.get("since") and query["since"] != "all":
        try:
            since = (until if until is not None else time.time()) - parse_since(query["since"])
        except ValueError as exc:
            raise InvalidRequest(f"since: {exc}") from None
    return Window(
        since=since,
        until=until,
        provider=query.get("provider") or None,
        model=query.get("model"),
    )


def _number(text: str, name: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise InvalidRequest(f"{name} must be a number (unix seconds)") from None


def _int(text: str, name: str, low: int, high: int) -> int:
    try:
        value = int(text)
    except ValueError:
        value = low - 1
    if not low <= value <= high:
        raise InvalidRequest(f"{name} must be a whole number from {low} to {high}")
    return value
