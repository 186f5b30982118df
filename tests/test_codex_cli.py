"""Codex CLI itself (`@openai/codex`, which runs offline) through the gateway's Responses
endpoint, against the scripted loopback upstream: a two-turn tool loop that runs a command, and a
cut answer that Codex must stop on with its own error, without running the half-written call.

`.ci/run` installs Codex with npm (`CODEX_BIN` points at it). Elsewhere the tests are skipped
when no `codex` is found, as the PostgreSQL ones are; under CI a missing Codex is a failure.
"""

from __future__ import annotations

import asyncio
import os
import shutil
from pathlib import Path

import pytest

from tests.conftest import skip_without
from tests.loop_upstream import LoopStack, Say

WIRES = ("openai", "anthropic")


def codex_binary() -> str:
    found = os.environ.get("CODEX_BIN") or shutil.which("codex")
    repo_local = Path(__file__).parent.parent / ".ci" / "node" / "node_modules" / ".bin" / "codex"
    if not found and repo_local.exists():
        found = str(repo_local)
    if found:
        return found
    if os.environ.get("CI") == "true":
        pytest.fail("Codex CLI is not installed: .ci/run must install @openai/codex")
    skip_without("codex", "not on the PATH, in .ci/node or at $CODEX_BIN")


@pytest.fixture
async def stack():
    async with LoopStack() as running:
        yield running


async def run_codex(stack: LoopStack, model: str, tmp_path: Path, prompt: str) -> tuple[int, str]:
    home, work = tmp_path / "codex-home", tmp_path / "work"
    home.mkdir()
    work.mkdir()
    provider = (
        f'model_providers.gw={{name="gw", base_url="{stack.urls["withhold"]}/v1", '
        'wire_api="responses"}'
    )
    process = await asyncio.create_subprocess_exec(
        codex_binary(),
        "exec",
        "--skip-git-repo-check",
        "-s",
        "danger-full-access",
        "-c",
        'model_provider="gw"',
        "-c",
        provider,
        "-m",
        model,
        prompt,
        cwd=work,
        env={**os.environ, "CODEX_HOME": str(home), "NO_COLOR": "1"},
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    out, _ = await asyncio.wait_for(process.communicate(), timeout=90)
    assert process.returncode is not None
    return process.returncode, out.decode(errors="replace")


@pytest.mark.parametrize("wire", WIRES)
async def test_codex_runs_a_two_turn_tool_loop_through_the_gateway(stack, tmp_path, wire):
    marker = tmp_path / "work" / "codex-was-here"
    model = stack.model_name(wire)
    command = {"cmd": f"touch {marker} && echo touched"}
    stack.upstream.script(model, Say(calls=[("exec_command", command)]), Say("DONE-codex"))

    code, out = await run_codex(stack, model, tmp_path, "Touch the marker file")

    assert code == 0, out
    assert "DONE-codex" in out
    assert marker.exists()  # Codex ran the call the gateway delivered
    first, second = stack.requests(model)
    tools = first["tools"]
    names = [t["function"]["name"] if wire == "openai" else t["name"] for t in tools]
    assert "exec_command" in names
    # The second turn carries the command's output, paired with the call's id.
    if wire == "openai":
        result = second["messages"][-1]
        assert result["role"] == "tool" and result["tool_call_id"] == "call_0_0"
        assert "touched" in result["content"]
    else:
        results = second["messages"][-1]["content"]
        assert results[0]["type"] == "tool_result" and results[0]["tool_use_id"] == "call_0_0"
        assert "touched" in str(results[0].get("content"))


@pytest.mark.parametrize("wire", WIRES)
async def test_codex_stops_with_its_own_error_on_a_cut_answer(stack, tmp_path, wire):
    marker = tmp_path / "work" / "must-not-exist"
    model = stack.model_name(wire)
    cut = '{"cmd": "touch ' + str(marker)  # the budget ran out inside the arguments
    stack.upstream.script(model, Say("Let me run it", calls=[("exec_command", cut)], stop="length"))

    code, out = await run_codex(stack, model, tmp_path, "Touch the marker file")

    assert code != 0, out
    assert "incomplete" in out.lower() and "max_output_tokens" in out
    assert not marker.exists()  # the half-written call was never delivered, never run
    assert len(stack.requests(model)) >= 1


async def test_codex_with_its_built_in_provider_falls_back_from_the_websocket(stack, tmp_path):
    """The README's first set-up: `openai_base_url` on Codex's built-in provider, which tries a
    WebSocket first; the gateway's 426 sends it to HTTP, against the built-in mock."""
    home, work = tmp_path / "codex-home", tmp_path / "work"
    home.mkdir()
    work.mkdir()
    (home / "config.toml").write_text(
        f'openai_base_url = "{stack.urls["withhold"]}/v1"\nmodel = "mock-text"\n'
    )
    process = await asyncio.create_subprocess_exec(
        codex_binary(),
        "exec",
        "--skip-git-repo-check",
        "Say hello",
        cwd=work,
        env={**os.environ, "CODEX_HOME": str(home), "OPENAI_API_KEY": "unused", "NO_COLOR": "1"},
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    out, _ = await asyncio.wait_for(process.communicate(), timeout=90)
    text = out.decode(errors="replace")
    assert process.returncode == 0, text
    assert "offline mock provider" in text
