"""Gateway keys and limits (README "Access and limits"): keys.py finds the key a request
presents, limits.py counts rates, budgets and concurrency in a SharedState, control.py composes
them for the exchange and the app; command.py is `gateway keys`."""

from gateway.access.control import AccessControl, admin_only, build_access, forwarded_headers

__all__ = ["AccessControl", "admin_only", "build_access", "forwarded_headers"]
