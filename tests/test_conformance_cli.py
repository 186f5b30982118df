"""`gateway conformance` as a command: its arguments, exit statuses and printed configurations,
the shipped config files, its SSE reader, and that `gateway serve` never imports it.

Exit status: 2 and one line naming the argument for a bad one; 1 when the target cannot be
reached; 3 when some case is hidden (a LossyStub that says stop for everything); 0 otherwise.
"""

from __future__ import annotations

import subprocess
import sys
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import pytest
import yaml

from gateway.cli import main
from gateway.conformance import configs
from gateway.conformance.sse import Event, SseReader
from gateway.conformance.upstream import Background
from gateway.settings import parse_settings
from tests.conftest import free_port
from tests.served import LoopServers
from tests.test_conformance_stub import LossyStub

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize(
    ("args", "names"),
    [
        ([], "URL"),
        (["ftp://h"], "URL"),
        (["http://127.0.0.1:9", "--format", "grpc"], "--format"),
        (["http://127.0.0.1:9", "--wires", "gemini"], "--wires"),
        (["http://127.0.0.1:9", "--only", "max-tokens,nope"], "--only"),
        (["http://127.0.0.1:9", "--stall", "-1"], "--stall"),
        (["http://127.0.0.1:9", "--timeout", "soon"], "--timeout"),
        (["http://127.0.0.1:9", "--concurrency", "0"], "--concurrency"),
        (["http://127.0.0.1:9", "--upstream-port", "70000"], "--upstream-port"),
        (["http://127.0.0.1:9", "--key-env", "CONFORMANCE_NO_SUCH_VAR"], "--key-env"),
        (["http://127.0.0.1:9", "--header", "no colon"], "--header"),
        (["http://127.0.0.1:9", "--header", "x-config: @/no/such/file"], "--header"),
        (["--print-config", "nginx"], "--print-config"),
        (["http://127.0.0.1:9", "--no-such-flag"], "--no-such-flag"),
    ],
)
def test_a_bad_argument_is_one_line_and_status_2(
    args: list[str], names: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert status_of(["conformance", *args]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1, err
    assert names in err and err.startswith("gateway"), err


def status_of(argv: list[str]) -> Any:
    """`main`'s exit status, also when argparse exits on its own."""
    try:
        return main(argv)
    except SystemExit as exc:
        return exc.code


@pytest.mark.parametrize(
    ("kind", "path"),
    [
        ("litellm", "config/conformance-litellm.yaml"),
        ("portkey", "config/conformance-portkey.json"),
    ],
)
def test_the_shipped_configs_are_what_print_config_prints(
    kind: str, path: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["conformance", "--print-config", kind]) == 0
    printed = capsys.readouterr().out
    assert printed == (ROOT / path).read_text()
    assert printed == configs.render(kind, configs.DEFAULT_PORT)


def test_each_printed_config_routes_every_wire_to_the_upstream() -> None:
    toml = tomllib.loads(configs.render("gateway", 18123))
    settings = parse_settings(toml)
    assert [route.match for route in settings.routes] == [
        "conf-openai-*",
        "conf-anthropic-*",
        "conf-responses-*",
    ]
    for provider in settings.providers.values():
        assert provider.base_url is not None and "127.0.0.1:18123" in provider.base_url
        assert provider.idle_timeout == configs.IDLE_TIMEOUT and provider.retry.attempts == 1
    litellm = yaml.safe_load(configs.render("litellm", 18123))
    models = {entry["model_name"]: entry["litellm_params"] for entry in litellm["model_list"]}
    assert models["conf-anthropic-*"]["api_base"] == "http://127.0.0.1:18123"
    assert models["conf-responses-*"]["model"].startswith("openai/responses/")
    portkey = orjson.loads(configs.render("portkey", 18123))
    assert {t["custom_host"] for t in portkey["targets"]} == {"http://127.0.0.1:18123/v1"}


def test_an_unreachable_target_is_status_1(capsys: pytest.CaptureFixture[str]) -> None:
    upstream = Background("127.0.0.1", 0)
    port = upstream.start()
    try:
        nothing = f"http://127.0.0.1:{free_port()}"
        assert main(["conformance", nothing, "--upstream-port", str(port), "--no-progress"]) == 1
    finally:
        upstream.stop()
    err = capsys.readouterr().err
    assert "cannot reach" in err and len(err.strip().splitlines()) == 1


class StubStack(LoopServers):
    def __init__(self, upstream: str, mode: str) -> None:
        super().__init__()
        self.stub = LossyStub(upstream, mode)

    async def _start(self) -> None:
        self.stub.session = aiohttp.ClientSession()
        self.url = await self._serve(self.stub.app())

    async def _stop(self) -> None:
        assert self.stub.session is not None
        await self.stub.session.close()
        await super()._stop()


@pytest.fixture(scope="module")
def upstream_port() -> Iterator[int]:
    upstream = Background("127.0.0.1", 0)
    yield upstream.start()
    upstream.stop()


@pytest.mark.parametrize(("mode", "status"), [("stop-everything", 3), ("drop-usage", 0)])
def test_the_exit_status_says_whether_a_case_is_hidden(
    mode: str, status: int, upstream_port: int, tmp_path: Path
) -> None:
    stack = StubStack(f"http://127.0.0.1:{upstream_port}", mode)
    stack.start()
    out = tmp_path / "out.json"
    try:
        args = [stack.url, "--upstream-port", str(upstream_port), "--no-progress"]
        args += ["--only", "max-tokens", "--format", "openai", "--wires", "openai"]
        assert main(["conformance", *args, "--json", str(out)]) == status
    finally:
        stack.stop()
    doc = orjson.loads(out.read_bytes())
    verdict = "hidden" if status else "faithful"
    assert {r["verdict"] for r in doc["results"]} == {verdict}
    assert {r["id"] for r in doc["results"]} == {
        "max-tokens/openai/openai/whole",
        "max-tokens/openai/openai/stream",
    }
    first = doc["results"][0]
    assert {"id", "case", "client_format", "upstream_wire", "stream", "verdict", "lost"} <= set(
        first
    )
    assert first["saw"]["http_status"] == 200


SERVE_IMPORTS = """
import sys
import gateway.cli
from gateway.app import build_app
from gateway.settings import default_settings
gateway.cli.parse_args(["serve"])
build_app(default_settings({}))
print("\\n".join(sorted(m for m in sys.modules if m.startswith("gateway.conformance"))))
"""


def test_gateway_serve_carries_only_the_argument_parser() -> None:
    result = subprocess.run(
        [sys.executable, "-c", SERVE_IMPORTS], capture_output=True, text=True, timeout=120, env={}
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["gateway.conformance", "gateway.conformance.arguments"]


# --- the SSE reader ----------------------------------------------------------------------------


def read(*pieces: bytes) -> tuple[list[Event], bool]:
    reader = SseReader()
    events = [event for piece in pieces for event in reader.feed(piece)]
    return events, reader.pending


def test_sse_line_ends_comments_and_fields() -> None:
    events, pending = read(b": hi\r\nevent: a\r\ndata: 1\r\n\r\ndata:2\r", b"\n\rdata: 3\n\n")
    assert events == [Event("a", "1", 1), Event(None, "2", 1), Event(None, "3", 1)]
    assert not pending


def test_sse_multi_line_data_joins_with_a_newline() -> None:
    events, _ = read(b'data: {"a":\ndata: 1}\n\n')
    assert events == [Event(None, '{"a":\n1}', 2)] and orjson.loads(events[0].data) == {"a": 1}


def test_sse_an_event_without_its_blank_line_is_not_dispatched() -> None:
    events, pending = read(b"data: one\n\ndata: two\n")
    assert [event.data for event in events] == ["one"] and pending


def test_sse_utf8_split_across_reads_is_whole() -> None:
    text = "data: café\n\n".encode()
    cut = text.index(b"\xc3") + 1
    events, _ = read(text[:cut], text[cut:])
    assert events == [Event(None, "café", 1)]


def test_print_config_for_a_port(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["conformance", "--print-config", "gateway", "--upstream-port", "18555"]) == 0
    assert 'base_url = "http://127.0.0.1:18555/v1"' in capsys.readouterr().out
