"""The system's trust store, read when the first TLS upstream needs it rather than at import.

    tls_trust.import_aiohttp()            # a serving process's first import of aiohttp
    await tls_trust.loaded(context)       # before a handshake: the store is in the context

aiohttp makes two client TLS contexts at its import, and each reads the system's trust store: in
a worker about 2 MB of memory and 35 ms of its start. The gateway's connections use one of them
(providers.http_pool) and only for https upstreams, which the built-in mock, a loopback server
and a plain-http one never need. `import_aiohttp` points OpenSSL's default locations at nothing
for the length of that import, so both contexts are made empty, and puts them back at once;
`loaded` reads the store into a context made so before its first handshake, in a thread (it
reads files), once per process. An empty store fails closed: a handshake it verified would be
refused, never let through unverified.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import os
import ssl
import sys
import threading
from collections.abc import Iterator

_lock = threading.Lock()
_deferred: set[int] = set()  # id() of the contexts made without their store, until it is read
_contexts: list[ssl.SSLContext] = []  # they stay alive, so an id is never reused meanwhile


def import_aiohttp() -> None:
    """Import aiohttp with its TLS contexts' trust store left unread; a no-op once imported."""
    if "aiohttp" in sys.modules:
        return
    with _no_default_locations():
        importlib.import_module("aiohttp")
    from aiohttp import connector

    for made in (connector._SSL_CONTEXT_VERIFIED, connector._SSL_CONTEXT_UNVERIFIED):
        if isinstance(made, ssl.SSLContext) and made.verify_mode == ssl.CERT_REQUIRED:
            _contexts.append(made)
            _deferred.add(id(made))


def deferred(context: ssl.SSLContext) -> bool:
    """Whether `context` was made without the store and has not read it yet."""
    return id(context) in _deferred


async def loaded(context: ssl.SSLContext) -> ssl.SSLContext:
    """`context`, with the system's trust store in it."""
    if id(context) in _deferred:
        await asyncio.to_thread(_load, context)
    return context


def _load(context: ssl.SSLContext) -> None:
    with _lock:  # the first connections of a burst all come here: one of them reads
        if id(context) in _deferred:
            context.load_default_certs()
            _deferred.discard(id(context))


@contextlib.contextmanager
def _no_default_locations() -> Iterator[None]:
    """OpenSSL's default CA file and directory, both pointed at an empty file (the variables
    are read when a context loads them, so the operator's own values are back afterwards)."""
    paths = ssl.get_default_verify_paths()
    names = (paths.openssl_cafile_env, paths.openssl_capath_env)
    saved = {name: os.environ.get(name) for name in names}
    os.environ.update(dict.fromkeys(names, os.devnull))
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
