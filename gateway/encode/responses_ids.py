"""The ids of Responses answers: `resp_` and 32 hex digits from the OS's random source.

One read of the source serves `POOL` ids (a `getrandom` call per answer cost more than the rest
of minting it), minted at once and handed out one by one; a forked child forgets what its parent
read, so no two processes share an id.

    response_id = new_response_id()        # "resp_3f2a…", 16 random bytes
"""

from __future__ import annotations

import os
from collections.abc import Iterator

ID_BYTES = 16
POOL = 256  # ids per read of the random source


class _Pool:
    __slots__ = ("ids",)

    def __init__(self) -> None:
        self.ids: Iterator[str] = iter(())

    def forget(self) -> None:
        self.ids = iter(())

    def refill(self) -> Iterator[str]:
        digits = os.urandom(ID_BYTES * POOL).hex()
        width = 2 * ID_BYTES
        self.ids = iter(["resp_" + digits[at : at + width] for at in range(0, len(digits), width)])
        return self.ids


_pool = _Pool()
os.register_at_fork(after_in_child=_pool.forget)


def new_response_id() -> str:
    for minted in _pool.ids:  # the next one, without a StopIteration to catch
        return minted
    return next(_pool.refill())
