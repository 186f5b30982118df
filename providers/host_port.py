"""What a message may say of an upstream's URL: its host and port. Apart from providers.http, so
that the startup report reads it without the HTTP client (its pools, the TLS trust store)."""

from __future__ import annotations

from urllib.parse import urlsplit


def host_port(url: str, *, default_port: bool = True) -> str:
    """The URL's host and port (the scheme's own when `default_port` and none is given), never
    its user info, path or query: what a message may say of an upstream."""
    parts = urlsplit(url)
    host = parts.hostname or "?"
    if ":" in host:
        host = f"[{host}]"
    try:
        port = parts.port
    except ValueError:
        return host
    if port is None and default_port:
        port = 443 if parts.scheme == "https" else 80
    return f"{host}:{port}" if port is not None else host
