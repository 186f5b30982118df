"""Loopback upstreams for Azure OpenAI and for OpenAI-compatible servers, and a gateway before them.

`AzureUpstream` serves an Azure OpenAI resource's paths: the deployment path (which needs an
`api-version` query, else 404 as Azure answers), the v1 path, and the Responses paths. It checks
the credential as Azure does (`api-key`, or an Entra ID `Authorization: Bearer`), answering 401
in Azure's shape otherwise, and answers each deployment from its script with Azure's own bytes:
`prompt_filter_results` first, `content_filter_results` on every choice.

It also serves `/compat/v1/chat/completions`, an OpenAI-compatible server that rejects what
such servers reject (`max_completion_tokens` with Mistral's 422, `stream_options` and
`parallel_tool_calls` with vLLM's 400), so a quirk flag shows by the answer turning 200, and
`/compat-open/v1/chat/completions`, the same server taking every field (a current vLLM build),
for what needs no flag.

    stack = AzureStack(tmp_path); stack.start()
    stack.upstream.script("dep-1", Script(chunks=azure_sse([...])))
    openai.OpenAI(base_url=stack.url + "/v1", api_key="sk-client").chat.completions.create(...)
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sqlite3
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
from aiohttp import web

from gateway.app import build_app
from gateway.settings import parse_settings
from tests.served import LoopServers

AZURE_KEY = "azure-key-SECRET-0003"
ENTRA_TOKEN = "entra-token-SECRET-0004"
ENTRA_ENV_TOKEN = "entra-env-token-SECRET-0005"
API_VERSION = "2024-10-21"

SAFE = {"filtered": False, "severity": "safe"}
COMPLETION_SAFE = {"hate": SAFE, "self_harm": SAFE, "sexual": SAFE, "violence": SAFE}
PROMPT_SAFE = {**COMPLETION_SAFE, "jailbreak": {"filtered": False, "detected": False}}


@dataclass
class Script:
    status: int = 200
    body: bytes | None = None  # a whole answer
    chunks: list[bytes] | None = None  # a stream's body, in these pieces
    headers: dict[str, str] = field(default_factory=dict)


@dataclass
class Received:
    path: str
    query: dict[str, str]
    headers: dict[str, str]  # only the credential headers
    body: dict[str, Any]
    size: int = 0  # the body's bytes


def sse(objects: list[dict[str, Any]], done: bool = True) -> list[bytes]:
    frames = [b"data: " + orjson.dumps(obj) + b"\n\n" for obj in objects]
    return frames + ([b"data: [DONE]\n\n"] if done else [])


def prompt_filter_chunk() -> dict[str, Any]:
    """Azure's first chunk: no choices, no id, the prompt's filter results."""
    results = [{"prompt_index": 0, "content_filter_results": PROMPT_SAFE}]
    return {
        "choices": [],
        "created": 0,
        "id": "",
        "model": "",
        "object": "",
        "prompt_filter_results": results,
    }


def chunk(
    delta: dict[str, Any],
    finish: str | None = None,
    filters: dict[str, Any] | None = None,
    chunk_id: str = "chatcmpl-az1",
) -> dict[str, Any]:
    choice = {
        "content_filter_results": COMPLETION_SAFE if filters is None else filters,
        "delta": delta,
        "finish_reason": finish,
        "index": 0,
        "logprobs": None,
    }
    return {
        "choices": [choice],
        "created": 1762317021,
        "id": chunk_id,
        "model": "gpt-4o-2024-11-20",
        "object": "chat.completion.chunk",
        "system_fingerprint": "fp_az",
        "usage": None,
    }


def usage_chunk(prompt: int = 15, completion: int = 9) -> dict[str, Any]:
    return {
        "choices": [],
        "created": 1762317021,
        "id": "chatcmpl-az1",
        "model": "gpt-4o-2024-11-20",
        "object": "chat.completion.chunk",
        "usage": {
            "completion_tokens": completion,
            "prompt_tokens": prompt,
            "total_tokens": prompt + completion,
        },
    }


def filtered(**categories: str) -> dict[str, Any]:
    """A choice's filter results in which `categories` filtered at these severities."""
    results: dict[str, Any] = dict(COMPLETION_SAFE)
    for name, severity in categories.items():
        results[name] = {"filtered": True, "severity": severity}
    return results


