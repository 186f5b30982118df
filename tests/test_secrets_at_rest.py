"""Secrets never come to rest: not in stderr, not in the SQLite file or its WAL, not in PostgreSQL.

A real `gateway serve` subprocess (so stderr is the real one) runs exchanges where secret tokens
sit in every place a careless gateway could copy them from: the upstream API key (a literal
`api_key` in the config), the client's key (`Authorization` / `x-api-key`, also forwarded upstream
by a provider without a key of its own), the user prompt, earlier tool-call arguments and tool
results in the conversation, the answer text, the arguments of a complete tool call and of a cut
one, an upstream error message quoting the prompt, and an invalid JSON body. With `log_content`
off none of them may appear in stderr, in the SQLite file bytes or its `-wal` file (read while the
gateway runs and again after it stopped), or in any PostgreSQL row of `audit_records` (whole
rows cast to text).

The positive control runs the same traffic with `[audit] log_content = true`: then the message
text and tool arguments are in the store and the log (so the checks can see them), the gateway
warned at start that content logging is on, and keys are still nowhere.
"""

from __future__ import annotations

import asyncio
import sqlite3
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import pytest

from tests.audit_util import BACKENDS, Backend, open_backend
from tests.scenarios import Answer, Tool, script_for
from tests.test_audit_e2e import Servers
from tests.test_shutdown import GatewayProcess
from tests.upstream import FakeUpstream, Script

_RUN = uuid.uuid4().hex[:12]
TOKENS = {
    "upstream_key": f"sk-upstream-s3cret-{_RUN}",
    "client_key": f"sk-client-s3cret-{_RUN}",
    "prompt": f"prompt-s3cret-{_RUN}",
    "history_args": f"history-args-s3cret-{_RUN}",
    "tool_result": f"tool-result-s3cret-{_RUN}",
    "answer_text": f"answer-s3cret-{_RUN}",
    "complete_args": f"complete-args-s3cret-{_RUN}",
    "cut_args": f"cut-args-s3cret-{_RUN}",
    "invalid_body": f"invalid-body-s3cret-{_RUN}",
}
KEYS = ("upstream_key", "client_key")
CONTENT = tuple(name for name in TOKENS if name not in KEYS)
T = TOKENS

COMPLETE = Tool("call_complete", "save_note", orjson.dumps({"note": T["complete_args"]}).decode())
CUT = Tool("call_cut", "send_mail", '{"body": "' + T["cut_args"] + '", "to": "som')
ANSWER_TEXT = f"Here it is: {T['answer_text']}."


@pytest.fixture
def launch(tmp_path: Path) -> Iterator[Callable[[str], GatewayProcess]]:
    """`launch(config_text)` starts a `gateway serve`; one still running at the end is killed."""
    started: list[GatewayProcess] = []

    def run(text: str) -> GatewayProcess:
        path = tmp_path / "gateway.toml"
        path.write_text(text)
        started.append(GatewayProcess(path, tmp_path))
        return started[-1]

    yield run
    for gateway in started:
        gateway.kill()


def config_text(upstream_url: str, store: str, log_content: bool) -> str:
    key = T["upstream_key"]
    return f"""
[server]
host = "127.0.0.1"
port = 0
shutdown_grace = 5

[providers.openai]
kind = "openai"
base_url = "{upstream_url}/v1"
api_key = "{key}"

[providers.anthropic]
kind = "anthropic"
base_url = "{upstream_url}"
api_key = "{key}"

# No key of its own: the client's credential is forwarded upstream.
[providers.forward]
kind = "openai"
base_url = "{upstream_url}/v1"

[[routes]]
match = "oa-*"
provider = "openai"

[[routes]]
match = "an-*"
provider = "anthropic"

[[routes]]
match = "fwd-*"
provider = "forward"

[audit]
store = "{store}"
log_content = {"true" if log_content else "false"}
"""


def openai_messages() -> list[dict[str, Any]]:
    history_args = orjson.dumps({"path": T["history_args"]}).decode()
    return [
        {"role": "user", "content": f"Please remember {T['prompt']}"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_hist",
                    "type": "function",
                    "function": {"name": "read_file", "arguments": history_args},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_hist", "content": T["tool_result"]},
    ]


def anthropic_messages() -> list[dict[str, Any]]:
    return [
        {"role": "user", "content": f"Please remember {T['prompt']}"},
        {
            "role": "assistant",
            "content": [
                {
                    "type": "tool_use",
                    "id": "toolu_hist",
                    "name": "read_file",
                    "input": {"path": T["history_args"]},
                }
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "toolu_hist", "content": T["tool_result"]}
            ],
        },
    ]


TOOLS_OPENAI = [
    {"type": "function", "function": {"name": n, "parameters": {"type": "object"}}}
    for n in ("read_file", "save_note", "send_mail")
]
TOOLS_ANTHROPIC = [
    {"name": n, "input_schema": {"type": "object"}} for n in ("read_file", "save_note", "send_mail")
]

