"""Shared test stack: a loopback fake upstream and gateways in front of it, on their own loop.

The servers run in a background thread with their own event loop, so both the sync and the
async SDK clients can drive them from a test. Each test scripts the upstream under its own
model name (`unique_model`), so tests never see each other's traffic.
"""

from __future__ import annotations

import os
import socket
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal, NoReturn

import anthropic
import openai
import pytest
from aiohttp import web
from blockbuster import BlockBuster, blockbuster_ctx

from gateway.app import build_app
from gateway.price_table import whole_table
from gateway.settings import parse_settings
from tests.served import LoopServers
from tests.upstream import FakeUpstream

# Apps built in a test's loop price with genai-prices' whole table (`gateway serve` reads it, or
# the part it needs, in a thread): read here, before any loop runs.
whole_table()

UPSTREAM_OPENAI_KEY = "sk-upstream-SECRET-openai-0001"
UPSTREAM_ANTHROPIC_KEY = "sk-ant-upstream-SECRET-0002"
POLICIES = ("withhold", "pass")
# gateway name -> (truncation policy, agent_guard action)
GATEWAYS = {
    "withhold": ("withhold", "flag"),
    "pass": ("pass", "flag"),
    "reject": ("withhold", "reject"),
}


@pytest.fixture(autouse=True, scope="session")
def own_cache_home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """`gateway serve` keeps the price child's answers in the user's cache directory
    (gateway.price_cache): the processes a test run starts keep theirs in the run's own."""
    before = os.environ.get("XDG_CACHE_HOME")
    os.environ["XDG_CACHE_HOME"] = str(tmp_path_factory.mktemp("xdg-cache"))
    yield
    if before is None:
        os.environ.pop("XDG_CACHE_HOME", None)
    else:
        os.environ["XDG_CACHE_HOME"] = before


@pytest.fixture(autouse=True, scope="session")
def no_blocking_calls() -> Iterator[BlockBuster]:
    """Any blocking call (file or socket I/O, sleep, ...) that the gateway's own code makes
    inside a running event loop raises BlockingError, in every test, wherever the loop runs."""
    with blockbuster_ctx(["gateway", "providers"]) as detector:
        # asyncpg reads its connection settings (~/.postgresql certificates, ~/.pgpass) with
        # plain file calls each time the pool opens a connection: a few stat calls per pooled
        # connection, in the library, never per request. Everything else still raises.
        for function in detector.functions.values():
            function.can_block_in("asyncpg/connect_utils.py", "_parse_connect_dsn_and_args")
        yield detector


# What a test skipped for want of a server or program needs, and how to get it: .ci/run gets each
# (as root, on Debian), so a skip says how to do what it does.
NEEDS: dict[str, tuple[str, str]] = {
    "postgres": (
        "PostgreSQL",
        "run `source .ci/postgres.sh` as root (Debian), as .ci/run does, or set "
        "GATEWAY_TEST_POSTGRES_URL",
    ),
    "redis": (
        "Redis",
        "run `source .ci/redis.sh` as root (Debian), as .ci/run does, or set "
        "GATEWAY_TEST_REDIS_URL",
    ),
    "chromium": (
        "Chromium",
        "run `apt-get install chromium` as root (Debian), as .ci/run does, or set "
        "GATEWAY_TEST_CHROMIUM to its path",
    ),
    "codex": (
        "Codex CLI",
        "run `npm install --prefix .ci/node @openai/codex@0.171.0`, as .ci/run does, or set "
        "CODEX_BIN to its path",
    ),
}


Need = Literal["postgres", "redis", "chromium", "codex"]


def skip_without(need: Need, detail: str = "") -> NoReturn:
    what, how = NEEDS[need]
    pytest.skip(f"needs {what}{f' ({detail})' if detail else ''}: {how}")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# The shared stack pins one attempt per exchange: its tests check how one upstream failure reaches
# the client; retries, fallbacks and circuits have their own stacks (tests/test_resilience*.py).
ONE_ATTEMPT = {"attempts": 1}


