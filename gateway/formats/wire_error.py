"""An upstream error reply as its wire's rule reads it: the registry's rows and the wire modules
that read errors of their own (gateway.formats.bedrock_converse) share it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class WireError:
    """What an upstream's error reply says, read by its wire's rule (None: not said)."""

    message: str | None = None
    type: str | None = None  # the error type, in the wire's own vocabulary
    code: str | None = None
    retry_after: str | None = None  # seconds, when the body says it (Gemini's RetryInfo)
    # What the audit record keeps of it beyond the message, never text: the categories of a
    # prompt Azure OpenAI's content filter refused (`innererror.content_filter_result`).
    details: dict[str, Any] | None = None
