"""Google OAuth access tokens from Application Default Credentials, kept fresh off the request path.

google-auth is blocking (it reads key files, signs JWTs and POSTs to the token endpoint with
`requests`), so every call into it runs in a thread, in one background task per provider that
refreshes ahead of expiry. A request takes the current token without waiting; it waits only when
none is valid (the first request, or after the keeper fell behind), and never longer than
`wait_limit`. A failed refresh is remembered: requests arriving while no token is valid fail at
once with `UpstreamCredentialsUnavailable` (a 502 in the client's format) while the keeper retries
with backoff, instead of each one hammering the token endpoint or hanging.

    tokens = AccessTokens("vertex")
    headers["authorization"] = "Bearer " + await tokens.current()
    ...
    await tokens.close()

Messages name the provider and the exception's class, never a token, a key or the exception's
text (it can quote the token endpoint's answer).
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Final

import google.auth
import google.auth.credentials
import google.auth.transport.requests

from gateway.errors import UpstreamCredentialsUnavailable

log = logging.getLogger("gateway.credentials")

CLOUD_PLATFORM: Final = "https://www.googleapis.com/auth/cloud-platform"


@dataclass(frozen=True, slots=True)
class TokenTiming:
    """When to refresh and when to stop using a token, as parts of its lifetime (capped in
    seconds: a one-hour token is refreshed five minutes before it expires and used until 30 s
    before; a short one, at half its life and until its last tenth)."""

    refresh_ahead: float = 300.0  # refresh this long before expiry at most, half the life at least
    expiry_skew: float = 30.0  # stop using a token this long before expiry, or a tenth of its life
    default_lifetime: float = 3600.0  # credentials that report no expiry
    retry_first: float = 1.0  # the wait after a failed refresh, doubled up to retry_max
    retry_max: float = 30.0
    http_timeout: float = 30.0  # one call to the token endpoint (google-auth's default is 120 s)
    wait_limit: float = 60.0  # the longest a request waits for a token


DEFAULT_TIMING: Final = TokenTiming()


def load_default(scopes: Sequence[str]) -> google.auth.credentials.Credentials:
    """Application Default Credentials: `GOOGLE_APPLICATION_CREDENTIALS` (a service account or
    authorized user JSON), gcloud's file, or the metadata server. Blocking."""
    credentials, _project = google.auth.default(scopes=list(scopes))
    return credentials


class _Request(google.auth.transport.requests.Request):
    """google-auth's requests transport with a bounded default timeout."""

    def __init__(self, timeout: float) -> None:
        super().__init__()
        self._timeout = timeout

    def __call__(
        self,
        url: str,
        method: str = "GET",
        body: bytes | None = None,
        headers: Any = None,
        timeout: float | None = None,
        **kwargs: Any,
    ) -> Any:
        call = super().__call__
        return call(url, method, body, headers, timeout or self._timeout, **kwargs)  # type: ignore[no-untyped-call]


def _refresh(
    credentials: google.auth.credentials.Credentials, request: _Request
) -> tuple[str, float | None]:
    """Refresh (blocking) and return the token and the seconds it has left, when known."""
    credentials.refresh(request)  # type: ignore[no-untyped-call]
    token = credentials.token
    if not isinstance(token, str) or not token:
        raise ValueError("the token endpoint returned no access token")
    expiry = credentials.expiry  # naive UTC, as google-auth keeps it
    if expiry is None:
        return token, None
    now = datetime.datetime.now(datetime.UTC).replace(tzinfo=None)
    return token, (expiry - now).total_seconds()


class AccessTokens:
    """One provider's access token, refreshed by a background task in threads (module docstring).

    The task starts with `begin()` (the provider's `start`, once the server runs) or the first
    `current()` call, so it runs on the loop that serves requests.
    """

    def __init__(
        self,
        provider: str,
        scopes: Sequence[str] = (CLOUD_PLATFORM,),
        load: Callable[[Sequence[str]], google.auth.credentials.Credentials] = load_default,
        timing: TokenTiming = DEFAULT_TIMING,
    ) -> None:
        self._provider = provider
        self._scopes = tuple(scopes)
        self._load = load
        self._timing = timing
        self._token: str | None = None
        self._usable_until = 0.0  # loop time
        self._failure: str | None = None  # why the last attempt failed, until one succeeds
        self._attempted: asyncio.Event | None = None  # set when the attempt under way ends
        self._task: asyncio.Task[None] | None = None
        self.refreshes = 0  # tokens obtained so far (for the record and for tests)

    async def current(self) -> str:
        """A valid token; waits only when there is none, and fails fast after a failed refresh."""
        loop = asyncio.get_running_loop()
        token = self._token
        if token is not None and loop.time() < self._usable_until:
            return token
        self._start(loop)
        if self._failure is not None:  # a fresh exception each time: one raised again and
            raise UpstreamCredentialsUnavailable(self._failure)  # again grows its traceback
        attempted = self._attempted
        assert attempted is not None  # set by _start
        try:
            async with asyncio.timeout(self._timing.wait_limit):
                await attempted.wait()
        except TimeoutError:
            raise UpstreamCredentialsUnavailable(
                f"upstream {self._provider!r}: no Google access token within "
                f"{self._timing.wait_limit:g} s"
            ) from None
        token = self._token
        if token is not None and loop.time() < self._usable_until:
            return token
        raise UpstreamCredentialsUnavailable(
            self._failure or f"upstream {self._provider!r}: no valid Google access token"
        )

    def begin(self) -> None:
        """Starts the keeper on the running loop ahead of the first `current()`."""
        self._start(asyncio.get_running_loop())

    def _start(self, loop: asyncio.AbstractEventLoop) -> None:
        task = self._task
        if task is not None and not task.done() and task.get_loop() is loop:
            return
        self._attempted = asyncio.Event()
        self._task = loop.create_task(self._keep(), name=f"google-tokens-{self._provider}")

    async def _keep(self) -> None:
        timing = self._timing
        loop = asyncio.get_running_loop()
        credentials: google.auth.credentials.Credentials | None = None
        request: _Request | None = None
        failures = 0
        while True:
            try:
                if credentials is None or request is None:
                    credentials = await asyncio.to_thread(self._load, self._scopes)
                    request = await asyncio.to_thread(_Request, timing.http_timeout)
                token, left = await asyncio.to_thread(_refresh, credentials, request)
            except Exception as exc:  # google-auth's errors, an unreadable key file, ...: the
                # keeper must outlive them all, or every request would wait for its limit
                failures += 1
                self._failed(exc)
                await asyncio.sleep(min(timing.retry_max, timing.retry_first * 2 ** (failures - 1)))
                continue
            failures = 0
            life = timing.default_lifetime if left is None else max(left, 0.0)
            now = loop.time()
            self._token = token
            self._usable_until = now + life - min(timing.expiry_skew, life / 10)
            self._failure = None
            self.refreshes += 1
            self._attempt_ended()
            await asyncio.sleep(max(life - min(timing.refresh_ahead, life / 2), timing.retry_first))

    def _failed(self, exc: BaseException) -> None:
        cause = type(exc).__name__
        log.warning(
            "google credentials: refresh failed",
            extra={"provider": self._provider, "error_class": cause},
        )
        self._failure = (
            f"upstream {self._provider!r}: could not obtain a Google access token ({cause})"
        )
        self._attempt_ended()

    def _attempt_ended(self) -> None:
        ended, self._attempted = self._attempted, asyncio.Event()
        if ended is not None:
            ended.set()

    async def close(self) -> None:
        task, self._task = self._task, None
        if task is not None and not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
