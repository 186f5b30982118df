"""`POST /v1/embeddings` through the real OpenAI SDK to an OpenAI-wire upstream: the client's
body goes up as sent (the route's model name put in), the answer comes back byte for byte, and
the exchange is audited as `embed` with the upstream's input tokens and neither the input text
nor a vector in the record."""

from __future__ import annotations

import base64
import sqlite3
import struct

import orjson
import pytest

from gateway.errors import InvalidRequest
from gateway.handlers.embeddings import relayed_usage
from gateway.translate.embeddings import EMBEDDERS, openai_list
from tests.access_util import audit_rows
from tests.conftest import UPSTREAM_OPENAI_KEY, openai_client
from tests.test_endpoints import lower, request
from tests.upstream import Script

SECRET_TEXT = "the quick brown fox, a text the audit must never hold"
VECTORS = [[0.25, -0.5, 1.0], [0.125, 0.0, -1.0]]


def b64(vector: list[float]) -> str:
    return base64.b64encode(struct.pack(f"<{len(vector)}f", *vector)).decode()


def answer(model: str, encoding: str = "base64", tokens: int = 17) -> bytes:
    data = [
        {"object": "embedding", "index": i, "embedding": b64(v) if encoding == "base64" else v}
        for i, v in enumerate(VECTORS)
    ]
    usage = {"prompt_tokens": tokens, "total_tokens": tokens}
    return orjson.dumps({"object": "list", "data": data, "model": model, "usage": usage})


def test_openai_sdk_embeddings_are_relayed_unchanged(stack, upstream, unique_model):
    model = unique_model("oa")
    body = answer(model)
    upstream.script(model, Script(body=body))
    client = openai_client(stack)
    raw = client.embeddings.with_raw_response.create(model=model, input=[SECRET_TEXT, "two"])
    result = raw.parse()
    assert raw.http_response.content == body
    assert [list(d.embedding) for d in result.data] == VECTORS
    assert result.usage.prompt_tokens == 17
    got = upstream.last(model)
    assert got.path == "/v1/embeddings"
    assert got.json["input"] == [SECRET_TEXT, "two"]
    assert got.json["encoding_format"] == "base64"  # the SDK's default, passed through
    assert lower(got)["authorization"] == f"Bearer {UPSTREAM_OPENAI_KEY}"
    (row,) = audit_rows(stack, "withhold", model)
    assert row["operation"] == "embed"
    assert row["input_tokens"] == 17
    assert row["stop_reason"] is None and row["truncated"] == 0
    with sqlite3.connect(stack.audit_db("withhold")) as db:
        dump = "\n".join(str(r) for r in db.execute("SELECT * FROM audit_records"))
    assert SECRET_TEXT not in dump and b64(VECTORS[0]) not in dump


def test_route_rename_is_put_in_the_body(stack, upstream):
    upstream.script("oa-renamed-target", Script(body=answer("oa-renamed-target", "float")))
    client = openai_client(stack)
    result = client.embeddings.create(model="oa-renamed", input="hello", encoding_format="float")
    assert [list(d.embedding) for d in result.data] == VECTORS
    assert upstream.last("oa-renamed-target").json["model"] == "oa-renamed-target"


def test_upstream_error_keeps_its_status_and_openai_shape(stack, upstream, unique_model):
    model = unique_model("oa")
    error = {"error": {"message": "too long", "type": "invalid_request_error", "code": None}}
    upstream.script(model, Script(status=400, body=orjson.dumps(error)))
    client = openai_client(stack)
    with pytest.raises(Exception) as caught:
        client.embeddings.create(model=model, input="x")
    assert getattr(caught.value, "status_code", None) == 400
    (row,) = audit_rows(stack, "withhold", model)
    assert row["operation"] == "embed" and row["http_status"] == 400


def test_a_provider_without_embeddings_is_a_clear_400(stack):
    status, _, body = request(
        stack.urls["withhold"], "POST", "/v1/embeddings", {"model": "an-x", "input": "hi"}
    )
    assert status == 400
    error = orjson.loads(body)["error"]
    assert "offers no embeddings" in error["message"]
    assert error["type"] == "invalid_request_error"


def test_missing_input_is_refused_by_name(stack):
    status, _, body = request(stack.urls["withhold"], "POST", "/v1/embeddings", {"model": "oa-x"})
    assert status == 400
    assert orjson.loads(body)["error"]["param"] == "input"


@pytest.mark.parametrize(
    ("tail", "expected"),
    [
        (b'"usage":{"prompt_tokens":9,"total_tokens":9}}', 9),
        (b'"usage": {"total_tokens": 4, "prompt_tokens": 4}\n}', 4),
        (b'"usage":null}', None),
        (b'"usage":{"prompt_tokens":', None),
    ],
)
def test_relayed_usage_reads_only_the_tail(tail, expected):
    body = b'{"object":"list","data":[{"embedding":[0.1,0.2],"index":0}],' + tail
    assert relayed_usage(body) == expected


# --- the other wires' rows (their providers' end-to-end tests drive them through the gateway) --


def test_gemini_row_builds_one_request_per_text_and_reads_vectors():
    gemini = EMBEDDERS["gemini"]
    assert gemini.request is not None and gemini.answer is not None
    body = gemini.request(["a", "b"], "text-embedding-004", 8)
    assert body == {
        "requests": [
            {
                "model": "models/text-embedding-004",
                "content": {"parts": [{"text": t}]},
                "outputDimensionality": 8,
            }
            for t in ("a", "b")
        ]
    }
    answer = {"embeddings": [{"values": v} for v in VECTORS]}
    assert gemini.answer(answer, 2) == (VECTORS, None)
    with pytest.raises(ValueError):
        gemini.answer(answer, 3)  # one vector missing: not the wire's answer


@pytest.mark.parametrize(
    ("model", "texts", "expected"),
    [
        (
            "cohere.embed-english-v3",
            ["a", "b"],
            {"texts": ["a", "b"], "input_type": "search_document"},
        ),
        ("us.cohere.embed-v4:0", ["a"], {"texts": ["a"], "input_type": "search_document"}),
        ("amazon.titan-embed-text-v2:0", ["a"], {"inputText": "a"}),
    ],
)
def test_bedrock_row_builds_the_family_body(model, texts, expected):
    bedrock = EMBEDDERS["bedrock"]
    assert bedrock.request is not None
    assert bedrock.request(texts, model, None) == expected


def test_bedrock_titan_takes_one_text_per_request():
    bedrock = EMBEDDERS["bedrock"]
    assert bedrock.request is not None
    with pytest.raises(InvalidRequest):
        bedrock.request(["a", "b"], "amazon.titan-embed-text-v2:0", None)


def test_bedrock_answers_titan_with_tokens_and_cohere_without():
    bedrock = EMBEDDERS["bedrock"]
    assert bedrock.answer is not None
    titan = {"embedding": VECTORS[0], "inputTextTokenCount": 5}
    assert bedrock.answer(titan, 1) == ([VECTORS[0]], 5)
    assert bedrock.answer({"embeddings": VECTORS}, 2) == (VECTORS, None)
    assert bedrock.answer({"embeddings": {"float": VECTORS}}, 2) == (VECTORS, None)


def test_openai_list_encodes_base64_as_little_endian_float32():
    out = openai_list(VECTORS, "m", None, "base64")
    assert out["data"][0]["embedding"] == b64(VECTORS[0])
    assert out["usage"] == {"prompt_tokens": 0, "total_tokens": 0}
    assert openai_list(VECTORS, "m", 4, "float")["data"][1]["embedding"] == VECTORS[1]
