"""Three `gateway serve --workers 1` replicas behind HAProxy, sharing one PostgreSQL audit trail
and one Redis, in front of the bench's fake upstream: the scale-out deployment, on one machine.

    stack = ScaleStack.start(tmp_dir)     # every part its own process, on loopback ports
    stack.lb_url                          # what clients call
    stack.replicas[1].kill()              # kill -9; .terminate() is SIGTERM; .start() again
    stack.stop_redis(); stack.restart_postgres()
    stack.close()

The stack owns its Redis and its PostgreSQL cluster (initdb in a directory of its own, run as
the `postgres` user), so a test may kill them without touching the servers the rest of the
suite uses. It needs root, Debian's postgresql and redis-server (`.ci/postgres.sh`,
`.ci/redis.sh`) and haproxy (`.ci/haproxy.sh`); `missing()` says what is not there.
`scripts/soak.py` runs the same stack for ten minutes.
"""

from __future__ import annotations

import contextlib
import glob
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

GATEWAY = str(Path(sys.executable).parent / "gateway")
HAPROXY = os.environ.get("GATEWAY_TEST_HAPROXY") or shutil.which("haproxy") or "/usr/sbin/haproxy"
REPLICAS = 3
AUDIT_BATCH = 500  # gateway.audit.writer's largest batch: what a kill -9 may lose at most
KEY = "gw-scale-test-key-0123456789abcdefghijklmnopq"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def pg_bin(name: str) -> str | None:
    found = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"))
    return found[-1] if found else None


def missing() -> str | None:
    """What this machine lacks to run the stack, or None."""
    if os.geteuid() != 0:
        return "root (the PostgreSQL cluster runs as the postgres user)"
    for program in ("initdb", "pg_ctl"):
        if pg_bin(program) is None:
            return "PostgreSQL (source .ci/postgres.sh)"
    if shutil.which("redis-server") is None:
        return "redis-server (source .ci/redis.sh)"
    if not os.access(HAPROXY, os.X_OK):
        return "haproxy (source .ci/haproxy.sh)"
    return None


def wait_port(port: int, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"{what} not listening on {port} within {timeout}s")


def sha256(text: str) -> str:
    import hashlib

    return hashlib.sha256(text.encode()).hexdigest()


@dataclass
class Replica:
    """One `gateway serve --workers 1` on its own port; its stderr in `log` (kept across
    restarts: each start appends)."""

    index: int
    port: int
    config: Path
    log: Path
    proc: subprocess.Popen[bytes] | None = None
    _out: IO[bytes] | None = None

    def start(self) -> None:
        self._out = open(self.log, "ab")  # noqa: SIM115 - the process writes it until it ends
        self.proc = subprocess.Popen(
            [
                *(GATEWAY, "serve", "--config", str(self.config), "--port", str(self.port)),
                *("--workers", "1", "--log-format", "json"),
            ],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=self._out,
            env={k: v for k, v in os.environ.items() if k != "GATEWAY_CONFIG"},
        )
        wait_port(self.port, 30, f"replica {self.index}")

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def kill(self) -> None:
        """kill -9: no drain, no flush."""
        if self.alive():
            assert self.proc is not None
            self.proc.kill()
            self.proc.wait()

    def terminate(self, timeout: float = 30) -> int:
        """SIGTERM and wait: the exit status."""
        assert self.proc is not None
        self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout)

    def lines(self) -> list[dict[str, object]]:
        import orjson

        out = []
        for raw in self.log.read_bytes().splitlines():
            if raw.startswith(b"{"):
                with contextlib.suppress(orjson.JSONDecodeError):  # a line cut by kill -9
                    out.append(orjson.loads(raw))
        return out

    def exchange_ids(self) -> set[str]:
        return {
            str(o["id"])
            for o in self.lines()
            if o.get("logger") == "gateway.exchange" and o.get("message") == "exchange"
        }


