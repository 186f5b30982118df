"""AWS Bedrock upstreams on the Converse API: one body shape for every model family.

    provider = BedrockProvider("bedrock", "https://bedrock-runtime.us-east-1.amazonaws.com",
                               "us-east-1", api_key=None)
    reply = await provider.send(ProviderRequest(body=b'{"messages": ...}', stream=True,
                                                model="anthropic.claude-x-v1:0"))

`POST /model/{modelId}/converse` answers a whole body, `/converse-stream` the binary event stream;
the model id is URL-quoted (`:` and the `/` of an ARN escaped) and sent exactly as signed.

Authentication: a configured `api_key` is a Bedrock API key, sent as a bearer token (Bedrock
takes it instead of a signature). Without one every request is signed with SigV4 (service
`bedrock`, the region) using the standard AWS credential chain (environment variables, the
shared credentials and config files, SSO, container and instance roles). Resolving those reads
files and may call IMDS, and a refresh of temporary credentials calls STS or SSO: all of it is
blocking, so it runs in a worker thread, never in the event loop. The credentials are resolved
once, on first use; a refresh botocore calls advisory (expiry within 15 minutes) runs in the
background while requests keep signing with the current ones, and only a mandatory one
(within 10 minutes) is awaited. Credentials are never logged: messages name the provider and
the exception class only.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from typing import Any
from urllib.parse import quote

import orjson
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials, RefreshableCredentials
from botocore.exceptions import BotoCoreError
from botocore.session import Session

# The framing of this provider's streams: the formats registry imports it with the first
# Bedrock stream; imported with the provider, it is read before the server runs, not inside
# the event loop.
import gateway.formats.aws_eventstream  # noqa: F401
from gateway.errors import UpstreamUnreachable
from providers.base import NO_OWN_STOP_REASONS, Operation, ProviderRequest
from providers.http import (
    DEFAULT_POOL,
    DEFAULT_TIMEOUTS,
    HttpReply,
    HttpTransport,
    PoolLimits,
    PoolStats,
    Timeouts,
)

log = logging.getLogger("gateway.providers.bedrock")
# botocore's signer logs the canonical request at DEBUG: the signed headers, a session token
# among them. Whatever level the gateway logs at, those lines are never written.
logging.getLogger("botocore.auth").setLevel(logging.INFO)

SERVICE = "bedrock"  # the SigV4 signing name of bedrock-runtime
EVENT_STREAM = "application/vnd.amazon.eventstream"
CredentialSource = Callable[[], Credentials | None]


def credential_chain() -> Credentials | None:
    """The standard AWS chain, as the AWS CLI and SDKs read it (blocking: run it off the loop)."""
    credentials: Credentials | None = Session().get_credentials()
    return credentials


# The action of `/model/{modelId}/<action>` per operation other than a model answer: the
# CountTokens API (its body the Converse request under `input.converse`), and InvokeModel for
# the embedding models (their bodies are their family's own: gateway.translate.embeddings).
ACTIONS = {Operation.COUNT_TOKENS: "count-tokens", Operation.EMBED: "invoke"}
# What of a Converse request CountTokens takes.
COUNTED = ("messages", "system", "toolConfig", "additionalModelRequestFields")


def count_body(converse: bytes) -> bytes:
    body = orjson.loads(converse)
    return orjson.dumps({"input": {"converse": {k: body[k] for k in COUNTED if k in body}}})


class BedrockProvider:
    wire = "bedrock"
    own_stop_reasons = NO_OWN_STOP_REASONS

    def __init__(
        self,
        name: str,
        base_url: str,
        region: str,
        api_key: str | None,
        timeouts: Timeouts = DEFAULT_TIMEOUTS,
        credentials: CredentialSource = credential_chain,
        *,
        pool: PoolLimits = DEFAULT_POOL,
    ) -> None:
        self.name = name
        self._base = base_url.rstrip("/")
        self._region = region
        self._api_key = api_key
        self._source = credentials
        self._credentials: Credentials | None = None
        self._frozen: Any = None  # botocore ReadOnlyCredentials: what a signature is made with
        self._resolving: asyncio.Lock | None = None
        self._refreshing: asyncio.Task[None] | None = None
        self._http = HttpTransport(name, timeouts, pool)

    def url(self, model: str, stream: bool, operation: Operation = Operation.GENERATE) -> str:
        if operation is Operation.GENERATE:
            action = "converse-stream" if stream else "converse"
        else:
            action = ACTIONS[operation]
        return f"{self._base}/model/{quote(model, safe='')}/{action}"

    async def send(self, request: ProviderRequest) -> HttpReply:
        url = self.url(request.model, request.stream, request.operation)
        body = request.body
        if request.operation is Operation.COUNT_TOKENS:
            body = count_body(body)
        headers = {
            "Content-Type": "application/json",
            "Accept": EVENT_STREAM if request.stream else "application/json",
        }
        if self._api_key is not None:
            headers["Authorization"] = f"Bearer {self._api_key}"
        else:
            headers = self._signed(url, body, headers, await self._current())
        return await self._http.post(url, body, headers, encoded=True)

    def offers(self, operation: Operation, model: str) -> bool:
        return operation is Operation.GENERATE or operation in ACTIONS

    def _signed(
        self, url: str, body: bytes, headers: dict[str, str], frozen: Any
    ) -> dict[str, str]:
        """The headers with SigV4's Authorization, X-Amz-Date and, for temporary credentials,
        X-Amz-Security-Token (hashing the body and HMACs: no I/O)."""
        signed = AWSRequest(method="POST", url=url, data=body, headers=headers)
        SigV4Auth(frozen, SERVICE, self._region).add_auth(signed)
        return dict(signed.headers.items())

    async def _current(self) -> Any:
        """Frozen credentials to sign with now; resolved or refreshed in a worker thread."""
        credentials = self._credentials
        if credentials is None or self._frozen is None:
            return await self._resolve()
        if isinstance(credentials, RefreshableCredentials):
            mandatory = credentials._mandatory_refresh_timeout
            if credentials.refresh_needed(mandatory):
                return await self._refresh(credentials)
            if credentials.refresh_needed() and self._refreshing is None:
                self._refreshing = asyncio.create_task(self._refresh_later(credentials))
        return self._frozen

    async def _resolve(self) -> Any:
        if self._resolving is None:
            self._resolving = asyncio.Lock()
        async with self._resolving:
            if self._credentials is None or self._frozen is None:
                try:
                    credentials = await asyncio.to_thread(self._source)
                    if credentials is None:
                        raise UpstreamUnreachable(
                            f"upstream {self.name!r} has no AWS credentials (environment, "
                            "shared files, SSO, container or instance role) and no api_key"
                        )
                    frozen = await asyncio.to_thread(credentials.get_frozen_credentials)
                except BotoCoreError as exc:
                    raise self._credential_error(exc) from None
                self._credentials, self._frozen = credentials, frozen
            return self._frozen

    async def _refresh(self, credentials: Credentials) -> Any:
        try:
            self._frozen = await asyncio.to_thread(credentials.get_frozen_credentials)
        except BotoCoreError as exc:
            raise self._credential_error(exc) from None
        return self._frozen

    async def _refresh_later(self, credentials: Credentials) -> None:
        try:
            await self._refresh(credentials)
        except UpstreamUnreachable as exc:
            log.warning("%s (kept the current ones)", exc.message)
        finally:
            self._refreshing = None

    def _credential_error(self, exc: BaseException) -> UpstreamUnreachable:
        # The class only: a botocore message may quote a profile, a path or a token's origin.
        return UpstreamUnreachable(
            f"upstream {self.name!r}: AWS credentials could not be resolved ({type(exc).__name__})"
        )

    def wire_of(self, model: str) -> str:
        return self.wire

    def offered_models(self) -> Sequence[str]:
        return ()

    async def start(self) -> None:
        pass

    def pool_stats(self) -> PoolStats | None:
        return self._http.stats

    async def close(self) -> None:
        if self._refreshing is not None:
            self._refreshing.cancel()
        await self._http.close()
