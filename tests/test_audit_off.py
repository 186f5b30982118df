"""`[audit] store = "off"`: the operator's explicit choice of no audit trail, on a real
`gateway serve` (one process and two workers). It serves as before, says at start that nothing
is recorded, opens and creates no store anywhere, and `gateway audit` on that configuration
says there is nothing to report instead of reading some other file."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.test_cli import GATEWAY, clean_env, curl_chat, start  # noqa: F401 - the fixture

OFF = (
    '[audit]\nstore = "off"\n\n[providers.mock]\nkind = "mock"\n\n'
    '[[routes]]\nmatch = "mock*"\nprovider = "mock"\n'
)


def files_under(folder: Path) -> list[Path]:
    return sorted(p for p in folder.rglob("*") if p.is_file()) if folder.exists() else []


@pytest.mark.parametrize("workers", ["1", "2"])
def test_a_gateway_with_the_audit_off_serves_and_records_nothing(start, tmp_path, workers):  # noqa: F811
    config = tmp_path / "gateway.toml"
    config.write_text(OFF)
    server = start("serve", "--config", str(config), "--port", "0", "--workers", workers)
    base = server.wait_ready()
    for _ in range(3):
        assert curl_chat(base)["choices"][0]["finish_reason"] == "stop"
    assert server.stop() == 0
    text = "\n".join(server.lines)
    assert 'audit store: off: exchanges are not recorded ([audit] store = "off")' in text
    assert "warning: the audit trail is off: no exchange is recorded ([audit] store)" in text
    assert '"level":"error"' not in text and "cannot open" not in text
    # No default store in the per-user data directory, none beside the configuration.
    assert files_under(tmp_path / "xdg-data") == []
    assert not [p for p in files_under(tmp_path) if p.suffix in (".db", ".db-wal")]


def test_gateway_audit_on_a_configuration_with_the_audit_off_says_so(tmp_path):
    config = tmp_path / "gateway.toml"
    config.write_text(OFF)
    done = subprocess.run(
        [GATEWAY, "audit", "--config", str(config)],
        capture_output=True,
        text=True,
        env={**clean_env(), "XDG_DATA_HOME": str(tmp_path / "xdg-data")},
        timeout=60,
    )
    assert done.returncode == 2
    assert done.stderr.strip() == (
        'gateway audit: the audit trail is off: exchanges are not recorded ([audit] store = "off")'
        ": nothing to report"
    )
    assert done.stdout == ""
