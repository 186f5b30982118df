"""How many workers `gateway serve` runs, and what several of them change.

    plan = plan_workers(args.workers, settings, source)     # ConfigError: exit 2
    if plan.count > 1:
        settings = for_workers(settings, private_dir)        # what each worker runs with

One worker is `gateway serve` as it always was: one process. Several share the port, each in its
own process (gateway.supervisor, gateway.worker), so whatever a process keeps in memory is no
longer the gateway's:

- the Responses store's default, `memory`, becomes a SQLite file in the supervisor's private
  directory that the workers share (a follow-up may reach another worker), removed at exit;
- per-key limits counted in memory would let each worker allow the whole limit: with an explicit
  worker count above one that is a configuration error; with the default (one per core) the
  gateway runs one worker and says why;
- circuit breakers stay per worker (shared through Redis when `[state] redis` is set);
- `/metrics` sums every worker (prometheus_client's multiprocess mode, gateway.metrics).
"""

from __future__ import annotations

import array
import os
import pickle
import socket
import struct
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Final

from gateway.cores import default_count
from gateway.responses_store.base import SHARED_MEMORY
from gateway.settings import ConfigError, Settings

if TYPE_CHECKING:
    from gateway.config_source import ConfigSource

_LENGTH: Final = struct.Struct(">I")
MAX_SOCKETS: Final = 64  # descriptors a spec brings: one per address the host resolves to
RESPONSES_FILE: Final = "responses.db"


@dataclass(frozen=True, slots=True)
class WorkersPlan:
    """How many workers run, where that number came from, and why it is one when the cores
    would have given more (`fallback`, a warning for the startup report)."""

    count: int
    origin: str
    fallback: str | None = None
    shares_responses: bool = False  # the default memory store becomes a shared SQLite file


def plan_workers(flag: int | None, settings: Settings, source: ConfigSource) -> WorkersPlan:
    """`--workers`, else `[server] workers`, else one per core. ConfigError when an explicit
    count above one would split per-key limits counted in memory."""
    if flag is not None:
        count, origin = flag, "--workers"
    elif settings.server.workers is not None:
        count, origin = settings.server.workers, f"server.workers in {source.path}"
    else:
        count, origin = default_count(), "one per core"
    limit = memory_limit(settings)
    if count > 1 and limit is not None:
        problem = (
            f"{count} workers would each count the per-key limits ({limit}) in their own "
            "memory and allow the whole limit; set [state] redis to share them, or run 1 worker"
        )
        if origin != "one per core":
            where = "--workers" if flag is not None else "server.workers"
            raise ConfigError(source.label(), [(where, problem)])
        fallback = (
            f"1 worker, not one per core ({count}): the per-key limits ({limit}) are counted in "
            "memory, per process; set [state] redis to share them between workers (--workers 1 "
            "says this is meant)"
        )
        return WorkersPlan(1, origin, fallback)
    return WorkersPlan(count, origin, None, count > 1 and settings.responses.store == "memory")


def memory_limit(settings: Settings) -> str | None:
    """The first per-key limit (its setting) that is counted in this process's memory: no
    `[state] redis`. `[limits] max_concurrent` is per process by design, so not one of them."""
    if settings.state.redis is not None or not settings.keys:
        return None
    if settings.limits.max_concurrent_per_key:
        return "limits.max_concurrent_per_key"
    for i, key in enumerate(settings.keys):
        for name in ("requests_per_window", "tokens_per_window"):
            if getattr(key, name) is not None:
                return f"keys[{i}].{name}"
    return None


def for_workers(settings: Settings, private_dir: str) -> Settings:
    """The settings every worker runs with: the default in-memory Responses store becomes one
    SQLite file in `private_dir` that they all read and write, held to the memory store's
    bounds (`max_entries`, `max_bytes`)."""
    responses = settings.responses
    if responses.store != "memory":
        return settings
    store = SHARED_MEMORY + os.path.join(private_dir, RESPONSES_FILE)
    update = {"responses": responses.model_copy(update={"store": store})}
    return settings.model_copy(update=update)


@dataclass(frozen=True, slots=True)
class WorkerSpec:
    """What the supervisor hands a worker on its channel: the settings exactly as validated once
    (a worker restarted later never re-reads a configuration file edited meanwhile), the numbers
    of the socket descriptors it inherited, and the private directory it shares."""

    index: int
    settings: Settings
    sockets: tuple[int, ...]
    audit_location: str
    private_dir: str
    config_path: str | None = None  # the file a reload rereads; None: the built-in default
    # The supervisor's price child's answer (gateway.price_subset); None: the worker's own child.
    prices: bytes | None = field(default=None, repr=False)

    @property
    def metrics_dir(self) -> str:
        return os.path.join(self.private_dir, "metrics")


def encode_spec(spec: WorkerSpec) -> bytes:
    """Length-prefixed pickle: the channel is a socketpair between the two processes only, and
    pickle carries the frozen settings without a second validation."""
    data = pickle.dumps(spec, protocol=pickle.HIGHEST_PROTOCOL)
    return _LENGTH.pack(len(data)) + data


def send_fds(channel: socket.socket, data: bytes, fds: tuple[int, ...]) -> None:
    """`data` (the spec's first bytes) with duplicates of `fds` for the process at the other end
    (SCM_RIGHTS): the worker was started before its sockets were made."""
    rights = [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds))] if fds else []
    channel.sendmsg([data], rights)


def read_spec(channel: socket.socket) -> WorkerSpec:
    """The spec the supervisor wrote first on `channel` (blocking: before the worker's loop),
    with the socket descriptors that came with it (`send_fds`) in place of the supervisor's."""
    flags = getattr(socket, "MSG_CMSG_CLOEXEC", 0)
    head, fds, _, _ = socket.recv_fds(channel, _LENGTH.size, MAX_SOCKETS, flags)
    if not head:
        raise EOFError("the supervisor closed the channel")
    head += _read_exactly(channel, _LENGTH.size - len(head))
    (length,) = _LENGTH.unpack(head)
    spec = pickle.loads(_read_exactly(channel, length))
    if not isinstance(spec, WorkerSpec):
        raise TypeError(f"expected a WorkerSpec, got {type(spec).__name__}")
    return replace(spec, sockets=tuple(fds)) if fds else spec


def _read_exactly(channel: socket.socket, size: int) -> bytes:
    data = bytearray()
    while len(data) < size:
        chunk = channel.recv(size - len(data))
        if not chunk:
            raise EOFError("the supervisor closed the channel")
        data += chunk
    return bytes(data)
