"""How long the dashboard's aggregates take over a large audit trail.

    python scripts/bench/dashboard_scale.py sqlite:////tmp/big.db --records 1000000
    python scripts/bench/dashboard_scale.py postgresql://... --records 1000000

Fills the store (when it holds fewer records) with a seeded mix over the last 30 days, written in
time order as a gateway writes it, then times
`gateway.dashboard.aggregate.overview` (every panel of the page) for the last hour, day, week and
everything, and prints the seconds of each (best of 3).
"""

from __future__ import annotations

import argparse
import asyncio
import random
import time

from gateway.audit.record import AuditRecord
from gateway.audit.store import open_store
from gateway.dashboard import aggregate
from gateway.dashboard.aggregate import Window

DAYS = 30
BATCH = 5000


def record(i: int, total: int, rng: random.Random, now: float) -> AuditRecord:
    """The i-th of `total` records, in time order as a gateway writes them."""
    started = now - DAYS * 86400 * (1 - (i + rng.random()) / total)
    cut = rng.random() < 0.08
    attempts = [{"provider": "openai", "upstream_model": "gpt-x", "outcome": "answered"}]
    if rng.random() < 0.05:
        attempts.insert(0, {"provider": "anthropic", "upstream_model": "c", "outcome": "timeout"})
    return AuditRecord(
        id=f"bench{i:012d}",
        started_at=started,
        client_format=rng.choice(["openai", "anthropic", "responses"]),
        stream=True,
        model=rng.choice(["gpt-x", "claude-y", "gemini-z", "llama"]),
        route="*",
        provider=rng.choice(["openai", "anthropic", "gemini", "local"]),
        first_byte_at=started + rng.random(),
        ended_at=started + 1 + rng.random() * 9,
        http_status=200,
        stop_reason="length" if cut else rng.choice(["stop", "tool_calls"]),
        truncated=cut,
        cut_reason="length" if cut else None,
        withheld_tool_calls=[{"id": f"c{i}", "name": rng.choice(["search", "shell"])}]
        if cut and rng.random() < 0.3
        else [],
        input_tokens=rng.randrange(100, 5000),
        output_tokens=rng.randrange(10, 900),
        attempts=attempts,
        cost_usd=rng.random() / 1000,
    )


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("store")
    parser.add_argument("--records", type=int, default=1_000_000)
    args = parser.parse_args()
    store = open_store(args.store)
    await store.open()
    have = int((await store.read("SELECT COUNT(*) FROM audit_records", []))[0][0])
    now = time.time()
    rng = random.Random(7)
    for start in range(have, args.records, BATCH):
        end = min(start + BATCH, args.records)
        await store.write([record(i, args.records, rng, now) for i in range(start, end)])
    print(f"{max(have, args.records):,} records in {store.url}")
    for label, seconds in (("1h", 3600), ("24h", 86400), ("7d", 7 * 86400), ("all", None)):
        window = Window(since=None if seconds is None else now - seconds)
        step = aggregate.bucket_seconds(window.since, now)
        best = float("inf")
        for _ in range(3):
            t0 = time.perf_counter()
            data = await aggregate.overview(store, window, step)
            best = min(best, time.perf_counter() - t0)
        print(f"  {label:>4}: {best:7.3f} s  ({data['totals']['requests']:,} answers)")
    await store.close()


if __name__ == "__main__":
    asyncio.run(main())
