"""Embeddings requests and answers between OpenAI's `POST /v1/embeddings` and each upstream wire
that has embeddings, one row per wire.

An OpenAI-wire upstream takes the client's body as sent (the route's model name put in) and its
answer goes back unchanged. Another wire's row builds its request from the client's inputs and
its answer into OpenAI's list, in the encoding the client asked for (the `openai` SDK asks for
`base64` by default: little-endian float32).

    embedder = EMBEDDERS["gemini"]
    body = embedder.request(texts, "text-embedding-004", dimensions)
    answer = embedder.answer(upstream_json, texts_count)  # -> vectors, input tokens or None
"""

from __future__ import annotations

import base64
import sys
from array import array
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from gateway.errors import InvalidRequest

Vectors = list[list[float]]
BuildRequest = Callable[[Sequence[str], str, int | None], dict[str, Any]]
ReadAnswer = Callable[[Any, int], tuple[Vectors, int | None]]  # vectors, input tokens


@dataclass(frozen=True, slots=True)
class Embedder:
    """How one wire embeds: None for both means the OpenAI wire, relayed as sent."""

    request: BuildRequest | None = None
    answer: ReadAnswer | None = None


def client_texts(body: dict[str, Any]) -> list[str]:
    """The client's `input` as texts (a string or a list of strings); token-id inputs only an
    OpenAI-wire upstream reads."""
    given = body.get("input")
    if isinstance(given, str):
        given = [given]
    if not isinstance(given, list) or not given or not all(isinstance(t, str) for t in given):
        raise InvalidRequest(
            "input: this upstream embeds text: give a string or an array of strings", "input"
        )
    return given


def dimensions(body: dict[str, Any]) -> int | None:
    value = body.get("dimensions")
    if value is None:
        return None
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise InvalidRequest("dimensions: must be a positive integer", "dimensions")
    return value


def _encoded(vector: list[float], encoding: str) -> Any:
    if encoding != "base64":
        return vector
    packed = array("f", vector)
    if sys.byteorder != "little":
        packed.byteswap()
    return base64.b64encode(packed.tobytes()).decode("ascii")


def openai_list(
    vectors: Vectors, model: str, input_tokens: int | None, encoding: str
) -> dict[str, Any]:
    """OpenAI's answer shape. `usage` is there for the SDKs, which read it; its figures are 0
    when the upstream gave none (the audit record keeps them unknown)."""
    tokens = input_tokens or 0
    return {
        "object": "list",
        "data": [
            {"object": "embedding", "index": i, "embedding": _encoded(v, encoding)}
            for i, v in enumerate(vectors)
        ],
        "model": model,
        "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
    }


def encoding_format(body: dict[str, Any]) -> str:
    value = body.get("encoding_format", "float")
    if value not in ("float", "base64"):
        raise InvalidRequest('encoding_format: must be "float" or "base64"', "encoding_format")
    return str(value)


def _gemini_request(texts: Sequence[str], model: str, dims: int | None) -> dict[str, Any]:
    """`models/{model}:batchEmbedContents`: one request per text."""
    extra = {"outputDimensionality": dims} if dims is not None else {}
    return {
        "requests": [
            {"model": f"models/{model}", "content": {"parts": [{"text": t}]}, **extra}
            for t in texts
        ]
    }


def _vectors(values: Any, expected: int) -> Vectors:
    if not isinstance(values, list) or len(values) != expected:
        raise ValueError("not one vector per input")
    for vector in values:
        if not isinstance(vector, list) or not all(
            isinstance(x, int | float) and not isinstance(x, bool) for x in vector
        ):
            raise TypeError("a vector is not a list of numbers")
    return values


def _gemini_answer(body: Any, expected: int) -> tuple[Vectors, int | None]:
    """Gemini gives vectors and no token count."""
    embeddings = body["embeddings"]
    return _vectors([e["values"] for e in embeddings], expected), None


def _bedrock_request(texts: Sequence[str], model: str, dims: int | None) -> dict[str, Any]:
    """Bedrock's InvokeModel body, by the model's family: Cohere's embed models take a list,
    Amazon Titan's one text per call."""
    if _family(model) == "cohere":
        return {"texts": list(texts), "input_type": "search_document"}
    if len(texts) != 1:
        raise InvalidRequest(
            f"input: {model} embeds one text per request; send one string", "input"
        )
    return {"inputText": texts[0], **({"dimensions": dims} if dims is not None else {})}


def _bedrock_answer(body: Any, expected: int) -> tuple[Vectors, int | None]:
    if "embeddings" in body:  # Cohere: a list of vectors (or by type, when asked for types)
        found = body["embeddings"]
        vectors = found.get("float") if isinstance(found, dict) else found
        return _vectors(vectors, expected), None
    tokens = body.get("inputTextTokenCount")
    counted = tokens if isinstance(tokens, int) and not isinstance(tokens, bool) else None
    return _vectors([body["embedding"]], expected), counted


def _family(model: str) -> str:
    """`cohere.embed-v4:0`, `us.cohere.embed-...` (an inference profile): the provider part."""
    parts = model.split(".")
    return parts[1] if len(parts) > 2 and len(parts[0]) <= 4 else parts[0]


OPENAI = Embedder()

EMBEDDERS: Mapping[str, Embedder] = {
    "openai": OPENAI,
    "openai_responses": OPENAI,
    "gemini": Embedder(_gemini_request, _gemini_answer),
    "bedrock": Embedder(_bedrock_request, _bedrock_answer),
}
