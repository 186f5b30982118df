"""The trust store is read when the first TLS upstream needs it (providers.tls_trust).

- a process that imports aiohttp through `import_aiohttp` holds an empty store, with the
  operator's SSL_CERT_FILE and SSL_CERT_DIR as they were; its first TLS connection reads the
  store (a certificate trusted there is accepted) and a certificate not in it is still refused;
- `gateway serve`, in one process and with two workers, answers through an https upstream that
  only the operator's SSL_CERT_FILE trusts: the store is read inside the serving process.
"""

from __future__ import annotations

import json
import ssl
import subprocess
import sys
from pathlib import Path

import openai
import orjson
import pytest
from aiohttp import web

from tests.scenarios import Answer, script_for
from tests.test_shutdown import GatewayProcess
from tests.upstream import FakeUpstream


def certificate(folder: Path, name: str) -> tuple[Path, Path]:
    """A self-signed certificate for 127.0.0.1 (its own CA) and its key."""
    folder.mkdir(parents=True, exist_ok=True)
    key, cert = folder / f"{name}.key", folder / f"{name}.pem"
    subprocess.run(
        [
            *("openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1"),
            *("-subj", f"/CN={name}", "-addext", "subjectAltName=IP:127.0.0.1"),
            *("-keyout", str(key), "-out", str(cert)),
        ],
        check=True,
        capture_output=True,
    )
    return cert, key


PROBE = """
import asyncio, json, os, ssl, sys
before = {n: os.environ.get(n) for n in ("SSL_CERT_FILE", "SSL_CERT_DIR")}
from providers import tls_trust
tls_trust.import_aiohttp()
from providers.http_pool import DEFAULT_TLS, ConnectionPool, Origin, PoolLimits
after = {n: os.environ.get(n) for n in ("SSL_CERT_FILE", "SSL_CERT_DIR")}
empty = DEFAULT_TLS.cert_store_stats()["x509_ca"]
was_deferred = tls_trust.deferred(DEFAULT_TLS)

def server_context(name):
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(sys.argv[1] + f"/{name}.pem", sys.argv[1] + f"/{name}.key")
    return context

async def main():
    async def handle(reader, writer):
        writer.close()
    out = {}
    for name in ("trusted", "stranger"):
        server = await asyncio.start_server(handle, "127.0.0.1", 0, ssl=server_context(name))
        port = server.sockets[0].getsockname()[1]
        pool = ConnectionPool("up", PoolLimits(), connect_timeout=5)
        async with server:
            try:
                conn, _ = await pool.acquire(Origin("127.0.0.1", port, True))
                out[name] = "connected"
            except ssl.SSLCertVerificationError as exc:
                out[name] = exc.verify_message
        await pool.close()
    return out

out = asyncio.run(main())
print(json.dumps({"before": before, "after": after, "empty": empty, "was_deferred": was_deferred,
                  "loaded": DEFAULT_TLS.cert_store_stats()["x509_ca"],
                  "still_deferred": tls_trust.deferred(DEFAULT_TLS), **out}))
"""


def test_the_store_is_read_at_the_first_tls_connection_and_still_verifies(tmp_path) -> None:
    folder = tmp_path / "certs"
    trusted, _ = certificate(folder, "trusted")
    certificate(folder, "stranger")
    env = {"SSL_CERT_FILE": str(trusted), "PATH": "/usr/bin:/bin"}  # SSL_CERT_DIR unset
    done = subprocess.run(
        [sys.executable, "-c", PROBE, str(folder)],
        env=env,
        cwd=Path(__file__).parent.parent,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout)
    assert seen["before"] == seen["after"] == {"SSL_CERT_FILE": str(trusted), "SSL_CERT_DIR": None}
    assert seen["empty"] == 0 and seen["was_deferred"] is True
    assert seen["trusted"] == "connected"
    assert seen["stranger"] == "self-signed certificate"
    assert seen["loaded"] == 1 and seen["still_deferred"] is False


