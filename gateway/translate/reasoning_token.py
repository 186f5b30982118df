"""The `gw1:` token that carries Anthropic thinking through a Responses client (RESPONSES.md §7.3).

A Responses client keeps no Anthropic state of its own: it sends reasoning items back with
their `encrypted_content`. The gateway writes there what Anthropic needs to accept the thinking
block again, and nothing else: the block's signature (the thinking text itself is the item's
summary, which the client already has) or a redacted block's opaque data.

    >>> token = encode(Thinking(signature="sig-1"))
    >>> token.startswith("gw1:"), decode(token)
    (True, Thinking(signature='sig-1', redacted=None))
    >>> decode("gAAAAABpPDIV...") is None  # OpenAI's encrypted reasoning: not ours
    True

No HMAC: clients replay tokens across gateway restarts, and Anthropic validates the signature
itself. The token is versioned by its prefix and decoded strictly; anything that is not exactly
a token of this shape is foreign and decodes to None.
"""

from __future__ import annotations

import base64
import binascii
import re
from dataclasses import dataclass

import orjson

PREFIX = "gw1:"
PROVIDER = "anthropic"
_BASE64URL = re.compile(r"[A-Za-z0-9_-]+")  # unpadded; the decoder would skip other characters


@dataclass(frozen=True, slots=True)
class Thinking:
    """One Anthropic thinking block's opaque part: a `thinking` block's signature, or a
    `redacted_thinking` block's data (exactly one is set)."""

    signature: str | None = None
    redacted: str | None = None


def encode(thinking: Thinking) -> str:
    if thinking.redacted is not None:
        payload = {"p": PROVIDER, "redacted": thinking.redacted}
    else:
        payload = {"p": PROVIDER, "sig": thinking.signature or ""}
    return PREFIX + base64.urlsafe_b64encode(orjson.dumps(payload)).decode().rstrip("=")


def decode(token: object) -> Thinking | None:
    """The thinking a gateway token carries, or None for anything else."""
    if not isinstance(token, str) or not token.startswith(PREFIX):
        return None
    body = token[len(PREFIX) :]
    if not _BASE64URL.fullmatch(body):
        return None
    try:
        raw = base64.urlsafe_b64decode(body + "=" * (-len(body) % 4))
        payload = orjson.loads(raw)
    except (binascii.Error, ValueError):  # orjson.JSONDecodeError is a ValueError
        return None
    if not isinstance(payload, dict) or payload.get("p") != PROVIDER:
        return None
    keys = set(payload) - {"p"}
    signature, redacted = payload.get("sig"), payload.get("redacted")
    if keys == {"sig"} and isinstance(signature, str) and signature:
        return Thinking(signature=signature)
    if keys == {"redacted"} and isinstance(redacted, str) and redacted:
        return Thinking(redacted=redacted)
    return None
