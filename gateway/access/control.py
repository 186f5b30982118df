"""The access checks of one gateway: who may call it, which routes, how much, how many at once.

    access = build_access(settings, state, metrics)   # None: no keys and no limits configured
    await access.admit(request, record)                # at the top of an exchange: 401, 429
    access.allow_route(record, route)                  # once routed: 403
    await access.finished(record)                      # the observer, as each exchange ends

An exchange refused here still gets its one audit record (the exchange writes it): `key_name`
holds the key's configured name (None when no key matched), and `gateway_key_requests` counts it
by key and outcome. A gateway with no keys and no limits builds no AccessControl, so its
exchanges pay nothing for any of this.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Final

from aiohttp import web
from aiohttp.typedefs import Handler

from gateway.access.keys import CREDENTIAL_HEADERS, AdminKey, KeyRing, presented_key
from gateway.access.limits import Grant, Limiter
from gateway.audit.record import AuditRecord
from gateway.client_formats import detect
from gateway.client_request import ClientRequest
from gateway.error_reply import error_response
from gateway.errors import Forbidden, GatewayError, Unauthorized
from gateway.metrics import GatewayMetrics
from gateway.request_ids import new_request_id
from gateway.settings import ResolvedRoute, Settings
from gateway.state import SharedState

NO_KEY: Final = "-"  # the `key` label of requests no configured key matched
MISSING = "A gateway key is required: send it as `Authorization: Bearer <key>` or `x-api-key`"
INVALID = "The gateway key is not valid"  # never quotes the key


def unauthorized(headers: Mapping[str, str]) -> Unauthorized:
    return Unauthorized(MISSING if presented_key(headers) is None else INVALID)


class AccessControl:
    def __init__(self, settings: Settings, state: SharedState, metrics: GatewayMetrics) -> None:
        self.keys = KeyRing(settings.keys) if settings.keys else None
        self.limiter = Limiter(settings.limits, state, self._state_failed)
        self.metrics = metrics
        self._grants: dict[str, Grant] = {}  # request id -> its grant, until the record is in

    def reconfigure(self, settings: Settings) -> None:
        """A reloaded configuration's keys and limits, for the exchanges admitted from now on;
        those running keep the grant (and the key) they were admitted with."""
        self.keys = KeyRing(settings.keys) if settings.keys else None
        self.limiter.reconfigure(settings.limits)

    async def admit(self, request: ClientRequest, record: AuditRecord) -> None:
        """Before the body is read: the key (401), then the limits (429)."""
        grant = self._grants[record.id] = Grant(record.id)
        key = None
        if self.keys is not None:
            key = self.keys.find(request.headers)
            if key is None:
                grant.outcome = "unauthorized"
                raise unauthorized(request.headers)
            grant.key = key
            record.key_name = key.name
        self.limiter.enter(grant)
        if key is not None:
            await self.limiter.admit(grant, key)

    def allow_route(self, record: AuditRecord, route: ResolvedRoute) -> None:
        """Once routed: whether the key may use the route (403)."""
        grant = self._grants.get(record.id)
        key = grant.key if grant is not None else None
        if key is None or key.allows(route.route, record.model):
            return
        assert grant is not None
        grant.outcome = "forbidden"
        raise Forbidden(f"Key {key.name!r} may not use model {record.model!r}")

    async def finished(self, record: AuditRecord) -> None:
        """The exchange's record is complete: release what it held, count its tokens."""
        grant = self._grants.pop(record.id, None)
        if grant is None:
            return
        counted = (record.input_tokens or 0) + (record.output_tokens or 0)
        await self.limiter.settle(grant, counted or record.estimated_tokens or 0)
        name = grant.key.name if grant.key is not None else NO_KEY
        self.metrics.key_requests.labels(name, grant.outcome).inc()
        if grant.key is not None:
            if record.input_tokens:
                self.metrics.key_tokens.labels(name, "input").inc(record.input_tokens)
            if record.output_tokens:
                self.metrics.key_tokens.labels(name, "output").inc(record.output_tokens)
            if record.estimated_tokens:
                self.metrics.key_tokens.labels(name, "estimated").inc(record.estimated_tokens)

    def forwarded(self, names: tuple[str, ...]) -> tuple[str, ...]:
        if self.keys is None:
            return names
        return tuple(name for name in names if name not in CREDENTIAL_HEADERS)

    def _state_failed(self, operation: str) -> None:
        self.metrics.state_errors.labels(operation).inc()


def forwarded_headers(
    access: AccessControl | None, names: tuple[str, ...], headers: Mapping[str, str]
) -> dict[str, str]:
    """The client's headers of `names` to forward upstream, less its credential headers when
    gateway keys are on: they hold a gateway key, never a provider's."""
    if access is not None:
        names = access.forwarded(names)
    return {name: headers[name] for name in names if name in headers}


def require_key(current: Callable[[], AccessControl | None], handler: Handler) -> Handler:
    """`handler` for requests that present a key of the configuration `current` returns (it
    may be reloaded); else 401 in their format. Unguarded while no keys are configured."""

    async def guarded(request: web.Request) -> web.StreamResponse:
        access = current()
        keys = access.keys if access is not None else None
        if keys is not None and keys.find(request.headers) is None:
            return _refuse(request, unauthorized(request.headers))
        return await handler(request)

    return guarded


def admin_only(current: Callable[[], Settings], handler: Handler) -> Handler:
    """`handler` (/metrics) behind the `[admin]` key once gateway keys or an admin key are
    configured in the settings `current` returns (they may be reloaded); with keys and no
    admin key, always 401."""

    async def guarded(request: web.Request) -> web.StreamResponse:
        settings = current()
        if not settings.keys and not settings.admin.configured:
            return await handler(request)
        if not AdminKey(settings.admin.sha256).accepts(request.headers):
            if settings.admin.configured:
                return _refuse(request, Unauthorized("This endpoint needs the admin key"))
            err = Unauthorized("This endpoint needs the admin key, and none is configured")
            return _refuse(request, err)
        return await handler(request)

    return guarded


def _refuse(request: web.Request, err: GatewayError) -> web.Response:
    return error_response(detect(request.path, request.headers), err, new_request_id())


def build_access(
    settings: Settings, state: SharedState, metrics: GatewayMetrics
) -> AccessControl | None:
    """The checks `settings` asks for, or None when it asks for none."""
    if not settings.keys and not settings.limits.max_concurrent:
        return None
    return AccessControl(settings, state, metrics)