def stack_settings(
    upstream_url: str,
    policy: str,
    dead_url: str,
    audit_store: str = "sqlite:///:memory:",
    guard_action: str = "flag",
) -> dict[str, Any]:
    return {
        "providers": {
            "openai": {
                "kind": "openai",
                "base_url": f"{upstream_url}/v1",
                "api_key": UPSTREAM_OPENAI_KEY,
                "timeout": 5,
                "retry": ONE_ATTEMPT,
            },
            "anthropic": {
                "kind": "anthropic",
                "base_url": upstream_url,
                "api_key": UPSTREAM_ANTHROPIC_KEY,
                "timeout": 5,
                "retry": ONE_ATTEMPT,
            },
            "slow": {
                "kind": "openai",
                "base_url": f"{upstream_url}/v1",
                "api_key": "sk-slow",
                "timeout": 0.5,
                "retry": ONE_ATTEMPT,
            },
            "slow_anthropic": {
                "kind": "anthropic",
                "base_url": upstream_url,
                "api_key": "sk-slow",
                "timeout": 0.5,
                "retry": ONE_ATTEMPT,
            },
            "dead": {
                "kind": "openai",
                "base_url": dead_url,
                "api_key": "sk-dead",
                "retry": ONE_ATTEMPT,
            },
            "mock": {"kind": "mock"},
        },
        "routes": [
            {"match": "oa-renamed", "provider": "openai", "upstream_model": "oa-renamed-target"},
            {"match": "oa-*", "provider": "openai"},
            {"match": "an-*", "provider": "anthropic"},
            {"match": "slow-oa-*", "provider": "slow"},
            {"match": "slow-an-*", "provider": "slow_anthropic"},
            {"match": "dead-*", "provider": "dead"},
            {"match": "mock-*", "provider": "mock"},
        ],
        "truncation": {"tool_calls": policy},
        "audit": {"store": audit_store},
        "agent_guard": {"identical_tool_calls": 4, "action": guard_action},
        "circuit": {"failures": 0},  # scripted failures of one test must not open another's
    }


class Stack(LoopServers):
    """The running servers, and a way to run coroutines on their loop."""

    def __init__(self, audit_dir: Path) -> None:
        super().__init__()
        self.audit_dir = audit_dir
        self.upstream = FakeUpstream()
        self.urls: dict[str, str] = {}
        self.apps: dict[str, web.Application] = {}

    async def _start(self) -> None:
        self.upstream_url = await self._serve(self.upstream.app())
        dead = f"http://127.0.0.1:{free_port()}/v1"
        for name, (policy, action) in GATEWAYS.items():
            store = f"sqlite:///{self.audit_dir / f'audit-{name}.db'}"
            config = stack_settings(self.upstream_url, policy, dead, store, action)
            self.urls[name] = await self._serve(build_app(parse_settings(config), env={}))

    def add_gateway(
        self, name: str, changes: dict[str, Any], env: dict[str, str] | None = None
    ) -> str:
        """Another gateway on this loop, in front of the same upstream: the stack's settings
        with `changes` (top-level tables replaced), audited to `audit_db(name)`. Its URL."""
        dead = f"http://127.0.0.1:{free_port()}/v1"
        store = f"sqlite:///{self.audit_db(name)}"
        config = {**stack_settings(self.upstream_url, "withhold", dead, store), **changes}
        app = build_app(parse_settings(config, env=env or {}), env={})
        self.apps[name] = app
        self.urls[name] = self.run(self._serve(app))
        return self.urls[name]

    def audit_db(self, name: str = "withhold") -> Path:
        return self.audit_dir / f"audit-{name}.db"


@pytest.fixture(scope="session")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    s = Stack(tmp_path_factory.mktemp("audit"))
    s.start()
    yield s
    s.stop()


@pytest.fixture
def upstream(stack: Stack) -> FakeUpstream:
    return stack.upstream


@pytest.fixture
def unique_model() -> Any:
    def make(prefix: str) -> str:
        return f"{prefix}-{uuid.uuid4().hex[:10]}"

    return make


def openai_client(stack: Stack, policy: str = "withhold") -> openai.OpenAI:
    return openai.OpenAI(base_url=stack.urls[policy] + "/v1", api_key="sk-client", max_retries=0)


def anthropic_client(stack: Stack, policy: str = "withhold") -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=stack.urls[policy], api_key="sk-client", max_retries=0)


def async_openai_client(stack: Stack, policy: str = "withhold") -> openai.AsyncOpenAI:
    url = stack.urls[policy] + "/v1"
    return openai.AsyncOpenAI(base_url=url, api_key="sk-client", max_retries=0)


def async_anthropic_client(stack: Stack, policy: str = "withhold") -> anthropic.AsyncAnthropic:
    return anthropic.AsyncAnthropic(base_url=stack.urls[policy], api_key="sk-client", max_retries=0)
