"""The ids of Responses answers: `resp_` and 32 hex digits from the OS's random source.

One read of the source serves `POOL` ids (a `getrandom` call per answer cost more than the rest
of minting it); a forked child forgets what its parent read, so no two processes share an id.

    response_id = new_response_id()        # "resp_3f2a…", 16 random bytes
"""

from __future__ import annotations

import os

ID_BYTES = 16
POOL = 256  # ids per read of the random source


class _Pool:
    __slots__ = ("at", "data")

    def __init__(self) -> None:
        self.data = b""
        self.at = 0

    def forget(self) -> None:
        self.data, self.at = b"", 0


_pool = _Pool()
os.register_at_fork(after_in_child=_pool.forget)


def new_response_id() -> str:
    pool = _pool
    at = pool.at
    if at >= len(pool.data):
        pool.data, at = os.urandom(ID_BYTES * POOL), 0
    pool.at = at + ID_BYTES
    return "resp_" + pool.data[at : at + ID_BYTES].hex()
