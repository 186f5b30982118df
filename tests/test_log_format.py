"""Log level and form: `gateway serve --log-level/--log-format`, `[logging]`, the console form.

The real `gateway serve` runs on the offline mock (gateway.toml in tmp_path) and answers three
exchanges through the openai and anthropic SDKs (a whole answer, a cut stream, a refusal); its
stderr is read back. Either form has exactly one line per exchange, naming the exchange's id,
provider, model, stop reason and truncation; the flags win over the file; `warning` leaves the
exchange lines out; `auto` is JSON into a pipe and the console form on a terminal (a pty);
workers write the same form. A bad value is one clear line and exit status 2.
"""

from __future__ import annotations

import asyncio
import logging
import os
import pty
import re
import signal
import subprocess
import threading
from pathlib import Path
from typing import Any

import anthropic
import openai
import orjson
import pytest

from gateway.audit.record import AuditRecord
from gateway.log_console import ConsoleFormatter
from gateway.logs import FIELDS
from tests.mock_config import mock_config
from tests.test_shutdown import GATEWAY, GatewayProcess, clean_env

# HH:MM:SS.mmm LEVEL exchange id=... ... 12ms
CONSOLE_EXCHANGE = re.compile(
    r"^\d\d:\d\d:\d\d\.\d{3} INFO exchange id=(\S+) .* \d+ms( worker=\d)?$"
)


def write_config(tmp_path: Path, logging_table: str = "") -> Path:
    path = tmp_path / "gateway.toml"
    path.write_text(mock_config(tmp_path / "trail.db", tail=logging_table))
    return path


async def three_exchanges(base: str) -> dict[str, str]:
    """request id -> what it was: a whole answer, a stream cut at max tokens, a refusal."""
    ids = {}
    async with openai.AsyncOpenAI(base_url=f"{base}/v1", api_key="k", max_retries=0) as oa:
        raw = await oa.chat.completions.with_raw_response.create(
            model="mock-text", messages=[{"role": "user", "content": "hi"}]
        )
        ids[raw.headers["x-request-id"]] = "whole"
        with pytest.raises(openai.NotFoundError) as caught:
            await oa.chat.completions.create(
                model="nowhere", messages=[{"role": "user", "content": "hi"}]
            )
        ids[caught.value.response.headers["x-request-id"]] = "refused"
    async with anthropic.AsyncAnthropic(base_url=base, api_key="k", max_retries=0) as an:
        raw = await an.messages.with_raw_response.create(
            model="mock-tool-cut",
            max_tokens=64,
            messages=[{"role": "user", "content": "hi"}],
            stream=True,
        )
        async for _ in await raw.parse():
            pass
        ids[raw.headers["x-request-id"]] = "cut"
    return ids


async def serve(tmp_path: Path, logging_table: str, *flags: str) -> tuple[list[str], dict]:
    """Run the gateway, send three exchanges, stop it: its stderr lines, and the ids."""
    gateway = GatewayProcess(write_config(tmp_path, logging_table), tmp_path, *flags)
    try:
        ids = await three_exchanges(await gateway.ready())
        gateway.signal(signal.SIGTERM)
        assert await gateway.wait(15) == 0
    finally:
        gateway.kill()
    return gateway.lines, ids


def console_lines(lines: list[str]) -> dict[str, str]:
    """id -> its console exchange line; fails on a second line for one id."""
    found: dict[str, str] = {}
    for line in lines:
        match = CONSOLE_EXCHANGE.match(line)
        if match:
            assert match[1] not in found, f"two lines for {match[1]}"
            found[match[1]] = line
    return found


def json_exchange_lines(lines: list[str]) -> dict[str, dict[str, Any]]:
    found: dict[str, dict[str, Any]] = {}
    for line in lines:
        if line.startswith("{"):
            obj = orjson.loads(line)
            if obj.get("message") == "exchange":
                assert obj["id"] not in found, f"two lines for {obj['id']}"
                found[obj["id"]] = obj
    return found


def assert_console(lines: list[str], ids: dict[str, str]) -> None:
    found = console_lines(lines)
    assert set(found) == set(ids)
    assert not [line for line in lines if line.startswith("{")], "a JSON line in console form"
    for request_id, what in ids.items():
        line = found[request_id]
        if what == "refused":
            assert "status=404" in line and "error=ModelNotFound" in line
            assert "truncated=false" in line
            continue
        assert "provider=mock" in line
        if what == "whole":
            assert " client=openai " in line and " model=mock-text " in line
            assert " stop=stop native=end_turn truncated=false " in line
        else:
            assert " client=anthropic " in line and " stream=true " in line
            assert " stop=length native=max_tokens truncated=true cut=length " in line
            assert " withheld=1 " in line


def assert_json(lines: list[str], ids: dict[str, str]) -> None:
    found = json_exchange_lines(lines)
    assert set(found) == set(ids)
    for request_id, what in ids.items():
        obj = found[request_id]
        assert obj["level"] == "info" and obj["logger"] == "gateway.exchange"
        if what == "whole":
            assert (obj["provider"], obj["model"], obj["stop_reason"]) == (
                "mock",
                "mock-text",
                "stop",
            )
            assert obj["truncated"] is False
        elif what == "cut":
            assert (obj["truncated"], obj["cut_reason"]) == (True, "length")
        else:
            assert (obj["http_status"], obj["error_class"]) == (404, "ModelNotFound")


