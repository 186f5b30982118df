"""The connection pools' default limit, read by the settings without importing the pools (and
with them the TLS trust store, aiohttp's): a supervisor validates settings and never connects."""

from __future__ import annotations

from typing import Final

DEFAULT_MAX_CONNECTIONS: Final = 4096
