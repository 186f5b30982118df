"""`/dashboard`: the page, its static files, and the JSON API the page reads.

    GET /dashboard                      the page (HTML, no data in it)
    GET /dashboard/assets/{name}        its script and style sheet, shipped in the package
    GET /dashboard/api/overview         every panel: ?since=24h&until=<unix>&provider=&model=
    GET /dashboard/api/summary          `gateway audit --format json`: ?by=provider&since=24h
    GET /dashboard/api/truncated        `gateway audit --truncated --format json`: ?limit=20

The page and its assets hold no data and are served to anyone; every API call is behind the
admin key once keys are configured (`gateway.access.admin_only`, as /metrics): the page asks for
the key and sends it as `Authorization: Bearer`. Every answer carries a Content-Security-Policy
that lets the page load and fetch from this origin only: nothing it shows comes from elsewhere,
and nothing it holds can be sent elsewhere.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from importlib import resources
from typing import Any, Final

import orjson
from aiohttp import web

from gateway.audit.objects import summary_object, truncated_object
from gateway.audit.report import GROUP_BY, parse_since
from gateway.audit.store import AuditStore
from gateway.client_formats import detect
from gateway.dashboard import aggregate
from gateway.dashboard.aggregate import Window
from gateway.errors import GatewayError, InvalidRequest, ServiceUnavailable
from gateway.handlers.responses import error_response, new_request_id

log = logging.getLogger("gateway.dashboard")

PREFIX: Final = "/dashboard"
PAGE: Final = "index.html"
ASSETS: Final = {
    "dashboard.js": "text/javascript",
    "dashboard.css": "text/css",
}
CSP: Final = (
    "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; "
    "img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)
SECURITY_HEADERS: Final = {
    "Content-Security-Policy": CSP,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}
MAX_LIMIT: Final = 1000

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@dataclass(slots=True)
class AuditSource:
    """The opened audit store, once the app has opened it (None before and after)."""

    store: AuditStore | None = None


def _read_files() -> dict[str, bytes]:
    folder = resources.files("gateway.dashboard").joinpath("assets")
    return {name: folder.joinpath(name).read_bytes() for name in (PAGE, *ASSETS)}


class Dashboard:
    """The page's files, read once on first use (in a thread: never file I/O on the event
    loop), and the API's handlers."""

    def __init__(self, source: AuditSource) -> None:
        self.source = source
        self._files: dict[str, bytes] | None = None

    async def _file(self, name: str) -> bytes | None:
        if self._files is None:
            self._files = await asyncio.to_thread(_read_files)
        return self._files.get(name)

    async def index(self, request: web.Request) -> web.Response:
        body = await self._file(PAGE)
        return web.Response(body=body, content_type="text/html", headers=SECURITY_HEADERS)

    async def asset(self, request: web.Request) -> web.Response:
        name = request.match_info["name"]
        body = await self._file(name) if name in ASSETS else None
        if body is None:
            raise web.HTTPNotFound(headers=SECURITY_HEADERS)
        return web.Response(body=body, content_type=ASSETS[name], headers=SECURITY_HEADERS)

    async def overview(self, request: web.Request) -> web.Response:
        window, store = self._window(request), self._store()
        until = window.until if window.until is not None else time.time()
        step = aggregate.bucket_seconds(window.since, until)
        return _json(await aggregate.overview(store, window, step))

    async def summary(self, request: web.Request) -> web.Response:
        by = request.query.get("by", "provider")
        if by not in GROUP_BY:
            raise InvalidRequest(f"by must be one of {', '.join(GROUP_BY)}")
        window, store = self._window(request), self._store()
        return _json([summary_object(s) for s in await aggregate.summarize(store, by, window)])

    async def truncated(self, request: web.Request) -> web.Response:
        limit = _int(request.query.get("limit", "20"), "limit", 1, MAX_LIMIT)
        window, store = self._window(request), self._store()
        cut = await aggregate.latest_cut(store, window, limit)
        return _json([truncated_object(t) for t in cut])

    def _store(self) -> AuditStore:
        store = self.source.store
        if store is None:
            raise ServiceUnavailable("the audit store is not open", retry_after=1.0)
        return store

    @staticmethod
    def _window(request: web.Request) -> Window:
        query = request.query
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
            model=query.get("model") if query.get("model") is not None else None,
        )


def _json(value: Any) -> web.Response:
    return web.Response(
        body=orjson.dumps(value), content_type="application/json", headers=SECURITY_HEADERS
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


def _errors_as_json(handler: Handler) -> Handler:
    """A refused query (bad parameters, no store) in the gateway's error JSON, with its
    status; a store that fails to answer is a 503, its message not echoed (it may hold a URL)."""

    async def answered(request: web.Request) -> web.StreamResponse:
        try:
            return await handler(request)
        except GatewayError as err:
            return _refuse(request, err)
        except Exception as exc:  # any driver's failure: sqlite3, asyncpg, a lost connection
            log.warning("dashboard: the audit store did not answer (%s)", type(exc).__name__)
            message = f"the audit store did not answer ({type(exc).__name__})"
            return _refuse(request, ServiceUnavailable(message, retry_after=5.0))

    return answered


def _refuse(request: web.Request, err: GatewayError) -> web.Response:
    response = error_response(detect(request.path, request.headers), err, new_request_id())
    response.headers.update(SECURITY_HEADERS)
    return response


def add_dashboard(
    app: web.Application, source: AuditSource, guard: Callable[[Handler], Handler]
) -> None:
    """Route `/dashboard` and its API; `guard` puts a handler behind the admin key."""
    dashboard = Dashboard(source)
    app.router.add_get(PREFIX, dashboard.index)
    app.router.add_get(PREFIX + "/", dashboard.index)
    app.router.add_get(PREFIX + "/assets/{name}", dashboard.asset)
    for name, handler in (
        ("overview", dashboard.overview),
        ("summary", dashboard.summary),
        ("truncated", dashboard.truncated),
    ):
        app.router.add_get(f"{PREFIX}/api/{name}", guard(_errors_as_json(handler)))