async def test_the_files_console_form_one_line_per_exchange(tmp_path):
    lines, ids = await serve(tmp_path, '[logging]\nformat = "console"\n')
    assert_console(lines, ids)


async def test_the_format_flag_wins_over_the_file(tmp_path):
    lines, ids = await serve(tmp_path, '[logging]\nformat = "console"\n', "--log-format", "json")
    assert_json(lines, ids)
    assert not console_lines(lines)


async def test_level_warning_leaves_out_the_exchange_lines(tmp_path):
    lines, ids = await serve(tmp_path, '[logging]\nlevel = "warning"\n')
    assert len(ids) == 3
    assert not json_exchange_lines(lines) and not console_lines(lines)
    assert not [line for line in lines if '"level":"info"' in line]


async def test_the_level_flag_wins_over_the_file_and_auto_is_json_into_a_pipe(tmp_path):
    lines, ids = await serve(tmp_path, '[logging]\nlevel = "warning"\n', "--log-level", "INFO")
    assert_json(lines, ids)


async def test_workers_write_the_same_form(tmp_path):
    lines, ids = await serve(tmp_path, "", "--workers", "2", "--log-format", "console")
    assert_console(lines, ids)
    assert all(re.search(r" worker=[12]$", line) for line in console_lines(lines).values())


async def test_auto_is_the_console_form_on_a_terminal(tmp_path):
    config = write_config(tmp_path)
    main, terminal = pty.openpty()
    env = {**clean_env(), "XDG_DATA_HOME": str(tmp_path / "xdg-data")}
    process = subprocess.Popen(
        [GATEWAY, "serve", "--config", str(config), "--port", "0"],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=terminal,
    )
    os.close(terminal)
    output = bytearray()
    listening = threading.Event()

    def read() -> None:
        while True:
            try:
                chunk = os.read(main, 4096)
            except OSError:  # the terminal's other end closed
                break
            if not chunk:
                break
            output.extend(chunk)
            if b"listening on" in output:
                listening.set()
        listening.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        assert await asyncio.to_thread(listening.wait, 20)
        text = output.decode()
        base = re.search(r"listening on (http://\S+)", text)
        assert base is not None, text
        ids = await three_exchanges(base[1])
        process.send_signal(signal.SIGTERM)
        assert await asyncio.to_thread(process.wait, 15) == 0
        await asyncio.to_thread(reader.join, 5)
    finally:
        if process.poll() is None:
            process.kill()
        os.close(main)
    lines = output.decode().replace("\r\n", "\n").splitlines()
    assert_console(lines, ids)


@pytest.mark.parametrize(
    ("flag", "value"), [("--log-level", "loud"), ("--log-format", "xml"), ("--log-level", "")]
)
def test_a_bad_flag_is_one_clear_line(flag, value):
    result = subprocess.run(
        [GATEWAY, "serve", flag, value], capture_output=True, text=True, timeout=30
    )
    assert result.returncode == 2
    lines = result.stderr.splitlines()
    assert len(lines) == 1
    assert f"argument {flag}: invalid choice: {value!r}" in lines[0]
    assert "(choose from " in lines[0] and "(see gateway serve --help)" in lines[0]


def exchange_record(**changes: Any) -> logging.LogRecord:
    record = AuditRecord("req-1", 1_700_000_000.0, "openai", stream=False)
    record.ended_at = record.started_at + 0.25
    for name, value in changes.items():
        setattr(record, name, value)
    log = logging.LogRecord("gateway.exchange", logging.INFO, "", 0, "exchange", None, None)
    setattr(log, FIELDS, record.log_json())
    return log


def test_the_console_line_never_shows_content_and_escapes_what_a_client_chose():
    line = ConsoleFormatter({"worker": 2}).format(
        exchange_record(
            model="gpt\x1b[2J\nevil",
            provider="openai",
            content={"request": {"messages": [{"content": "SECRET-TEXT"}]}},
            withheld_tool_calls=[{"id": "c1", "name": "run"}],
            truncated=True,
            cut_reason="length",
            stop_reason="length",
            native_stop_reason="length",
            input_tokens=5,
            output_tokens=7,
        )
    )
    assert "\n" not in line and "\x1b" not in line
    assert "SECRET-TEXT" not in line
    assert ' model="gpt\\u001b[2J\\nevil" ' in line
    assert " truncated=true cut=length withheld=1 tokens=5/7 " in line
    assert line.endswith(" 250ms worker=2")


def test_other_lines_keep_their_fields_in_the_console_form():
    log = logging.LogRecord(
        "gateway.supervisor", logging.WARNING, "", 0, "worker %d died", (2,), None
    )
    log.pid = 123
    log.cause = "signal 9 (SIGKILL)"
    line = ConsoleFormatter().format(log)
    assert re.fullmatch(
        r'\d\d:\d\d:\d\d\.\d{3} WARNING worker 2 died pid=123 cause="signal 9 \(SIGKILL\)"',
        line,
    )
