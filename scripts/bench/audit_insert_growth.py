"""CPU per audit record as the SQLite trail grows: records as the gateway makes them, written
in batches as the audit writer writes them, the CPU of each step of `--step` records reported
until `--records` are in the file. Flat when the primary key grows at its right edge
(time-ordered request ids); a random key lands on any page of the index, and once the index
outgrows the page cache each insert costs more.

    python scripts/bench/audit_insert_growth.py --records 2000000 [--random-ids]
"""

import argparse
import asyncio
import os
import tempfile
import time
import uuid
from pathlib import Path

from gateway.audit.record import AuditRecord
from gateway.audit.sqlite_store import SQLiteStore
from gateway.request_ids import new_request_id

BATCH = 64


def record(random_ids: bool) -> AuditRecord:
    now = time.time()
    rid = uuid.uuid4().hex[:24] if random_ids else new_request_id()
    attempt = {"provider": "up", "upstream_model": "m", "outcome": "answered", "duration_ms": 0.5}
    return AuditRecord(
        rid,
        now,
        "openai",
        False,
        "gpt-x",
        "gpt-*",
        "up",
        "gpt-x",
        now + 0.001,
        now + 0.002,
        200,
        "stop",
        "stop",
        input_tokens=12,
        output_tokens=5,
        attempts=[{**attempt}],
        cost_usd=1.2e-5,
        cost_source="table",
    )


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--records", type=int, default=2_000_000)
    parser.add_argument("--step", type=int, default=250_000)
    parser.add_argument("--random-ids", action="store_true", help="uuid4 ids, as before")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        store = SQLiteStore(Path(tmp, "audit.db"))
        await store.open()
        written, cpu = 0, time.process_time()
        print("records    CPU us/record (the step's: encode + insert + commit)")
        while written < args.records:
            await store.write([record(args.random_ids) for _ in range(BATCH)])
            written += BATCH
            if written % args.step < BATCH:
                now = time.process_time()
                print(f"{written:>9,}  {(now - cpu) / args.step * 1e6:6.1f}", flush=True)
                cpu = now
        size = os.path.getsize(Path(tmp, "audit.db"))
        await store.close()
        print(f"file: {size / 2**20:.0f} MiB")


asyncio.run(main())