# (name, client format, wire, stream, answer or script); models are "<prefix>-<name>".
COMPLETE_ANSWER = Answer(text=ANSWER_TEXT, tools=[COMPLETE])
CUT_OPENAI = Answer(text=ANSWER_TEXT, tools=[COMPLETE, CUT], native_stop="length")
CUT_ANTHROPIC = Answer(text=ANSWER_TEXT, tools=[COMPLETE, CUT], native_stop="max_tokens")
ERROR_ECHO = orjson.dumps(
    {
        "error": {
            "message": f"Invalid input near '{T['prompt']}' with key {T['upstream_key']}",
            "type": "invalid_request_error",
        }
    }
)
EXCHANGES: list[tuple[str, str, str, bool, Answer | Script]] = [
    ("oa-complete-stream", "openai", "openai", True, COMPLETE_ANSWER),
    ("oa-cut-whole", "openai", "openai", False, CUT_OPENAI),
    ("oa-cut-stream", "openai", "openai", True, CUT_OPENAI),
    ("an-cut-stream", "anthropic", "anthropic", True, CUT_ANTHROPIC),
    ("an-complete-whole", "anthropic", "anthropic", False, COMPLETE_ANSWER),
    ("an-cross-cut-stream", "openai", "anthropic", True, CUT_ANTHROPIC),
    ("oa-cross-complete-whole", "anthropic", "openai", False, COMPLETE_ANSWER),
    ("fwd-complete-whole", "openai", "openai", False, COMPLETE_ANSWER),
    ("oa-error-echo", "openai", "openai", False, Script(status=400, body=ERROR_ECHO)),
]


def script_upstream(upstream: FakeUpstream) -> None:
    for model, _, wire, stream, answer in EXCHANGES:
        if isinstance(answer, Script):
            upstream.script(model, answer)
        else:
            upstream.script(model, script_for(wire, answer, model, stream))


async def run_traffic(base: str) -> list[tuple[str, int, bytes]]:
    """Every exchange of EXCHANGES plus an invalid JSON body; (model, status, body) each."""
    out: list[tuple[str, int, bytes]] = []
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=20)) as session:

        async def one(model: str, client: str, stream: bool) -> None:
            if client == "openai":
                path = "/v1/chat/completions"
                headers = {"authorization": f"Bearer {T['client_key']}"}
                body: dict[str, Any] = {
                    "model": model,
                    "messages": openai_messages(),
                    "tools": TOOLS_OPENAI,
                    "stream": stream,
                }
            else:
                path = "/v1/messages"
                headers = {"x-api-key": T["client_key"], "anthropic-version": "2023-06-01"}
                body = {
                    "model": model,
                    "max_tokens": 100,
                    "messages": anthropic_messages(),
                    "tools": TOOLS_ANTHROPIC,
                    "stream": stream,
                }
            async with session.post(base + path, json=body, headers=headers) as resp:
                out.append((model, resp.status, await resp.read()))

        await asyncio.gather(*(one(m, c, s) for m, c, _, s, _ in EXCHANGES))
        bad = b'{"model": "oa-cut-whole", "messages": [{"role": "user", "content": "'
        bad += T["invalid_body"].encode()
        async with session.post(
            base + "/v1/chat/completions",
            data=bad,
            headers={"authorization": f"Bearer {T['client_key']}"},
        ) as resp:
            out.append(("invalid-json", resp.status, await resp.read()))
    return out


def expected_records() -> int:
    return len(EXCHANGES) + 1  # the invalid JSON body is recorded too


def leaks(haystack: bytes, names: tuple[str, ...]) -> list[str]:
    return [name for name in names if T[name].encode() in haystack]


def sqlite_count(db: Path) -> int:
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return conn.execute("SELECT COUNT(*) FROM audit_records").fetchone()[0]
    except sqlite3.OperationalError:
        return 0
    finally:
        conn.close()


