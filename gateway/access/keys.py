"""Gateway keys: which configured key a request presents, compared in constant time.

The configuration holds only SHA-256 digests (`[[keys]] sha256`, or `key_env` hashed at load).
A presented key is hashed and compared with `hmac.compare_digest` against every configured
digest, without stopping at the first match, so the time taken says nothing about which digest
matched or how much of one did. Neither the key nor its digest is logged or stored: only the
matching key's configured name goes into the audit record and /metrics.

    ring = KeyRing(settings.keys)
    key = ring.find(request.headers)        # a KeySettings, or None (no key, or not one of ours)
"""

from __future__ import annotations

import hmac
import secrets
from collections.abc import Mapping, Sequence
from typing import Final

from gateway.settings import KeySettings, hash_key

# Where clients put their key: OpenAI SDKs and Claude Code (`Authorization: Bearer`), Anthropic
# SDKs (`x-api-key`), Azure OpenAI clients (`api-key`). With gateway keys on, none of these is
# ever forwarded upstream: they hold the gateway's key, not the provider's.
CREDENTIAL_HEADERS: Final = ("authorization", "x-api-key", "api-key")
NEW_KEY_PREFIX: Final = "gw-"


def presented_key(headers: Mapping[str, str]) -> str | None:
    """The key a request presents: a Bearer token, else `x-api-key`, else `api-key`."""
    auth = headers.get("authorization")
    if auth is not None:
        scheme, _, token = auth.strip().partition(" ")
        if scheme.lower() == "bearer" and token.strip():
            return token
    for name in ("x-api-key", "api-key"):
        value = headers.get(name)
        if value and value.strip():
            return value
    return None


def _digest(key: str) -> bytes:
    return hash_key(key).encode()


class KeyRing:
    """The configured keys, by digest."""

    def __init__(self, keys: Sequence[KeySettings]) -> None:
        self._keys = [(key.sha256.encode(), key) for key in keys if key.sha256 is not None]

    def find(self, headers: Mapping[str, str]) -> KeySettings | None:
        key = presented_key(headers)
        if key is None:
            return None
        presented = _digest(key)
        found: KeySettings | None = None
        for digest, settings in self._keys:  # every one, whatever matched
            if hmac.compare_digest(presented, digest) and found is None:
                found = settings
        return found


class AdminKey:
    """The `[admin]` key, or none (then nothing is accepted)."""

    def __init__(self, sha256: str | None) -> None:
        self._digest = sha256.encode() if sha256 is not None else None

    def accepts(self, headers: Mapping[str, str]) -> bool:
        key = presented_key(headers)
        if key is None or self._digest is None:
            return False
        return hmac.compare_digest(_digest(key), self._digest)


def new_key() -> str:
    """A random gateway key: `gw-` and 43 URL-safe characters (256 bits)."""
    return NEW_KEY_PREFIX + secrets.token_urlsafe(32)
