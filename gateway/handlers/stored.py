"""`GET` and `DELETE /v1/responses/{id}`: a stored Responses answer, for its owner only.

Another caller's id, an expired one and an unknown one all answer the same 404, so ids can
neither be probed nor read across credentials.
"""

from __future__ import annotations

from aiohttp import web
from aiohttp.typedefs import Handler

from gateway.client_formats import RESPONSES
from gateway.error_reply import error_response
from gateway.errors import NotFound
from gateway.request_ids import new_request_id
from gateway.responses_store import ResponseStore, owner_of


def _not_found(response_id: str) -> web.Response:
    err = NotFound(f"Response with id '{response_id}' not found.")
    return error_response(RESPONSES, err, new_request_id())


def stored_response_handlers(store: ResponseStore) -> tuple[Handler, Handler]:
    async def get(request: web.Request) -> web.StreamResponse:
        response_id = request.match_info["id"]
        entry = await store.get(response_id, owner_of(store.secret, request.headers))
        if entry is None:
            return _not_found(response_id)
        return web.json_response(entry.response, headers={"x-request-id": new_request_id()})

    async def delete(request: web.Request) -> web.StreamResponse:
        response_id = request.match_info["id"]
        if not await store.delete(response_id, owner_of(store.secret, request.headers)):
            return _not_found(response_id)
        body = {"id": response_id, "object": "response", "deleted": True}
        return web.json_response(body, headers={"x-request-id": new_request_id()})

    return get, delete
