"""What OpenAI-compatible servers do differently, as named flags (`[providers.X.quirks]`).

A server that speaks the OpenAI Chat wire is configured with `kind = "openai"` and a `base_url`;
where it departs from api.openai.com, a flag says so, never a provider name. Request-side flags
rewrite the outgoing body once per request (parse, rewrite, dump: `rewrite_body`); the
decode-side flag (`finish_reasons`) adds native stop values to the wire's table, read by the
decoder through `gateway.formats.registry.Wire.with_stop_reasons`.

    quirks = OpenAIQuirks(max_tokens_field="max_tokens", stream_options=False)
    body = quirks.rewrite_body(b'{"max_completion_tokens": 64, "stream_options": {...}}')

No flag is needed for a server that omits `data: [DONE]` (a stream is complete once every choice
it opened got its finish_reason) or one that sends tool calls without ids (the decoder mints
`call_gw_<n>`): the OpenAI wire's reading already covers both.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, Literal

import orjson
from pydantic import BaseModel, ConfigDict, Field

from gateway.events import StopReason

NonEmptyStr = Annotated[str, Field(min_length=1)]


class OpenAIQuirks(BaseModel):
    """The flags of one OpenAI-wire upstream; the defaults are api.openai.com's behaviour."""

    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)

    max_tokens_field: Literal["max_completion_tokens", "max_tokens"] = "max_completion_tokens"
    """The name the server reads the output budget under. `"max_tokens"`: the gateway renames
    `max_completion_tokens` (what it writes when translating, and what newer OpenAI clients
    send) to `max_tokens`. For servers whose API documents only `max_tokens`: Mistral (whose
    request schema refuses fields it does not know, 422), DeepSeek, Ollama, llama.cpp and
    OpenRouter (a server that ignores the newer name silently loses the budget)."""

    stream_options: bool = True
    """False: `stream_options` is dropped from the body. For servers that refuse it: older vLLM
    builds (400), Mistral (its request schema has no such field; it sends usage in its last
    chunk anyway). The gateway asks every OpenAI-wire stream for its usage, the client's own
    OpenAI Chat streams too, so such a server needs the flag whatever the client sends. Without
    the field a stream may carry no usage chunk: the record's token counts stay empty rather
    than wrong, and a key's token budget counts the gateway's estimate (`estimated_tokens`)."""

    strip_fields: tuple[NonEmptyStr, ...] = Field(default=(), strict=False)
    """Top-level body fields dropped before sending, for servers that refuse a field OpenAI
    accepts: e.g. Groq answers 400 to `logprobs`, `top_logprobs` and `logit_bias`; older vLLM
    and llama.cpp builds refuse `parallel_tool_calls`."""

    finish_reasons: Mapping[NonEmptyStr, Annotated[StopReason, Field(strict=False)]] = Field(
        default_factory=dict, strict=False
    )
    """Native `finish_reason` values of the server's own -> normalized stop reasons, on top of
    the OpenAI wire's table (`gateway.formats.stop_reasons.OPENAI_NATIVE`, which already holds
    the documented values of DeepSeek, vLLM, Mistral and xAI): for a server build that sends
    something else, e.g. `{ "eos" = "stop", "max_new_tokens" = "length" }`.
    A value not in either table is UNKNOWN, its native string kept."""

    @property
    def rewrites_body(self) -> bool:
        return (
            self.max_tokens_field != "max_completion_tokens"
            or not self.stream_options
            or bool(self.strip_fields)
        )

    def rewrite_body(self, body: bytes) -> bytes:
        """The body with every request-side flag applied; unchanged bytes when none applies
        (or the body is not a JSON object: the upstream will say what is wrong with it)."""
        if not self.rewrites_body:
            return body
        try:
            obj: Any = orjson.loads(body)
        except orjson.JSONDecodeError:
            return body
        if not isinstance(obj, dict):
            return body
        changed = False
        for name in self.strip_fields:
            if name in obj:
                del obj[name]
                changed = True
        if not self.stream_options and "stream_options" in obj:
            del obj["stream_options"]
            changed = True
        if self.max_tokens_field == "max_tokens" and "max_completion_tokens" in obj:
            budget = obj.pop("max_completion_tokens")
            obj.setdefault("max_tokens", budget)
            changed = True
        return orjson.dumps(obj) if changed else body


NO_QUIRKS = OpenAIQuirks()
