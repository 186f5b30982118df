"""`/dashboard`: the page, its static files, and the JSON API the page reads.

    GET /dashboard                      the page (HTML, no data in it)
    GET /dashboard/assets/{name}        its script and style sheet, shipped in the package
    GET /dashboard/api/overview         every panel: ?since=24h&until=<unix>&provider=&model=
    GET /dashboard/api/summary          `gateway audit --format json`: ?by=provider&since=24h
    GET /dashboard/api/truncated        `gateway audit --truncated --format json`: ?limit=20

The figures come from `gateway.dashboard.api`, imported on the API's first call: a gateway
whose dashboard is never opened does not carry the aggregates. The page and its assets hold no
data and are served to anyone; every API call is behind the admin key once keys are configured
(`gateway.access.admin_only`, as /metrics): the page asks for the key and sends it as
`Authorization: Bearer`. Every answer carries a Content-Security-Policy
that lets the page load and fetch from this origin only: nothing it shows comes from elsewhere,
and nothing it holds can be sent elsewhere.
"""

from __future__ import annotations

import asyncio
import importlib
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from importlib import resources
from types import ModuleType
from typing import Any, Final

import orjson
from aiohttp import web

from gateway.audit.store import AuditStore
from gateway.client_formats import detect
from gateway.error_reply import error_response
from gateway.errors import GatewayError, ServiceUnavailable
from gateway.request_ids import new_request_id

log = logging.getLogger("gateway.dashboard")

PREFIX: Final = "/dashboard"
PAGE: Final = "index.html"
API: Final = "gateway.dashboard.api"  # the aggregates: imported when first asked for
API_CALLS: Final = ("overview", "summary", "truncated")  # its functions, one route each
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
        self._api_module: ModuleType | None = None

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

    def answer(self, name: str) -> Handler:
        """The API call `name`: `gateway.dashboard.api`'s function of that name, as JSON."""

        async def answered(request: web.Request) -> web.Response:
            api = await self._api()
            return _json(await getattr(api, name)(self._store(), request.query))

        return answered

    async def _api(self) -> ModuleType:
        """`gateway.dashboard.api`, imported on first use, in a thread (an import reads files)."""
        if self._api_module is None:
            self._api_module = await asyncio.to_thread(importlib.import_module, API)
        return self._api_module

    def _store(self) -> AuditStore:
        store = self.source.store
        if store is None:
            raise ServiceUnavailable("the audit store is not open", retry_after=1.0)
        return store


def _json(value: Any) -> web.Response:
    return web.Response(
        body=orjson.dumps(value), content_type="application/json", headers=SECURITY_HEADERS
    )


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
    for name in API_CALLS:
        app.router.add_get(f"{PREFIX}/api/{name}", guard(_errors_as_json(dashboard.answer(name))))
