"""The suite's guard against blocking the event loop is live: the gateway's own code doing file
I/O inside a running loop raises, and the same call outside a loop is fine."""

from __future__ import annotations

from pathlib import Path

import pytest
from blockbuster import BlockingError

from gateway.settings import load_settings


def config(tmp_path: Path) -> Path:
    path = tmp_path / "gateway.toml"
    path.write_text("[server]\nport = 8099\n")
    return path


async def test_a_blocking_call_of_the_gateway_inside_the_loop_fails_the_test(tmp_path):
    with pytest.raises(BlockingError):
        load_settings(config(tmp_path), {})


def test_the_same_call_outside_a_loop_is_allowed(tmp_path):
    assert load_settings(config(tmp_path), {}).server.port == 8099
