"""An OpenAI Chat stream relayed to an OpenAI-wire upstream asks for its usage, whether or not
the client did.

Without `stream_options.include_usage` an OpenAI-wire upstream streams no token counts: the
record, the key's `tokens_per_window` and the cost would see none, and a budget could be used
past its end by streaming. The gateway asks on the client's behalf; the relay
(`gateway.encode.openai_relay`) then strips what the client did not ask for: the usage-only
chunk and each chunk's `"usage": null`. A server that refuses the field has the
`stream_options = false` quirk, which drops it again (providers.quirks).

    body, _ = with_stream_usage({"stream": True, ...})
    body["stream_options"]  # {"include_usage": True}
"""

from __future__ import annotations

from typing import Any

from gateway.translate.translation import NOTHING_DROPPED, Dropped


def with_stream_usage(body: dict[str, Any]) -> tuple[dict[str, Any], Dropped] | None:
    """The body asking for the stream's usage; None when it is no stream or already asks."""
    if body.get("stream") is not True:
        return None
    options = body.get("stream_options")
    if not isinstance(options, dict):
        options = {}
    elif options.get("include_usage") is True:
        return None
    return {**body, "stream_options": {**options, "include_usage": True}}, NOTHING_DROPPED
