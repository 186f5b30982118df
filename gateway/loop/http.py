"""The HTTP transport shared by both wire formats, and the codec seam each format fills in.

Foreign exceptions (aiohttp, timeouts, unreadable bodies) are mapped here, once, to a failed
`Turn` with a typed `ModelError`: the loop never sees an exception from a model call.

    async with OpenAIChatClient("http://127.0.0.1:8080/v1", "unused", "gpt-4o") as model:
        turn = await model.complete(ModelRequest([UserMessage("Hello")]))
"""

from __future__ import annotations

from collections.abc import Mapping
from types import TracebackType
from typing import Any, ClassVar, Protocol, Self

import aiohttp
import orjson

from gateway.formats.registry import UNREADABLE, Wire
from gateway.loop.errors import (
    ConnectionFailed,
    HTTPStatusError,
    ModelTimeout,
    ProtocolError,
    StreamBroken,
)
from gateway.loop.model import ModelRequest
from gateway.loop.reading import TurnStream, body_turn
from gateway.loop.stops import withheld_calls
from gateway.loop.turn import Turn


class WireCodec(Protocol):
    path: str  # appended to the base URL
    wire: Wire  # how its answers are read: the gateway's own row for the wire

    def headers(self, api_key: str | None) -> dict[str, str]: ...

    def request_body(
        self, request: ModelRequest, model: str, max_tokens: int, stream: bool
    ) -> dict[str, Any]: ...


def error_turn(status: int, raw: bytes) -> Turn:
    """A 4xx/5xx answer. Both formats put `{"type", "message"}` under `error`; the gateway adds
    its extension object when the upstream stopped the generation itself."""
    try:
        body = orjson.loads(raw)
    except orjson.JSONDecodeError:
        body = None
    error = body.get("error") if isinstance(body, dict) else None
    error = error if isinstance(error, dict) else {}
    error_type = error.get("type") if isinstance(error.get("type"), str) else None
    message = error.get("message") if isinstance(error.get("message"), str) else ""
    ext = body.get("gateway") if isinstance(body, dict) else None
    native = ext.get("native_stop_reason") if isinstance(ext, dict) else None
    failure = HTTPStatusError(status, error_type, message or f"HTTP {status}")
    return Turn.failed(
        failure,
        native=native if isinstance(native, str) else None,
        withheld=withheld_calls(ext),
        raw=body,
    )


class HTTPModelClient:
    """A `ModelClient` over HTTP in one wire format (`codec`). Use it as an async context manager
    or call `close()`; a `session` passed in is used as is and left open."""

    codec_type: ClassVar[type[WireCodec]]  # each wire's client names its codec

    def __init__(
        self,
        base_url: str,
        api_key: str | None,
        model: str,
        *,
        max_tokens: int = 1024,
        headers: Mapping[str, str] | None = None,
        stream: bool = False,
        timeout: float = 120.0,
        session: aiohttp.ClientSession | None = None,
        codec: WireCodec | None = None,
    ) -> None:
        codec = codec or self.codec_type()
        self.codec = codec
        self.url = base_url.rstrip("/") + codec.path
        self.model = model
        self.max_tokens = max_tokens
        self.stream = stream
        self._headers = {
            "content-type": "application/json",
            **codec.headers(api_key),
            **(headers or {}),
        }
        self._timeout = aiohttp.ClientTimeout(total=timeout)
        self._session = session
        self._owns_session = session is None

    async def complete(self, request: ModelRequest) -> Turn:
        body = self.codec.request_body(request, self.model, self.max_tokens, self.stream)
        session = self._open()
        try:
            async with session.post(
                self.url, data=orjson.dumps(body), headers=self._headers
            ) as response:
                if response.status >= 400:
                    return error_turn(response.status, await response.read())
                if self.stream:
                    return await self._read_stream(response)
                return self._read_body(await response.read())
        except TimeoutError:
            return Turn.failed(ModelTimeout(f"no answer from {self.url} in time"))
        except aiohttp.ClientError as exc:
            return Turn.failed(ConnectionFailed(f"{type(exc).__name__} talking to {self.url}"))

    def _read_body(self, raw: bytes) -> Turn:
        try:
            return body_turn(self.codec.wire, orjson.loads(raw))
        except UNREADABLE as exc:
            problem = f"the response body is not a {self.codec.path} answer ({type(exc).__name__})"
            return Turn.failed(ProtocolError(problem))

    async def _read_stream(self, response: aiohttp.ClientResponse) -> Turn:
        stream = TurnStream(self.codec.wire)
        try:
            async for chunk in response.content.iter_any():
                stream.feed(chunk)
        except (aiohttp.ClientError, TimeoutError) as exc:
            stream.broken(StreamBroken(f"the stream broke ({type(exc).__name__})"))
        return stream.final()

    def _open(self) -> aiohttp.ClientSession:
        if self._session is None:
            self._session = aiohttp.ClientSession(timeout=self._timeout)
        return self._session

    async def close(self) -> None:
        if self._owns_session and self._session is not None:
            await self._session.close()
            self._session = None

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()