def body(
    message: dict[str, Any],
    finish: str,
    filters: dict[str, Any] | None = None,
) -> bytes:
    """A whole Azure chat completion."""
    choice = {
        "content_filter_results": COMPLETION_SAFE if filters is None else filters,
        "finish_reason": finish,
        "index": 0,
        "logprobs": None,
        "message": {"role": "assistant", "refusal": None, "annotations": [], **message},
    }
    return orjson.dumps(
        {
            "choices": [choice],
            "created": 1762317021,
            "id": "chatcmpl-az2",
            "model": "gpt-4o-2024-11-20",
            "object": "chat.completion",
            "prompt_filter_results": [{"prompt_index": 0, "content_filter_results": PROMPT_SAFE}],
            "system_fingerprint": "fp_az",
            "usage": {"completion_tokens": 9, "prompt_tokens": 15, "total_tokens": 24},
        }
    )


def filtered_prompt_body(**categories: str) -> bytes:
    """Azure's 400 for a prompt its content filter refused."""
    results: dict[str, Any] = dict(PROMPT_SAFE)
    for name, severity in categories.items():
        results[name] = {"filtered": True, "severity": severity}
    message = (
        "The response was filtered due to the prompt triggering Azure OpenAI's content "
        "management policy. Please modify your prompt and retry. To learn more about our "
        "content filtering policies please read our documentation: "
        "https://go.microsoft.com/fwlink/?linkid=2198766"
    )
    error = {
        "message": message,
        "type": None,
        "param": "prompt",
        "code": "content_filter",
        "status": 400,
        "innererror": {"code": "ResponsibleAIPolicyViolation", "content_filter_result": results},
    }
    return orjson.dumps({"error": error})


RATE_LIMITED = orjson.dumps(
    {
        "error": {
            "code": "429",
            "message": "Requests to the ChatCompletions_Create Operation under Azure OpenAI API "
            "version 2024-10-21 have exceeded token rate limit of your current OpenAI S0 pricing "
            "tier. Please retry after 7 seconds.",
        }
    }
)
_DENIED = orjson.dumps(
    {
        "error": {
            "code": "401",
            "message": "Access denied due to invalid subscription key or wrong API endpoint. "
            "Make sure to provide a valid key for an active subscription and use a correct "
            "regional API endpoint for your resource.",
        }
    }
)
_NOT_FOUND = orjson.dumps({"error": {"code": "404", "message": "Resource not found"}})
# What the OpenAI-compatible server at /compat rejects, and how (Mistral 422, vLLM 400).
_MISTRAL_422 = {
    "object": "error",
    "message": {
        "detail": [
            {
                "type": "extra_forbidden",
                "loc": ["body", "max_completion_tokens"],
                "msg": "Extra inputs are not permitted",
            }
        ]
    },
    "type": "invalid_request_error",
    "param": None,
    "code": None,
}


def _vllm_400(name: str) -> dict[str, Any]:
    return {
        "object": "error",
        "message": f"[{{'type': 'extra_forbidden', 'loc': ('body', '{name}'), "
        "'msg': 'Extra inputs are not permitted'}]",
        "type": "BadRequestError",
        "param": None,
        "code": 400,
    }


