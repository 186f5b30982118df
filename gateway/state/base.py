"""What every shared-state backend raises when it cannot answer."""

from __future__ import annotations


class StateUnavailable(Exception):
    """The shared state did not answer (connection refused, timeout, a server error). The
    message names the backend and the exception class, never a URL or a password."""
