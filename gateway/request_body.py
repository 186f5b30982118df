"""A client request's body, read within the app's `client_max_size` however it is encoded.

aiohttp inflates a `Content-Encoding: gzip|deflate|br|zstd` body while it is read, and
`request.read()` first raises its read chunk to `client_max_size`, so a small upload could
inflate to several times that limit in memory before the size check. `read_body` reads the
inflated stream in aiohttp's own small chunks and stops at `client_max_size` bytes
(`RequestTooLarge`, 413): the limit bounds the decoded body, and the body's declared length
before any of it is read. A lean request (gateway.lean_http) is never coded: its `read()` is the
body as sent.
"""

from __future__ import annotations

from aiohttp import hdrs, web

from gateway.client_request import ClientRequest
from gateway.errors import MalformedHTTP, RequestTooLarge


async def read_body(request: ClientRequest) -> bytes:
    """The whole body, decoded, or RequestTooLarge once it is over `client_max_size` bytes.

    Never more than the limit plus one of aiohttp's read chunks is held, however well a
    compressed body inflates (aiohttp inflates while the stream is read, a chunk at a time)."""
    limit = request.client_max_size
    declared = request.content_length if request.body_exists else 0
    if declared is not None and declared > limit:
        raise _too_large(request, limit)
    if declared is not None and hdrs.CONTENT_ENCODING not in request.headers:
        # Nothing inflates: the declared length (within the limit) bounds what is read, and
        # aiohttp's own read() is the fast path for the common request.
        try:
            return await request.read()
        except web.RequestPayloadError:
            raise MalformedHTTP("The request body cannot be read: its framing is invalid") from None
    # No declared length, or a coded body: aiohttp's request (a lean one has neither).
    assert isinstance(request, web.BaseRequest)
    body = bytearray()
    try:
        async for chunk in request.content.iter_any():
            if len(body) + len(chunk) > limit:
                raise _too_large(request, limit)
            body += chunk
    except web.RequestPayloadError:
        # Its message quotes aiohttp's decoder error; the class is all that is said.
        raise MalformedHTTP(
            "The request body cannot be read: its content encoding or framing is invalid"
        ) from None
    return bytes(body)


def _too_large(request: ClientRequest, limit: int) -> RequestTooLarge:
    decoded = " once decoded" if hdrs.CONTENT_ENCODING in request.headers else ""
    return RequestTooLarge(f"The request body is larger{decoded} than the limit of {limit} bytes")