@dataclass
class ScaleStack:
    root: Path
    upstream_port: int
    redis_port: int
    pg_port: int
    lb_port: int
    pg_dir: str
    replicas: list[Replica] = field(default_factory=list)
    procs: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)

    @property
    def lb_url(self) -> str:
        return f"http://127.0.0.1:{self.lb_port}"

    @property
    def pg_url(self) -> str:
        return f"postgresql://gateway@127.0.0.1:{self.pg_port}/postgres"

    @property
    def redis_url(self) -> str:
        return f"redis://127.0.0.1:{self.redis_port}/0"

    @property
    def upstream_url(self) -> str:
        return f"http://127.0.0.1:{self.upstream_port}"

    @classmethod
    def start(cls, root: Path, extra_config: str = "", routes: str = "") -> ScaleStack:
        root.mkdir(parents=True, exist_ok=True)
        stack = cls(
            root,
            free_port(),
            free_port(),
            free_port(),
            free_port(),
            tempfile.mkdtemp(prefix="gateway-scale-pg-"),
        )
        try:
            stack._start_upstream()
            stack.start_redis()
            stack._init_postgres()
            stack.start_postgres()
            config = root / "gateway.toml"
            config.write_text(stack.config_text(extra_config, routes))
            for index in range(1, REPLICAS + 1):
                replica = Replica(index, free_port(), config, root / f"replica-{index}.log")
                replica.start()
                stack.replicas.append(replica)
            stack._start_haproxy()
        except BaseException:
            stack.close()
            raise
        return stack

    def config_text(self, extra: str = "", routes: str = "") -> str:
        """`routes`: tables placed before the catch-all route; `extra`: anything after."""
        return f"""
[server]
host = "127.0.0.1"
shutdown_grace = 15

[providers.up]
kind = "openai"
base_url = "{self.upstream_url}/v1"
api_key = "sk-scale-test-upstream"

[providers.down]
kind = "openai"
base_url = "http://127.0.0.1:9/v1"
api_key = "sk-scale-test-down"

[[routes]]
match = "down-*"
provider = "down"

{routes}

[[routes]]
match = "*"
provider = "up"

[circuit]
failures = 3
cooldown = 30

[audit]
store = "{self.pg_url}"

[state]
redis = "{self.redis_url}"

{extra}
"""

    # --- the parts ------------------------------------------------------------------------------

    def _start_upstream(self) -> None:
        self.procs["upstream"] = subprocess.Popen(
            [sys.executable, "-m", "gateway_bench.upstream", "--port", str(self.upstream_port)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=open(self.root / "upstream.log", "ab"),  # noqa: SIM115
        )
        wait_port(self.upstream_port, 20, "the fake upstream")

    def start_redis(self) -> None:
        self.procs["redis"] = subprocess.Popen(
            [
                *("redis-server", "--bind", "127.0.0.1", "--port", str(self.redis_port)),
                *("--save", "", "--appendonly", "no", "--dir", str(self.root)),
            ],
            stdin=subprocess.DEVNULL,
            stdout=open(self.root / "redis.log", "ab"),  # noqa: SIM115
            stderr=subprocess.STDOUT,
        )
        wait_port(self.redis_port, 10, "redis-server")

    def stop_redis(self) -> None:
        """kill -9 Redis: the replicas' limits fail open until it is back."""
        proc = self.procs.pop("redis", None)
        if proc is not None:
            proc.kill()
            proc.wait()

    def _as_postgres(self, *args: str) -> None:
        subprocess.run(
            ["runuser", "-u", "postgres", "--", *args],
            check=True,
            cwd="/",
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            timeout=120,
        )

    def _init_postgres(self) -> None:
        shutil.chown(self.pg_dir, "postgres", "postgres")
        os.chmod(self.pg_dir, 0o700)
        data = os.path.join(self.pg_dir, "data")
        initdb = pg_bin("initdb")
        assert initdb is not None
        self._as_postgres(initdb, "-D", data, "-A", "trust", "-U", "gateway", "--no-sync")

    def start_postgres(self) -> None:
        pg_ctl = pg_bin("pg_ctl")
        assert pg_ctl is not None
        options = (
            f"-p {self.pg_port} -k {self.pg_dir} -c listen_addresses=127.0.0.1 "
            "-c fsync=off -c full_page_writes=off"  # a crash of PostgreSQL loses no commit
        )
        data = os.path.join(self.pg_dir, "data")
        log = os.path.join(self.pg_dir, "postgres.log")
        self._as_postgres(pg_ctl, "-D", data, "-o", options, "-l", log, "-w", "start")

    def stop_postgres(self) -> None:
        pg_ctl = pg_bin("pg_ctl")
        assert pg_ctl is not None
        data = os.path.join(self.pg_dir, "data")
        self._as_postgres(pg_ctl, "-D", data, "-m", "immediate", "-w", "stop")

    def _start_haproxy(self) -> None:
        servers = "\n".join(
            f"    server r{r.index} 127.0.0.1:{r.port} check" for r in self.replicas
        )
        config = self.root / "haproxy.cfg"
        config.write_text(f"""
global
    maxconn 4096

defaults
    mode http
    timeout connect 1s
    timeout client 60s
    timeout server 60s
    timeout http-request 10s
    retries 2
    option redispatch 1
    retry-on conn-failure empty-response
    option http-buffer-request

frontend clients
    bind 127.0.0.1:{self.lb_port}
    default_backend gateways

backend gateways
    balance roundrobin
    option httpchk GET /healthz
    http-check expect status 200
    default-server inter 200ms fall 1 rise 2
{servers}
""")
        self.procs["haproxy"] = subprocess.Popen(
            [HAPROXY, "-db", "-f", str(config)],
            stdin=subprocess.DEVNULL,
            stdout=open(self.root / "haproxy.log", "ab"),  # noqa: SIM115
            stderr=subprocess.STDOUT,
        )
        wait_port(self.lb_port, 10, "haproxy")

    def close(self) -> None:
        for replica in self.replicas:
            if replica.alive():
                with contextlib.suppress(Exception):
                    replica.terminate(30)
            replica.kill()
        for name in ("haproxy", "upstream", "redis"):
            proc = self.procs.pop(name, None)
            if proc is not None:
                proc.kill()
                proc.wait()
        with contextlib.suppress(Exception):
            self.stop_postgres()
        shutil.rmtree(self.pg_dir, ignore_errors=True)
