"""An upstream's error reply, read once into UpstreamStatusError (by status and structured body)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson

from gateway.errors import UpstreamStatusError

MAX_MESSAGE = 2000


def status_error(
    status: int, headers: Mapping[str, str], body: bytes, wire: str
) -> UpstreamStatusError:
    error: dict[str, Any] = {}
    try:
        parsed = orjson.loads(body)
        if isinstance(parsed, dict) and isinstance(parsed.get("error"), dict):
            error = parsed["error"]
    except orjson.JSONDecodeError:
        pass
    message = error.get("message")
    if not isinstance(message, str) or not message:
        message = f"The upstream answered HTTP {status}"
    code = error.get("code")
    return UpstreamStatusError(
        status,
        message[:MAX_MESSAGE],
        error_type=error.get("type") if isinstance(error.get("type"), str) else None,
        error_code=code if isinstance(code, str) else None,
        retry_after=headers.get("retry-after"),
        body=body if error else None,
        source=wire,
    )
