"""`previous_response_id` and `store` for Responses clients (RESPONSES.md §10).

Before the attempt, the stored conversation is put in front of the request's own input, so every
upstream, stateless, receives the whole history; after a completed or incomplete answer, the
request's own items and the answer's output items as delivered (withheld calls are not among
them) are kept, unless the request said `store: false`. A failed answer is never kept.

    if chained(obj):  # else nothing to continue and nothing to keep: no chain at all
        chain, obj, raw = await open_chain(store, obj, raw, request.headers)
    ...
    await chain.keep(attempt)
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass
from typing import Any

import orjson

from gateway.encode import responses_body
from gateway.errors import PreviousResponseNotFound
from gateway.handlers.attempt import BROKEN, Attempt
from gateway.responses_store import ResponseStore, StoredResponse, owner_of
from gateway.responses_store.base import chain_items

Item = dict[str, Any]


@dataclass(slots=True)
class Chain:
    store: ResponseStore
    headers: Any  # the request's: whose the chain is (`owner`)
    parent_id: str | None
    items_in: list[Item]  # this request's own input, as items
    kept: bool  # the request did not say store: false
    model: str
    _owner: str | None = None

    @property
    def owner(self) -> str:
        """The keyed hash of the caller's credential, made when first needed: a request that
        neither continues a chain nor is kept (`store: false`) never needs it."""
        if self._owner is None:
            self._owner = owner_of(self.store.secret, self.headers)
        return self._owner

    async def keep(self, attempt: Attempt) -> None:
        terms = attempt.terms
        if not self.kept or terms.response_id is None or attempt.aggregator.error is not None:
            return
        verdict = attempt.verdict()
        if verdict.stop_reason in BROKEN:
            return
        # The store keeps what the client may not have: a thinking signature travels as an
        # encrypted_content token whether or not this request asked for it (RESPONSES §7.3).
        kept_terms = dataclasses.replace(terms, encrypted_reasoning=True)
        body = responses_body.build_body(attempt.aggregator.final(), verdict, kept_terms)
        now = time.time()
        entry = StoredResponse(
            terms.response_id,
            self.parent_id,
            self.owner,
            now,
            now + self.store.ttl,
            self.model,
            self.items_in,
            body["output"],
            body,
        )
        await self.store.put(entry)


def own_items(value: Any) -> list[Item]:
    if isinstance(value, str):
        return [{"role": "user", "content": value}]
    return list(value) if isinstance(value, list) else []


def chained(obj: dict[str, Any]) -> bool:
    """Whether the request continues a chain or is kept: not one that says `store: false` and
    names no `previous_response_id`, as Codex sends every request (asked before `open_chain`,
    so that such a request does not wait on it at all)."""
    return obj.get("store") is not False or obj.get("previous_response_id") is not None


async def open_chain(
    store: ResponseStore, obj: dict[str, Any], raw: bytes, headers: Any
) -> tuple[Chain, dict[str, Any], bytes]:
    """The chain of a request that continues one or is kept (`chained`), with the body that
    carries its history."""
    parent = obj.get("previous_response_id")
    kept = obj.get("store") is not False
    chain = Chain(store, headers, parent, own_items(obj.get("input")), kept, str(obj["model"]))
    if parent is None:
        return chain, obj, raw
    history = await chain_items(store, parent, chain.owner)
    if history is None:
        raise PreviousResponseNotFound(
            f"Previous response with id '{parent}' not found.", "previous_response_id"
        )
    rebuilt = {k: v for k, v in obj.items() if k != "previous_response_id"}
    rebuilt["input"] = history + chain.items_in
    return chain, rebuilt, orjson.dumps(rebuilt)
