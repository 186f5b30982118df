"""A loopback Google OAuth token endpoint and a loopback Vertex AI, for tests of `kind = "vertex"`.

`TokenEndpoint` is what a service account's `token_uri` points at: google-auth signs a JWT
assertion with the account's key and POSTs it as a `jwt-bearer` grant; the endpoint checks the
grant type, the signature (against the key the test generated) and the claims, then mints a
token. Each `tag` (`/token/<tag>`) is its own account: its answers are scripted (lifetime,
failure) and counted.

`VertexUpstream` serves `/v1/projects/{project}/locations/{region}/publishers/{publisher}/
models/{model}:{method}`, refuses a request without a token the endpoint minted, and plays the
`Script` registered under the model's name, recording what it received (raw path with query, headers
in lower case, body), like `tests.upstream.FakeUpstream` does for the other wires.
"""

from __future__ import annotations

import base64
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
from aiohttp import web
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import padding, rsa

from tests.upstream import FakeUpstream, Received

JWT_BEARER = "urn:ietf:params:oauth:grant-type:jwt-bearer"
CLOUD_PLATFORM = "https://www.googleapis.com/auth/cloud-platform"
# The audience google-auth signs for, whatever the key file's token_uri (as Google's server does).
GOOGLE_TOKEN_AUDIENCE = "https://oauth2.googleapis.com/token"


def _b64url(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


@dataclass
class Account:
    """One service account: its key, the token endpoint's script for it, what it minted."""

    tag: str
    key: rsa.RSAPrivateKey
    email: str
    token_uri: str
    expires_in: int = 3600
    fail_status: int | None = None  # answer every grant with this status instead
    minted: list[str] = field(default_factory=list)
    refused: int = 0  # grants answered with fail_status

    def key_file(self, directory: Path) -> Path:
        pem = self.key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        ).decode()
        info = {
            "type": "service_account",
            "project_id": "proj-test",
            "private_key_id": f"kid-{self.tag}",
            "private_key": pem,
            "client_email": self.email,
            "client_id": "1234567890",
            "token_uri": self.token_uri,
        }
        path = directory / f"sa-{self.tag}.json"
        path.write_bytes(orjson.dumps(info))
        return path


class TokenEndpoint:
    def __init__(self) -> None:
        self.url = ""  # set once served
        self.accounts: dict[str, Account] = {}
        self.bad_grants: list[str] = []  # why a grant was refused as malformed

    def account(self, tag: str, **script: Any) -> Account:
        key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        email = f"gateway-{tag}@proj-test.iam.gserviceaccount.com"
        account = Account(tag, key, email, f"{self.url}/token/{tag}", **script)
        self.accounts[tag] = account
        return account

    def valid(self, token: str) -> bool:
        return any(token in a.minted for a in self.accounts.values())

    def add_routes(self, app: web.Application) -> None:
        app.router.add_post("/token/{tag}", self.grant)

    async def grant(self, request: web.Request) -> web.Response:
        account = self.accounts.get(request.match_info["tag"])
        form = await request.post()
        if account is None:
            return web.json_response({"error": "invalid_client"}, status=401)
        problem = self._check(account, form.get("grant_type"), form.get("assertion"))
        if problem is not None:
            self.bad_grants.append(problem)
            return web.json_response({"error": "invalid_grant"}, status=400)
        if account.fail_status is not None:
            account.refused += 1
            body = {"error": "invalid_grant", "error_description": "SECRET-DESCRIPTION-7f3a"}
            return web.json_response(body, status=account.fail_status)
        token = f"ya29.test-{account.tag}-{len(account.minted) + 1}"
        account.minted.append(token)
        body = {"access_token": token, "expires_in": account.expires_in, "token_type": "Bearer"}
        return web.json_response(body)

    def _check(self, account: Account, grant_type: object, assertion: object) -> str | None:
        if grant_type != JWT_BEARER:
            return f"grant_type {grant_type!r}"
        if not isinstance(assertion, str) or assertion.count(".") != 2:
            return "assertion is not a JWT"
        header, payload, signature = assertion.split(".")
        try:
            account.key.public_key().verify(
                _b64url(signature),
                f"{header}.{payload}".encode(),
                padding.PKCS1v15(),
                hashes.SHA256(),
            )
        except Exception:
            return "bad signature"
        claims = orjson.loads(_b64url(payload))
        if claims.get("iss") != account.email or claims.get("aud") != GOOGLE_TOKEN_AUDIENCE:
            return "wrong iss or aud"
        if CLOUD_PLATFORM not in str(claims.get("scope", "")).split():
            return "scope without cloud-platform"
        if not claims.get("iat", 0) <= time.time() + 60 < claims.get("exp", 0) + 60:
            return "stale assertion"
        return None


class VertexUpstream(FakeUpstream):
    """Vertex AI's publisher model endpoints on loopback, scripted per model (module doc)."""

    PATH = "/v1/projects/{project}/locations/{region}/publishers/{publisher}/models/{rest}"

    def __init__(self, tokens: TokenEndpoint) -> None:
        super().__init__()
        self.tokens = tokens
        self.url = ""  # set once served
        self.unauthorized: list[str] = []  # the paths refused for want of a minted token

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_post(self.PATH, self.handle)
        self.tokens.add_routes(app)
        return app

    async def handle(self, request: web.Request) -> web.StreamResponse:
        raw = await request.read()
        model, _, _method = request.match_info["rest"].rpartition(":")
        auth = request.headers.get("authorization", "")
        key = request.headers.get("x-goog-api-key")
        if key is None and not (auth.startswith("Bearer ") and self.tokens.valid(auth[7:])):
            self.unauthorized.append(request.path)
            error = {"code": 401, "message": "missing credential", "status": "UNAUTHENTICATED"}
            return web.json_response({"error": error}, status=401)
        headers = {name.lower(): value for name, value in request.headers.items()}
        script = self.scripts.get(model)
        if script is None:
            return web.json_response({"error": {"message": f"unscripted {model}"}}, status=599)
        self.received[model].append(Received(request.raw_path, headers, raw))
        following = self.sequences.get(model)
        if following:
            self.scripts[model] = following.pop(0)
        return await self._play(request, script)
