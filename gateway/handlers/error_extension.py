"""The `gateway` object of an error reply once the exchange was routed: which provider answered
(or failed) and every target tried, so an upstream's own error relayed to its client no longer
reads as if it came from nowhere.

    {"request_id": "...", "provider": "openai",
     "attempts": [{"provider": "openai", "upstream_model": "gpt-4o",
                   "outcome": "error_status", "status": 401}],
     "hint": "the upstream refused the key of provider 'openai', which looks like a placeholder..."}

Only names, outcomes and statuses: never a key, a header value or an upstream's message.
"""

from __future__ import annotations

from collections.abc import Set
from typing import Any, Final

from gateway.audit.record import AuditRecord

ATTEMPT_FIELDS: Final = ("provider", "upstream_model", "outcome", "status", "timeout")
REFUSED_KEY: Final = frozenset({401, 403})


def error_extension(record: AuditRecord, placeholders: Set[str]) -> dict[str, Any] | None:
    """None before routing (a bad request, no such model): no provider was involved."""
    if not record.attempts:
        return None
    attempts = [{k: a[k] for k in ATTEMPT_FIELDS if k in a} for a in record.attempts]
    out: dict[str, Any] = {
        "request_id": record.id,
        "provider": record.provider,
        "attempts": attempts,
    }
    refused = sorted(
        {a["provider"] for a in attempts if a.get("status") in REFUSED_KEY} & set(placeholders)
    )
    if refused:
        names = ", ".join(repr(name) for name in refused)
        out["hint"] = (
            f"the upstream refused the key of provider {names}, which looks like a placeholder: "
            "set the real key where the gateway runs (a placeholder meant for the client's "
            "terminal, such as OPENAI_API_KEY=unused, ends up sent upstream)"
        )
    return out