class AzureUpstream:
    def __init__(self) -> None:
        self.scripts: dict[str, Script] = {}
        self.received: dict[str, list[Received]] = {}
        # The credentials the resource accepts: its key, and Entra ID tokens.
        self.keys = {AZURE_KEY}
        self.tokens = {ENTRA_TOKEN, ENTRA_ENV_TOKEN}

    def script(self, model: str, script: Script) -> None:
        self.scripts[model] = script

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_post("/openai/deployments/{deployment}/chat/completions", self.deployment)
        app.router.add_post("/openai/v1/chat/completions", self.by_body)
        app.router.add_post("/openai/deployments/{deployment}/embeddings", self.deployment)
        app.router.add_post("/openai/v1/embeddings", self.by_body)
        app.router.add_post("/openai/v1/responses", self.by_body)
        app.router.add_post("/openai/responses", self.dated_responses)
        app.router.add_post("/compat/v1/chat/completions", self.compat)
        app.router.add_post("/compat-open/v1/chat/completions", self.compat_open)
        return app

    def _allowed(self, request: web.Request) -> bool:
        if request.headers.get("api-key") in self.keys:
            return True
        scheme, _, token = request.headers.get("authorization", "").partition(" ")
        return scheme == "Bearer" and token in self.tokens

    async def _take(self, request: web.Request, model: str) -> dict[str, Any]:
        obj = orjson.loads(await request.read())
        credentials = {k.lower(): v for k, v in request.headers.items()}
        kept = {k: credentials[k] for k in ("api-key", "authorization") if k in credentials}
        seen = Received(request.path, dict(request.query), kept, obj)
        self.received.setdefault(model, []).append(seen)
        return obj  # type: ignore[no-any-return]

    async def deployment(self, request: web.Request) -> web.StreamResponse:
        model = request.match_info["deployment"]
        await self._take(request, model)
        if "api-version" not in request.query:
            return _json(404, _NOT_FOUND)
        return await self._answer(request, model)

    async def dated_responses(self, request: web.Request) -> web.StreamResponse:
        obj = orjson.loads(await request.read())
        model = obj.get("model", "")
        credentials = {k.lower(): v for k, v in request.headers.items()}
        kept = {k: credentials[k] for k in ("api-key", "authorization") if k in credentials}
        self.received.setdefault(model, []).append(
            Received(request.path, dict(request.query), kept, obj)
        )
        if "api-version" not in request.query:
            return _json(404, _NOT_FOUND)
        return await self._answer(request, model)

    async def by_body(self, request: web.Request) -> web.StreamResponse:
        raw = await request.read()
        model = orjson.loads(raw).get("model", "")
        credentials = {k.lower(): v for k, v in request.headers.items()}
        kept = {k: credentials[k] for k in ("api-key", "authorization") if k in credentials}
        self.received.setdefault(model, []).append(
            Received(request.path, dict(request.query), kept, orjson.loads(raw), len(raw))
        )
        return await self._answer(request, model)

    async def _take_compat(self, request: web.Request) -> tuple[str, dict[str, Any]]:
        raw = await request.read()
        obj = orjson.loads(raw)
        model = obj.get("model", "")
        self.received.setdefault(model, []).append(Received(request.path, {}, {}, obj, len(raw)))
        return model, obj

    async def compat(self, request: web.Request) -> web.StreamResponse:
        model, obj = await self._take_compat(request)
        if "max_completion_tokens" in obj:
            return _json(422, orjson.dumps(_MISTRAL_422))
        for name in ("stream_options", "parallel_tool_calls"):
            if name in obj:
                return _json(400, orjson.dumps(_vllm_400(name)))
        return await self._answer(request, model, check=False)

    async def compat_open(self, request: web.Request) -> web.StreamResponse:
        model, _ = await self._take_compat(request)
        return await self._answer(request, model, check=False)

    async def _answer(
        self, request: web.Request, model: str, check: bool = True
    ) -> web.StreamResponse:
        if check and not self._allowed(request):
            return _json(401, _DENIED)
        script = self.scripts.get(model)
        if script is None:
            return _json(404, _NOT_FOUND)
        if script.chunks is None:
            headers = {"content-type": "application/json", **script.headers}
            return web.Response(status=script.status, body=script.body or b"", headers=headers)
        response = web.StreamResponse(
            status=script.status, headers={"content-type": "text/event-stream", **script.headers}
        )
        await response.prepare(request)
        for piece in script.chunks:
            await response.write(piece)
            await asyncio.sleep(0)
        await response.write_eof()
        return response


def _json(status: int, payload: bytes) -> web.Response:
    return web.Response(status=status, body=payload, content_type="application/json")


