"""Where Responses answers are kept for `previous_response_id` (RESPONSES.md §10).

Never the audit database: this store holds prompts, tool outputs and answers; the audit holds
none. One entry per response: its own input items and its output items as delivered (withheld
calls are not among them), the response object for `GET`, the parent it continued, and an owner
(a keyed hash of the caller's credential): a lookup under another owner finds nothing.

    store = open_response_store(settings.responses)        # memory, sqlite or off
    items = await store.chain(previous_id, owner)          # None: not found, expired, another's
    await store.put(entry)
"""

from gateway.responses_store.base import OffStore, ResponseStore, StoredResponse, owner_of
from gateway.responses_store.opening import open_response_store

__all__ = ["OffStore", "ResponseStore", "StoredResponse", "open_response_store", "owner_of"]
