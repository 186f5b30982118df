"""How the gateway authenticates to Azure OpenAI: an API key, or an Entra ID bearer token.

The Entra ID token is not fetched by the gateway (no azure-identity dependency, no client
secret in its configuration): something that already holds the identity writes the token where
the gateway reads it. Either an environment variable (read once at startup: for a token that
outlives the process), or a file an outside refresher keeps current, e.g. a cron or sidecar
running `az account get-access-token --resource https://cognitiveservices.azure.com
--query accessToken -o tsv > /run/azure/token`. The file is read in a worker thread, never on
the event loop: at first use, then at most every `reread` seconds, in the background while
requests go on with the token already read, and only when its modification time changed.

    [providers.azure.entra]
    token_file = "/run/azure/token"      # or token_env = "AZURE_OPENAI_TOKEN"
"""

from __future__ import annotations

import asyncio
import logging
import os
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, model_validator

from gateway.errors import UpstreamUnreachable

log = logging.getLogger(__name__)


class EntraSettings(BaseModel):
    """`[providers.X.entra]`: where the Entra ID access token is read; exactly one source."""

    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)

    token_env: Annotated[str, Field(min_length=1)] | None = None
    token_file: Annotated[str, Field(min_length=1)] | None = None
    reread: Annotated[float, Field(gt=0, allow_inf_nan=False, strict=False)] = 60.0

    @model_validator(mode="after")
    def _one_source(self) -> EntraSettings:
        if (self.token_env is None) == (self.token_file is None):
            raise ValueError("give token_env or token_file (one of them)")
        return self


class BearerTokenFile:
    """The token in a file, re-read off the request path when the file changed."""

    __slots__ = ("_mtime", "_next", "_path", "_provider", "_reread", "_task", "_token")

    def __init__(self, provider: str, path: str, reread: float) -> None:
        self._provider = provider
        self._path = path
        self._reread = reread
        self._token: str | None = None
        self._mtime: int | None = None
        self._next = 0.0  # loop time of the next look at the file
        self._task: asyncio.Task[None] | None = None

    async def token(self) -> str:
        loop = asyncio.get_running_loop()
        now = loop.time()
        if self._token is None:
            await self._refresh(now)  # nothing to send yet: this request waits for the read
        elif now >= self._next and self._task is None:
            self._task = asyncio.create_task(self._refresh(now))
            self._task.add_done_callback(self._done)
        if self._token is None:
            raise UpstreamUnreachable(
                f"upstream {self._provider!r}: its Entra ID token_file could not be read"
            )
        return self._token

    def _done(self, task: asyncio.Task[None]) -> None:
        self._task = None

    async def _refresh(self, now: float) -> None:
        self._next = now + self._reread
        try:
            read = await asyncio.to_thread(_read_if_changed, self._path, self._mtime)
        except (OSError, ValueError) as exc:  # keep the token read before; look again later
            log.warning(
                "provider %r: cannot read its Entra ID token file (%s)",
                self._provider,
                type(exc).__name__,
            )
            return
        if read is not None:
            self._mtime, token = read
            if token:
                self._token = token


def _read_if_changed(path: str, mtime: int | None) -> tuple[int, str] | None:
    """(mtime, token) when the file's modification time is not `mtime`, else None."""
    current = os.stat(path).st_mtime_ns
    if current == mtime:
        return None
    with open(path, encoding="utf-8") as file:
        return current, file.read().strip()