def gateway_settings(upstream: str, store: str, token_file: Path) -> dict[str, Any]:
    one = {"attempts": 1}
    azure = {"kind": "azure_openai", "base_url": upstream, "retry": one, "timeout": 5}
    compat_base = {"kind": "openai", "base_url": f"{upstream}/compat/v1", "api_key": "sk-compat"}
    return {
        "providers": {
            "azure": {**azure, "api_version": API_VERSION, "api_key": AZURE_KEY},
            "azure_v1": {**azure, "api_version": "v1", "api_key_env": "AZURE_OPENAI_API_KEY"},
            "azure_entra": {
                **azure,
                "api_version": API_VERSION,
                "entra": {"token_file": str(token_file), "reread": 0.05},
            },
            "azure_entra_env": {
                **azure,
                "api_version": "v1",
                "entra": {"token_env": "AZURE_OPENAI_TOKEN"},
            },
            "azure_forward": {**azure, "api_version": API_VERSION},
            "azure_responses": {
                **azure,
                "kind": "azure_openai_responses",
                "api_version": "v1",
                "api_key": AZURE_KEY,
            },
            "azure_responses_dated": {
                **azure,
                "kind": "azure_openai_responses",
                "api_version": "2025-04-01-preview",
                "api_key": AZURE_KEY,
            },
            "compat": {
                **compat_base,
                "retry": one,
                "quirks": {
                    "max_tokens_field": "max_tokens",
                    "stream_options": False,
                    "strip_fields": ["parallel_tool_calls"],
                    "finish_reasons": {"max_new_tokens": "length", "eos": "stop"},
                },
            },
            "compat_plain": {**compat_base, "retry": one},
            "compat_open": {**compat_base, "base_url": f"{upstream}/compat-open/v1", "retry": one},
        },
        "routes": [
            {"match": "az-*", "provider": "azure"},
            {"match": "azv1-*", "provider": "azure_v1"},
            {"match": "aze-*", "provider": "azure_entra"},
            {"match": "azenv-*", "provider": "azure_entra_env"},
            {"match": "azf-*", "provider": "azure_forward"},
            {"match": "azr-*", "provider": "azure_responses"},
            {"match": "azrd-*", "provider": "azure_responses_dated"},
            {"match": "cq-*", "provider": "compat"},
            {"match": "cp-*", "provider": "compat_plain"},
            {"match": "co-*", "provider": "compat_open"},
        ],
        "audit": {"store": store},
        "circuit": {"failures": 0},
    }


ENV = {"AZURE_OPENAI_API_KEY": AZURE_KEY, "AZURE_OPENAI_TOKEN": ENTRA_ENV_TOKEN}


class AzureStack(LoopServers):
    """The upstream and one gateway on their own loop thread (the sync SDKs drive them)."""

    def __init__(self, directory: Path) -> None:
        super().__init__()
        self.directory = directory
        self.token_file = directory / "entra-token"
        self.token_file.write_text(ENTRA_TOKEN + "\n")
        self.db = directory / "audit.db"
        self.upstream = AzureUpstream()
        self.url = ""

    async def _start(self) -> None:
        upstream = await self._serve(self.upstream.app())
        config = gateway_settings(upstream, f"sqlite:///{self.db}", self.token_file)
        self.url = await self._serve(build_app(parse_settings(config, env=ENV), env=ENV))

    def record(self, model: str) -> dict[str, Any]:
        """The one audit record of `model`'s exchange, once the writer wrote it; its raw row
        text too (`_row`), to look for what must never be stored."""
        deadline = time.monotonic() + 10
        while True:
            with contextlib.closing(sqlite3.connect(self.db)) as conn:
                conn.row_factory = sqlite3.Row
                with contextlib.suppress(sqlite3.OperationalError):  # not created yet
                    rows = conn.execute(
                        "SELECT * FROM audit_records WHERE model = ?", (model,)
                    ).fetchall()
                    if rows:
                        assert len(rows) == 1, rows
                        row = dict(rows[0])
                        return {
                            **row,
                            "attempts": json.loads(row["attempts"]),
                            "_row": json.dumps(row),
                        }
            assert time.monotonic() < deadline, f"no audit record for {model}"
            time.sleep(0.02)

    def records(self, model: str) -> list[str]:
        """Every audit row of `model` as text (several exchanges), once one was written."""
        deadline = time.monotonic() + 10
        while True:
            with contextlib.closing(sqlite3.connect(self.db)) as conn:
                conn.row_factory = sqlite3.Row
                rows = conn.execute("SELECT * FROM audit_records WHERE model = ?", (model,))
                found = [json.dumps(dict(row)) for row in rows.fetchall()]
            if found:
                return found
            assert time.monotonic() < deadline, f"no audit record for {model}"
            time.sleep(0.02)
