"""Why a model call gave no usable turn: the `ModelError` family carried on a failed `Turn`
(`turn.error`). The tree and its `type` strings are drawn in gateway.loop.errors, which re-exports
these beside the run's own errors; they live here because `Turn` holds one and the run's errors
hold a `Turn`."""

from __future__ import annotations

from typing import ClassVar


class ModelError(Exception):
    """Why a model call produced no usable response; `Turn.error` of a failed turn."""

    type: ClassVar[str] = "model"
    __match_args__ = ("message",)

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class HTTPStatusError(ModelError):
    type = "http_status"
    __match_args__ = ("status", "error_type")

    def __init__(self, status: int, error_type: str | None, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.error_type = error_type


class ConnectionFailed(ModelError):
    type = "connection"


class ModelTimeout(ModelError):
    type = "timeout"


class ProtocolError(ModelError):
    type = "protocol"


class StreamBroken(ModelError):
    type = "stream"
    __match_args__ = ("error_type",)

    def __init__(self, message: str, error_type: str | None = None) -> None:
        super().__init__(message)
        self.error_type = error_type


class CallInterrupted(ModelError):
    type = "interrupted"
