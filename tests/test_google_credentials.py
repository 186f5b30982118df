"""The token keeper alone (`providers.google_credentials.AccessTokens`), over scripted credentials.

The credentials are google-auth `Credentials` whose `refresh` follows a script (a token, a
failure, a wait), so each rule of the keeper is checked without a token endpoint: one refresh
for many waiting requests, a failure that fails fast and then heals, a bounded wait. The
end-to-end path through google-auth's real service-account flow is in tests/test_vertex.py.
"""

from __future__ import annotations

import asyncio
import datetime
import threading
from collections.abc import Sequence
from typing import Any

import google.auth.credentials
import google.auth.exceptions
import pytest

from gateway.errors import UpstreamCredentialsUnavailable
from providers.google_credentials import AccessTokens, TokenTiming

FAST = TokenTiming(retry_first=0.05, retry_max=0.05, wait_limit=5.0)


class ScriptedCredentials(google.auth.credentials.Credentials):
    """Each refresh takes the next step: "ok" mints a token, "fail" raises, "hold" waits for
    `release` first (in the keeper's thread) and then mints one."""

    def __init__(self, *steps: str, lifetime: float = 3600.0) -> None:
        super().__init__()
        self.steps = list(steps)
        self.lifetime = lifetime
        self.calls = 0
        self.release = threading.Event()

    def refresh(self, request: Any) -> None:
        self.calls += 1
        step = self.steps.pop(0) if len(self.steps) > 1 else self.steps[0]
        if step == "fail":
            raise google.auth.exceptions.RefreshError("invalid_grant: SECRET-DETAIL-91c2")
        if step == "hold":
            self.release.wait(timeout=10)
        self.token = f"tok-{self.calls}"
        now = datetime.datetime.now(datetime.UTC).replace(tzinfo=None)
        self.expiry = now + datetime.timedelta(seconds=self.lifetime)


def keeper(credentials: ScriptedCredentials, timing: TokenTiming = FAST) -> AccessTokens:
    def load(scopes: Sequence[str]) -> ScriptedCredentials:
        return credentials

    return AccessTokens("vx", load=load, timing=timing)


async def until(condition: Any, limit: float = 10.0) -> None:
    async with asyncio.timeout(limit):
        while not condition():
            await asyncio.sleep(0.01)


async def test_requests_waiting_for_the_first_token_share_one_refresh():
    credentials = ScriptedCredentials("hold")
    tokens = keeper(credentials)
    try:
        waiting = [asyncio.ensure_future(tokens.current()) for _ in range(20)]
        await until(lambda: credentials.calls == 1)
        credentials.release.set()
        assert set(await asyncio.gather(*waiting)) == {"tok-1"}
        assert await tokens.current() == "tok-1"  # valid: no refresh on the request path
        assert credentials.calls == 1
    finally:
        await tokens.close()


async def test_a_failed_refresh_fails_fast_and_the_keeper_heals():
    credentials = ScriptedCredentials("fail", "ok")
    tokens = keeper(credentials, TokenTiming(retry_first=0.3, retry_max=0.3))
    try:
        with pytest.raises(UpstreamCredentialsUnavailable) as first:
            await tokens.current()
        message = str(first.value)
        assert message == "upstream 'vx': could not obtain a Google access token (RefreshError)"
        # While the keeper waits to retry, requests fail at once, without another refresh.
        calls = credentials.calls
        with pytest.raises(UpstreamCredentialsUnavailable):
            await tokens.current()
        assert credentials.calls == calls == 1
        await until(lambda: credentials.calls == 2)
        await until(lambda: tokens.refreshes == 1)
        assert await tokens.current() == "tok-2"
    finally:
        await tokens.close()


async def test_the_wait_for_a_token_is_bounded():
    credentials = ScriptedCredentials("hold")
    tokens = keeper(credentials, TokenTiming(wait_limit=0.2))
    try:
        with pytest.raises(UpstreamCredentialsUnavailable) as raised:
            await tokens.current()
        assert str(raised.value) == "upstream 'vx': no Google access token within 0.2 s"
    finally:
        credentials.release.set()
        await tokens.close()


async def test_a_short_lived_token_is_refreshed_by_the_keeper_alone():
    credentials = ScriptedCredentials("ok", lifetime=0.4)
    tokens = keeper(credentials, TokenTiming(retry_first=0.05))
    try:
        assert await tokens.current() == "tok-1"
        await until(lambda: credentials.calls >= 2)  # half its life later, unasked
        assert await tokens.current() != "tok-1"
    finally:
        await tokens.close()


async def test_close_ends_the_keeper():
    credentials = ScriptedCredentials("ok", lifetime=0.4)
    tokens = keeper(credentials, TokenTiming(retry_first=0.05))
    await tokens.current()
    await tokens.close()
    calls = credentials.calls
    await asyncio.sleep(0.5)
    assert credentials.calls == calls


async def test_credentials_that_cannot_be_loaded_name_the_cause(monkeypatch, tmp_path):
    """The real ADC loader, pointed at a file that is not there: read in the keeper's thread
    (blockbuster fails a file read in the loop), reported by the error's class only."""
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(tmp_path / "missing.json"))
    tokens = AccessTokens("vx", timing=FAST)
    try:
        with pytest.raises(UpstreamCredentialsUnavailable) as raised:
            await tokens.current()
        assert str(raised.value) == (
            "upstream 'vx': could not obtain a Google access token (DefaultCredentialsError)"
        )
        assert "missing.json" not in str(raised.value)
    finally:
        await tokens.close()
