"""The README's own install (`pip install .`, no test extra) starts every provider kind: each
kind's packages are the project's dependencies, not something the test extra happens to bring
(google-auth's token refresh needs `requests`, which google-auth does not depend on).

One fresh venv per session; pip installs from the package index, which this project's CI reaches.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from providers.registry import KINDS

ROOT = Path(__file__).resolve().parents[1]
# Where a kind needs more than a base URL and a key to be built (settings check these).
EXTRA = {
    "vertex": {"project": "fresh-install", "region": "us-central1"},
    "azure_openai": {"api_version": "2024-10-21"},
    "azure_openai_responses": {"api_version": "2024-10-21"},
    "bedrock": {"region": "us-east-1"},
}
LOOPBACK_NOTHING = "http://127.0.0.1:9"  # the discard port: never asked, the gateway only starts


@pytest.fixture(scope="session")
def fresh_venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    venv = tmp_path_factory.mktemp("fresh") / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    pip = subprocess.run(
        [str(venv / "bin" / "pip"), "install", "-q", str(ROOT)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    if pip.returncode != 0:
        unreachable = ("Could not find a version", "No matching distribution", "connection")
        if any(word in pip.stderr for word in unreachable):
            pytest.skip(f"no package index reachable for a fresh install: {pip.stderr[-300:]}")
        pytest.fail(f"pip install . failed:\n{pip.stderr[-3000:]}")
    return venv


def every_kind_config() -> str:
    lines = []
    for kind in sorted(KINDS):
        lines.append(f"[providers.p_{kind}]")
        lines.append(f'kind = "{kind}"')
        if kind != "mock":
            lines.append(f'base_url = "{LOOPBACK_NOTHING}"')
        for key, value in EXTRA.get(kind, {}).items():
            lines.append(f'{key} = "{value}"')
        lines.append("")
    for kind in sorted(KINDS):
        lines += ["[[routes]]", f'match = "m-{kind}"', f'provider = "p_{kind}"', ""]
    return "\n".join(lines)


def test_every_provider_kind_starts_after_the_readmes_install(fresh_venv: Path, tmp_path: Path):
    config = tmp_path / "every-kind.toml"
    config.write_text(every_kind_config())
    gateway = fresh_venv / "bin" / "gateway"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI", "ANTHROPIC"))}
    env["XDG_DATA_HOME"] = str(tmp_path)  # its audit trail lands here
    process = subprocess.Popen(
        [str(gateway), "serve", "--config", str(config), "--port", "0", "--workers", "1"],
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=tmp_path,  # never the working tree: the installed package, not ./gateway
    )
    said: list[str] = []
    try:
        assert process.stderr is not None
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            line = process.stderr.readline()
            if not line:
                break
            said.append(line)
            if "listening on" in line:
                break
        assert any("listening on" in line for line in said), "".join(said)[-3000:]
        assert not any("needs" in line and "pip install" in line for line in said), said
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=30)
