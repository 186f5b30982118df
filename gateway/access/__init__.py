"""Gateway keys and limits (docs/access.md): keys.py finds the key a request presents, limits.py
counts rates, budgets and concurrency in a SharedState, control.py composes them for the exchange
and the app; command.py is `gateway keys`. Nothing is imported here: `gateway --help` reads
command.py without the request path behind control.py."""