async def wait_for_records(backend: Backend, db: Path | None, n: int) -> None:
    """Until the running gateway's writer has stored `n` records."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + 15
    while True:
        if db is not None:
            count = await asyncio.to_thread(sqlite_count, db)
        else:
            count = await backend.count()
        if count >= n:
            assert count == n
            return
        assert loop.time() < deadline, f"{count} of {n} records stored"
        await asyncio.sleep(0.05)


async def run_gateway(kind: str, tmp_path: Path, launch: Any, log_content: bool) -> dict[str, Any]:
    """Run the traffic through a `gateway serve`; return what came to rest, while it ran and
    after it stopped."""
    upstream = FakeUpstream()
    script_upstream(upstream)
    servers = Servers()
    out: dict[str, Any] = {}
    try:
        _, upstream_url = await servers.start(upstream.app())
        async with open_backend(kind, tmp_path) as backend:
            db = backend.path
            gateway = launch(config_text(upstream_url, backend.url, log_content))
            base = await gateway.ready()
            out["replies"] = await run_traffic(base)
            await wait_for_records(backend, db, expected_records())
            if db is not None:
                wal = Path(f"{db}-wal")
                out["db_running"] = db.read_bytes()
                out["wal_running"] = wal.read_bytes() if wal.exists() else b""
            gateway.signal(2 if kind == "sqlite" else 15)  # SIGINT / SIGTERM: both flush
            out["code"] = await gateway.wait(10)
            out["stderr"] = bytes(gateway.raw)
            out["lines"] = gateway.lines
            if db is not None:
                wal = Path(f"{db}-wal")
                out["db_after"] = db.read_bytes()
                out["wal_after"] = wal.read_bytes() if wal.exists() else b""
                out["rows"] = await backend.rows("SELECT * FROM audit_records")
            else:
                rows = await backend.rows("SELECT r::text FROM audit_records r")
                out["rows"] = rows
                out["pg_rows"] = "\n".join(text for (text,) in rows).encode()
    finally:
        await servers.close()
    out["upstream"] = upstream
    return out


def check_traffic_was_real(out: dict[str, Any]) -> None:
    """The tokens really travelled: upstream got keys and prompts, clients got answer text."""
    assert out["code"] == 0, out["lines"][-20:]
    upstream: FakeUpstream = out["upstream"]
    oa = upstream.last("oa-cut-whole")
    assert oa.headers["Authorization"] == f"Bearer {T['upstream_key']}"
    assert T["prompt"].encode() in oa.body and T["history_args"].encode() in oa.body
    an = upstream.last("an-complete-whole")
    assert an.headers["x-api-key"] == T["upstream_key"]
    assert T["tool_result"].encode() in an.body
    fwd = upstream.last("fwd-complete-whole")
    assert fwd.headers["Authorization"] == f"Bearer {T['client_key']}"  # forwarded
    replies = {model: (status, body) for model, status, body in out["replies"]}
    assert replies["invalid-json"][0] == 400
    assert replies["oa-error-echo"][0] == 400
    assert replies["oa-complete-stream"][0] == 200
    status, body = replies["an-complete-whole"]
    assert status == 200 and T["complete_args"].encode() in body
    status, body = replies["oa-cut-whole"]
    assert status == 200 and T["answer_text"].encode() in body
    assert len(out["rows"]) == expected_records()


@pytest.mark.parametrize("kind", BACKENDS)
async def test_no_secret_at_rest_with_log_content_off(kind, tmp_path, launch):
    out = await run_gateway(kind, tmp_path, launch, log_content=False)
    check_traffic_was_real(out)
    everything = tuple(TOKENS)
    assert leaks(out["stderr"], everything) == [], "secret in stderr"
    if kind == "sqlite":
        assert out["wal_running"], "the WAL should hold the fresh records while the gateway runs"
        assert leaks(out["db_running"], everything) == [], "secret in the SQLite file"
        assert leaks(out["wal_running"], everything) == [], "secret in the SQLite WAL"
        assert leaks(out["db_after"], everything) == [], "secret in the SQLite file at exit"
        assert leaks(out["wal_after"], everything) == [], "secret in the SQLite WAL at exit"
    else:
        assert leaks(out["pg_rows"], everything) == [], "secret in a PostgreSQL row"
    # The log still said what happened: one exchange line each, and no content warning.
    lines = [orjson.loads(line) for line in out["lines"] if line.startswith("{")]
    exchanges = [obj for obj in lines if obj.get("message") == "exchange"]
    assert len(exchanges) == expected_records()
    assert all("content" not in obj for obj in exchanges)
    assert not any("content logging" in obj.get("message", "") for obj in lines)


@pytest.mark.parametrize("kind", BACKENDS)
async def test_log_content_on_stores_text_but_never_keys(kind, tmp_path, launch):
    out = await run_gateway(kind, tmp_path, launch, log_content=True)
    check_traffic_was_real(out)
    lines = [orjson.loads(line) for line in out["lines"] if line.startswith("{")]
    warnings = [obj for obj in lines if obj["level"] == "warning"]
    assert any("content logging is ON" in obj["message"] for obj in warnings), warnings
    if kind == "sqlite":
        stored = out["db_running"] + out["wal_running"]
        assert out["db_after"]
        after = out["db_after"] + out["wal_after"]
    else:
        stored = after = out["pg_rows"]
    # The check is wired: with content logging on, text and arguments do reach the store...
    for name in ("prompt", "history_args", "tool_result", "answer_text", "complete_args"):
        assert T[name].encode() in stored, f"{name} not in the store with log_content on"
        assert T[name].encode() in after, f"{name} not in the store at exit"
        assert T[name].encode() in out["stderr"], f"{name} not in the log with log_content on"
    assert T["cut_args"].encode() in after  # a cut call's raw arguments, too
    # ...but keys never do.
    assert leaks(out["stderr"], KEYS) == []
    assert leaks(after, KEYS) == []
    if kind == "sqlite":
        assert leaks(stored, KEYS) == []
