"""Token counts and embeddings on the Gemini wire, through the gateway: the Anthropic SDK's
`count_tokens` answered by Gemini's `countTokens` (the request translated, in its
`generateContentRequest` envelope), and the OpenAI SDK's embeddings by `batchEmbedContents`,
returned in OpenAI's shape in the encoding the client asked for."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest

from tests.gemini_upstream import GEMINI_KEY, GeminiStack, error_body
from tests.upstream import Script

MESSAGES = [{"role": "user", "content": "count these words"}]


@pytest.fixture(scope="module")
def gstack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GeminiStack]:
    stack = GeminiStack(Path(tmp_path_factory.mktemp("gemini-ops")))
    stack.start()
    yield stack
    stack.stop()


def test_count_tokens_is_gemini_count_of_the_translated_request(gstack, unique_model):
    model = unique_model("gm")
    gstack.upstream.script(model, Script(body=orjson.dumps({"totalTokens": 57})))
    raw = gstack.anthropic().messages.with_raw_response.count_tokens(
        model=model, messages=MESSAGES, system="be terse"
    )
    assert raw.parse().input_tokens == 57
    assert orjson.loads(raw.http_response.content)["gateway"]["estimated"] is False
    got = gstack.upstream.last(model)
    assert got.path == f"/v1beta/models/{model}:countTokens"
    assert got.headers["x-goog-api-key"] == GEMINI_KEY
    request = got.json["generateContentRequest"]
    assert request["model"] == f"models/{model}"
    assert request["contents"] == [{"role": "user", "parts": [{"text": "count these words"}]}]
    assert request["systemInstruction"]["parts"] == [{"text": "be terse"}]


def test_a_gemini_count_error_reaches_the_anthropic_client(gstack, unique_model):
    model = unique_model("gm")
    body = error_body(400, "INVALID_ARGUMENT", "bad request")
    gstack.upstream.script(model, Script(status=400, body=body))
    with pytest.raises(Exception) as caught:
        gstack.anthropic().messages.count_tokens(model=model, messages=MESSAGES)
    assert getattr(caught.value, "status_code", None) == 400


@pytest.mark.parametrize("encoding", ["float", None])
def test_embeddings_are_batch_embed_contents_in_openai_shape(gstack, unique_model, encoding):
    """None: the SDK's default, which asks for base64 and decodes it (float32)."""
    model = unique_model("gm")
    vectors = [[0.5, -0.25, 1.0], [0.0, 0.125, -1.0]]
    answer = {"embeddings": [{"values": v} for v in vectors]}
    gstack.upstream.script(model, Script(body=orjson.dumps(answer)))
    extra = {"encoding_format": encoding} if encoding else {}
    result = gstack.openai().embeddings.create(
        model=model, input=["one", "two"], dimensions=3, **extra
    )
    assert [list(d.embedding) for d in result.data] == vectors
    assert [d.index for d in result.data] == [0, 1]
    got = gstack.upstream.last(model)
    assert got.path == f"/v1beta/models/{model}:batchEmbedContents"
    assert got.json == {
        "requests": [
            {
                "model": f"models/{model}",
                "content": {"parts": [{"text": t}]},
                "outputDimensionality": 3,
            }
            for t in ("one", "two")
        ]
    }


def test_a_short_embeddings_answer_is_a_502(gstack, unique_model):
    model = unique_model("gm")
    gstack.upstream.script(model, Script(body=orjson.dumps({"embeddings": [{"values": [1.0]}]})))
    with pytest.raises(Exception) as caught:
        gstack.openai().embeddings.create(model=model, input=["one", "two"])
    assert getattr(caught.value, "status_code", None) == 502


def test_token_inputs_are_refused_for_gemini(gstack, unique_model):
    model = unique_model("gm")
    gstack.upstream.script(model, Script(body=b"{}"))
    with pytest.raises(Exception) as caught:
        gstack.openai().embeddings.create(model=model, input=[[1, 2, 3]])
    assert getattr(caught.value, "status_code", None) == 400
    assert gstack.upstream.received[model] == []