def config(tmp_path: Path, upstream: str) -> Path:
    path = tmp_path / "gateway.toml"
    path.write_text(
        f'[audit]\nstore = "sqlite:///{tmp_path / "trail.db"}"\n\n'
        f'[providers.up]\nkind = "openai"\nbase_url = "{upstream}/v1"\napi_key = "sk-up"\n\n'
        '[[routes]]\nmatch = "*"\nprovider = "up"\n'
    )
    return path


async def tls_upstream(upstream: FakeUpstream, cert: Path, key: Path) -> tuple[web.AppRunner, int]:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    runner = web.AppRunner(upstream.app())
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=context)
    await site.start()
    return runner, runner.addresses[0][1]


@pytest.mark.parametrize("workers", ["1", "2"])
async def test_the_gateway_answers_through_an_upstream_only_the_operators_store_trusts(
    tmp_path, workers
) -> None:
    cert, key = certificate(tmp_path / "certs", "upstream")
    upstream = FakeUpstream()
    upstream.script("m-tls", script_for("openai", Answer(text="over tls"), "m-tls", stream=False))
    runner, port = await tls_upstream(upstream, cert, key)
    gateway = GatewayProcess(
        config(tmp_path, f"https://127.0.0.1:{port}"),
        tmp_path,
        "--workers",
        workers,
        env={"SSL_CERT_FILE": str(cert)},
    )
    try:
        url = await gateway.ready()
        client = openai.AsyncOpenAI(base_url=f"{url}/v1", api_key="sk-client", max_retries=0)
        answer = await client.chat.completions.create(
            model="m-tls", messages=[{"role": "user", "content": "hi"}]
        )
        await client.close()
    finally:
        gateway.kill()
        await runner.cleanup()
    assert answer.choices[0].message.content == "over tls"
    assert answer.choices[0].finish_reason == "stop"
    sent = orjson.loads(upstream.last("m-tls").body)
    assert sent["model"] == "m-tls"


async def test_an_upstream_the_store_does_not_trust_is_refused_by_name(tmp_path) -> None:
    """The same gateway without the operator's store: the handshake fails closed."""
    cert, key = certificate(tmp_path / "certs", "upstream")
    upstream = FakeUpstream()
    upstream.script("m-tls", script_for("openai", Answer(text="x"), "m-tls", stream=False))
    runner, port = await tls_upstream(upstream, cert, key)
    gateway = GatewayProcess(config(tmp_path, f"https://127.0.0.1:{port}"), tmp_path)
    try:
        url = await gateway.ready()
        client = openai.AsyncOpenAI(base_url=f"{url}/v1", api_key="sk-client", max_retries=0)
        with pytest.raises(openai.APIStatusError) as info:
            await client.chat.completions.create(
                model="m-tls", messages=[{"role": "user", "content": "hi"}]
            )
        await client.close()
    finally:
        gateway.kill()
        await runner.cleanup()
    assert info.value.status_code == 502
    assert b"certificate verify failed: self-signed certificate" in info.value.response.content
    assert upstream.received["m-tls"] == []


SERVING = """
import sys, threading, time, os
def report():
    while getattr(sys.modules.get("providers.http_pool"), "DEFAULT_TLS", None) is None:
        time.sleep(0.01)
    from providers import http_pool, tls_trust
    print(tls_trust.deferred(http_pool.DEFAULT_TLS), flush=True)
    os._exit(0)
threading.Thread(target=report, daemon=True).start()
if sys.argv[1] == "worker":
    import gateway.worker
    gateway.worker.preload()
else:
    from gateway.cli import main
    main(["serve", "--workers", "1", "--port", "0", "--config", sys.argv[2]])
time.sleep(30)
"""


@pytest.mark.parametrize("process", ["worker", "serve"])
def test_a_serving_process_imports_aiohttp_without_reading_the_store(tmp_path, process) -> None:
    """A worker's preload and `gateway serve` in one process both leave the store unread."""
    path = config(tmp_path, "http://127.0.0.1:9")
    done = subprocess.run(
        [sys.executable, "-c", SERVING, process, str(path)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.stdout.strip() == "True", done.stderr
