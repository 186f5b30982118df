"""The bench's gateway log: read after each run for warnings and errors, then emptied.

The gateway writes one JSON line per exchange to stderr (about 1.5 KB), which the bench sends to
a file: a default run would leave some hundreds of megabytes. After each run the file is read
for the levels it logged (a run whose gateway logged errors says so in the report), and
truncated; the gateway opened it with O_APPEND, so its next line lands at the new start.
"""

from __future__ import annotations

import collections
import os
import re
from pathlib import Path
from typing import Any, Final

LEVEL: Final = re.compile(rb'"level":"(\w+)"')
NOTED: Final = (b"warning", b"error", b"critical")
SAMPLES: Final = 3
SAMPLE_CHARS: Final = 300


class GatewayLog:
    def __init__(self, path: Path) -> None:
        self.path = path

    def drain(self) -> dict[str, Any]:
        """Counts of the warning and error lines since the last drain, and a few of them."""
        counts: collections.Counter[str] = collections.Counter()
        samples: list[str] = []
        try:
            with open(self.path, "rb") as file:
                for line in file:
                    match = LEVEL.search(line)
                    if match is None or match[1] not in NOTED:
                        continue
                    counts[match[1].decode()] += 1
                    if len(samples) < SAMPLES:
                        samples.append(line[:SAMPLE_CHARS].decode("utf-8", "replace").rstrip())
            os.truncate(self.path, 0)
        except OSError:
            return {}
        return {"levels": dict(counts), "samples": samples} if counts else {}
