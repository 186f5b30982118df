"""What the fake upstream answers, chosen by the model name alone.

Another gateway pointed at the bench's upstream can only pass a model name through, so every
knob is a `-`-separated token of it; tokens that are not knobs (a route prefix such as `bench`)
are ignored, and a name without knobs gets the default: 20 chunks, written at once.

    bench-c20        20 content chunks (the default); `-c2000` for 2,000
    bench-c20-p1     paced: one chunk per write, 1 ms apart (`-p0.5` for half a millisecond)
    bench-hold       a stream that sends its first chunk, then stalls until the client leaves

    scenario = Scenario.parse("xbench-c200-p1")   # Scenario(chunks=200, pace_ms=1.0)
    scenario.model("bench")                       # "bench-c200-p1"
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final

DEFAULT_CHUNKS: Final = 20
MAX_CHUNKS: Final = 100_000
MAX_PACE_MS: Final = 10_000.0
_CHUNKS = re.compile(r"c(\d{1,6})")
_PACE = re.compile(r"p(\d{1,5}(?:\.\d{1,3})?)")


@dataclass(frozen=True, slots=True)
class Scenario:
    """One answer's shape: how many content chunks, written how."""

    chunks: int = DEFAULT_CHUNKS
    pace_ms: float | None = None  # None: the whole stream in one write (a burst)
    hold: bool = False

    @classmethod
    def parse(cls, model: str) -> Scenario:
        chunks, pace, hold = DEFAULT_CHUNKS, None, False
        for token in model.lower().split("-"):
            if token == "hold":
                hold = True
            elif match := _CHUNKS.fullmatch(token):
                chunks = min(max(1, int(match[1])), MAX_CHUNKS)
            elif match := _PACE.fullmatch(token):
                pace = min(float(match[1]), MAX_PACE_MS)
        return cls(chunks, pace, hold)

    def model(self, prefix: str) -> str:
        """The model name that asks for this scenario, behind a route prefix."""
        tokens = [prefix, f"c{self.chunks}"]
        if self.pace_ms is not None:
            tokens.append(f"p{self.pace_ms:g}")
        if self.hold:
            tokens.append("hold")
        return "-".join(tokens)


def words(count: int) -> list[str]:
    """The content chunks: short pieces, like real token-sized deltas."""
    return ["Hello" if i == 0 else f" w{i}" for i in range(count)]
