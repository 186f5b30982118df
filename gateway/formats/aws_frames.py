"""The frame names AWS event-stream framing gives beyond AWS's own event types, shared by the
framing (`gateway.formats.aws_eventstream`, which needs botocore) and the Bedrock decoder
(`gateway.formats.bedrock_converse`, which does not)."""

from __future__ import annotations

from typing import Final

# The frame that ends a stream whose framing broke; no event type of AWS starts with ':'.
FRAMING_ERROR: Final = ":framing-error"
# An exception message's frame: this prefix, then its `:exception-type` (or `:error-code`).
EXCEPTION_PREFIX: Final = "exception:"
