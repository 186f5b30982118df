"""Provider keys that are stand-ins, not keys: the README's `export OPENAI_API_KEY=unused` is
meant for a client's terminal, and in the gateway's it sends "unused" upstream.

The startup report warns about them (gateway.startup), and an upstream's 401 or 403 to one says
so in the error's `gateway` object (gateway.handlers.error_extension), where the newcomer who
made the mistake is looking.

    placeholder_providers(settings, os.environ)  # frozenset({"openai"})
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping
from typing import Final
from urllib.parse import urlsplit

from gateway.settings import Settings

# A key shorter than this, one character repeated (after `sk-`), or holding one of these words
# (any case) is a placeholder. Real keys are random and longer (OpenAI's and Anthropic's by
# far, Google's 39 characters, Azure's 32).
PLACEHOLDER_LENGTH: Final = 20
PLACEHOLDER_WORDS: Final = ("unused", "dummy", "placeholder", "changeme", "example", "your", "xxxx")


def is_placeholder(key: str) -> bool:
    if len(key) < PLACEHOLDER_LENGTH or len(set(key.removeprefix("sk-"))) <= 1:
        return True
    lower = key.lower()
    return any(word in lower for word in PLACEHOLDER_WORDS)


def is_loopback(host: str) -> bool:
    """Whether `host` names only this machine (an IP on loopback, or `localhost`)."""
    if host.lower() in ("localhost", "localhost."):
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False  # another name: it may resolve anywhere


def placeholder_providers(settings: Settings, env: Mapping[str, str]) -> frozenset[str]:
    """The providers whose key is a placeholder."""
    found = set()
    for name, provider in settings.providers.items():
        key = provider.resolve_api_key(env) if provider.kind != "mock" else None
        if key is not None and is_placeholder(key):
            found.add(name)
    return frozenset(found)


def on_loopback(base_url: str | None) -> bool:
    """A provider on this machine: often a local server that takes any key."""
    return is_loopback(urlsplit(base_url or "").hostname or "")
