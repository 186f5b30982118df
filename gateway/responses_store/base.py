"""The store seam: entries, owners, and the backends by URL."""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

import orjson

Item = dict[str, Any]
# The store several workers share in place of `memory`: a SQLite file held to the memory store's
# bounds. Only gateway.workers writes this form; a configuration file cannot (its validator).
SHARED_MEMORY = "shared-memory:///"
MAX_CHAIN = 1000  # links followed back from one previous_response_id


@dataclass(frozen=True, slots=True)
class StoredResponse:
    id: str
    parent_id: str | None
    owner: str
    created_at: float
    expires_at: float
    model: str
    items_in: list[Item]
    items_out: list[Item]
    response: dict[str, Any] = field(default_factory=dict)  # the object `GET` returns

    @property
    def size(self) -> int:
        """The bytes it holds as JSON (the response object holds the output items), for the
        memory bound; computed with orjson, once per put."""
        return len(orjson.dumps(self.items_in)) + len(orjson.dumps(self.response))


class ResponseStore(Protocol):
    kind: str  # how the startup line names it
    secret: bytes  # the key owners are hashed with
    ttl: float  # seconds an entry stays chainable

    async def open(self) -> None: ...

    async def put(self, entry: StoredResponse) -> None: ...

    async def get(self, response_id: str, owner: str) -> StoredResponse | None: ...

    async def delete(self, response_id: str, owner: str) -> bool: ...

    async def close(self) -> None: ...

    def describe(self) -> str: ...


async def chain_items(store: ResponseStore, response_id: str, owner: str) -> list[Item] | None:
    """The conversation up to and including `response_id`: each link's input then output
    items, oldest first; None when any link is missing, expired or another owner's."""
    links: list[StoredResponse] = []
    current: str | None = response_id
    while current is not None:
        if len(links) >= MAX_CHAIN:
            return None
        entry = await store.get(current, owner)
        if entry is None:
            return None
        links.append(entry)
        current = entry.parent_id
    items: list[Item] = []
    for entry in reversed(links):
        items += entry.items_in
        items += entry.items_out
    return items


def owner_of(secret: bytes, headers: Mapping[str, str]) -> str:
    """A keyed hash of the caller's credential (Authorization, x-api-key or api-key, where a
    gateway key may come; none is a caller too): the store never holds the credential itself."""
    credential = (
        headers.get("authorization") or headers.get("x-api-key") or headers.get("api-key") or ""
    )
    keyed = _KEYED.get(secret)
    if keyed is None:  # the key's HMAC state, made once per secret (a process has one or two)
        if len(_KEYED) >= _KEYED_MAX:
            _KEYED.clear()
        keyed = _KEYED[secret] = hmac.new(secret, digestmod=hashlib.sha256)
    digest = keyed.copy()
    digest.update(credential.encode())
    return digest.hexdigest()


_KEYED: dict[bytes, hmac.HMAC] = {}
_KEYED_MAX = 8


class OffStore:
    """`store = "off"`: nothing is kept, every chain is not found."""

    kind = "off"
    secret = b""
    ttl = 0.0

    async def open(self) -> None:
        return None

    async def put(self, entry: StoredResponse) -> None:
        return None

    async def get(self, response_id: str, owner: str) -> StoredResponse | None:
        return None

    async def delete(self, response_id: str, owner: str) -> bool:
        return False

    async def close(self) -> None:
        return None

    def describe(self) -> str:
        return "off (previous_response_id is never found)"


def human_duration(seconds: float) -> str:
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size and seconds % size == 0:
            return f"{int(seconds // size)}{unit}"
    return f"{seconds:g}s"


def human_size(size: int) -> str:
    for unit, factor in (("GiB", 1024**3), ("MiB", 1024**2), ("KiB", 1024)):
        if size >= factor and size % factor == 0:
            return f"{size // factor} {unit}"
    return f"{size} bytes"
