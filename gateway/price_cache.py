"""The price child's answers kept on disk: a gateway that starts again with the same providers
and the same genai-prices needs no child at all.

The child (gateway.price_subset) spends about 240 ms of CPU reading genai-prices' whole table,
on every start, for an answer that depends on nothing but that table and the configured
providers' base URLs and kind hints. So the answer is kept in the user's cache directory
(`$XDG_CACHE_HOME/llm-gateway`, else `~/.cache/llm-gateway`, made private), under a name of two
digests: the table's (`table_stamp`: where genai-prices' data module and this gateway's price
code are, their sizes and times, and the Python version) and the hints'. A newer genai-prices
or gateway is another stamp, so a stale answer is never read; a start that finds no answer of
the current stamp at all starts the child early, as before.

Nothing else goes in: the answer holds providers' public prices, and the hints are base URLs
and kind names (never a key). Writing is best-effort (a read-only home, a full disk: logged at
debug, the child's answer still used), and atomic (a temporary file renamed over).

    cache = PriceCache.default()
    cache.has_stamp()                   # any answer for this table: defer the child
    answer = cache.read(hints)          # bytes or None
    cache.write(hints, answer)
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import logging
import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Final

import orjson

log = logging.getLogger("gateway.prices")

APP_DIR: Final = "llm-gateway"
PREFIX: Final = "prices-"
SUFFIX: Final = ".pickle"
Hints = Mapping[str, tuple[str | None, str | None]]


def cache_home(env: Mapping[str, str]) -> Path:
    given = env.get("XDG_CACHE_HOME")
    base = Path(given) if given and os.path.isabs(given) else Path.home() / ".cache"
    return base / APP_DIR


def _stat_line(path: str | None) -> str:
    if path is None:
        return "-"
    try:
        status = os.stat(path)
    except OSError:
        return f"{path}:-"
    return f"{path}:{status.st_size}:{status.st_mtime_ns}"


def table_stamp() -> str:
    """What the answer is a function of, besides the hints: genai-prices' data module and this
    gateway's code that cuts it (found without importing either), and the Python version."""
    spec = importlib.util.find_spec("genai_prices")
    package = os.path.dirname(spec.origin) if spec is not None and spec.origin else None
    here = os.path.dirname(os.path.abspath(__file__))
    parts = [
        _stat_line(None if package is None else os.path.join(package, "data.py")),
        _stat_line(os.path.join(here, "price_subset.py")),
        _stat_line(os.path.join(here, "price_table.py")),
        ".".join(map(str, sys.version_info[:2])),
    ]
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:16]


class PriceCache:
    def __init__(self, folder: Path, stamp: str) -> None:
        self.folder = folder
        self.stamp = stamp

    @classmethod
    def default(cls, env: Mapping[str, str] = os.environ) -> PriceCache:
        return cls(cache_home(env), table_stamp())

    def path(self, hints: Hints) -> Path:
        shown = orjson.dumps(dict(sorted(hints.items())))
        digest = hashlib.sha256(shown).hexdigest()[:24]
        return self.folder / f"{PREFIX}{self.stamp}-{digest}{SUFFIX}"

    def has_stamp(self) -> bool:
        """Whether an answer of the current table is kept (for some providers)."""
        try:
            return any(self.folder.glob(f"{PREFIX}{self.stamp}-*{SUFFIX}"))
        except OSError:
            return False

    def read(self, hints: Hints) -> bytes | None:
        try:
            return self.path(hints).read_bytes()
        except OSError:
            return None

    def forget(self, hints: Hints) -> None:
        """An answer that did not read: gone, so the next start asks the child again."""
        with contextlib.suppress(OSError):
            self.path(hints).unlink()

    def write(self, hints: Hints, answer: bytes) -> None:
        import tempfile  # here: the start that reads an answer needs none of it

        target = self.path(hints)
        try:
            self.folder.mkdir(mode=0o700, parents=True, exist_ok=True)
            fd, name = tempfile.mkstemp(dir=self.folder, prefix=".prices-")
            try:
                with os.fdopen(fd, "wb") as file:
                    file.write(answer)
                os.replace(name, target)
            except BaseException:
                os.unlink(name)
                raise
        except OSError as exc:
            log.debug("price table: not cached (%s)", type(exc).__name__)
