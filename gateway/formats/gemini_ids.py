"""Tool-call ids for Gemini, which gives none: minted from the response, carrying the call's
thought signature back to the next request.

Gemini's function calls arrive whole and without ids, and Gemini 3 puts a `thoughtSignature` on
a functionCall part that must come back with that call in the next turn (else 400,
MISSING_THOUGHT_SIGNATURE). Every client echoes a tool call's id with its result, so the id
carries it: `call_<24 hex>` (a digest of the response id and the call's ordinal, so the same
call gets the same id streamed or not) and, when the call was signed, `_s<signature>` in URL-safe
base64 without padding (ids stay `[A-Za-z0-9_-]`, as Anthropic requires of tool_use ids).

    >>> call_id = mint("resp-1", 0, "EpEg+/A=")
    >>> read_signature(call_id)
    'EpEg+/A='
"""

from __future__ import annotations

import hashlib
from typing import Final

PREFIX: Final = "call_"
DIGEST_CHARS: Final = 24
SIGNATURE_MARK: Final = "_s"
_TO_URLSAFE: Final = str.maketrans("+/", "-_")
_FROM_URLSAFE: Final = str.maketrans("-_", "+/")


def mint(response_id: str, ordinal: int, signature: str | None) -> str:
    digest = hashlib.sha256(f"{response_id}\x00{ordinal}".encode()).hexdigest()[:DIGEST_CHARS]
    call_id = PREFIX + digest
    if signature:
        call_id += SIGNATURE_MARK + signature.rstrip("=").translate(_TO_URLSAFE)
    return call_id


def read_signature(call_id: str) -> str | None:
    """The thought signature a minted id carries; None for an id the gateway did not mint for
    Gemini (a call from another upstream earlier in the conversation) or one without."""
    head = len(PREFIX) + DIGEST_CHARS
    if not call_id.startswith(PREFIX) or call_id[head : head + 2] != SIGNATURE_MARK:
        return None
    digest = call_id[len(PREFIX) : head]
    if len(digest) != DIGEST_CHARS or any(c not in "0123456789abcdef" for c in digest):
        return None
    encoded = call_id[head + 2 :]
    if not encoded:
        return None
    standard = encoded.translate(_FROM_URLSAFE)
    return standard + "=" * (-len(standard) % 4)
