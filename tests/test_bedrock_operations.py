"""Token counts and embeddings on Bedrock, through the gateway, signed with SigV4 like every
Bedrock request: the Anthropic SDK's `count_tokens` answered by Bedrock's CountTokens (the
Converse request under `input.converse`), and the OpenAI SDK's embeddings by InvokeModel with
the model family's own body (Titan: one text; Cohere: a list)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import openai
import orjson
import pytest

from tests.bedrock_upstream import BedrockStack, gateway_settings
from tests.test_bedrock_wire import isolate_aws
from tests.upstream import Script

MESSAGES = [{"role": "user", "content": "count these words"}]


@pytest.fixture(scope="module")
def bstack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BedrockStack]:
    tmp = Path(tmp_path_factory.mktemp("bedrock-ops"))
    with pytest.MonkeyPatch.context() as mp:
        isolate_aws(mp, tmp)
        stack = BedrockStack(tmp)
        stack.start()
        yield stack
        stack.stop()


def test_count_tokens_is_bedrock_count_of_the_converse_request(bstack):
    model = "br-anthropic.claude-sonnet-4-5-v1:0"
    bstack.upstream.script(model, Script(body=orjson.dumps({"inputTokens": 23})))
    raw = bstack.anthropic().messages.with_raw_response.count_tokens(
        model=model, messages=MESSAGES, system="be terse"
    )
    assert raw.parse().input_tokens == 23
    assert orjson.loads(raw.http_response.content)["gateway"]["estimated"] is False
    got = bstack.upstream.last(model)
    assert got.path == f"/model/{model}/count-tokens"
    assert got.headers["Authorization"].startswith("AWS4-HMAC-SHA256 Credential=")
    converse = got.json["input"]["converse"]
    assert converse["messages"] == [{"role": "user", "content": [{"text": "count these words"}]}]
    assert converse["system"] == [{"text": "be terse"}]
    assert set(converse) <= {"messages", "system", "toolConfig", "additionalModelRequestFields"}
    assert bstack.upstream.auth_failures == []


def test_titan_embeddings_one_text(bstack):
    model = "br-amazon.titan-embed-text-v2:0"
    answer = {"embedding": [0.5, -0.25], "inputTextTokenCount": 4}
    bstack.upstream.script(model, Script(body=orjson.dumps(answer)))
    result = bstack.openai().embeddings.create(model=model, input="hello there", dimensions=2)
    assert [list(d.embedding) for d in result.data] == [[0.5, -0.25]]
    assert result.usage.prompt_tokens == 4
    got = bstack.upstream.last(model)
    assert got.path == f"/model/{model}/invoke"
    assert got.json == {"inputText": "hello there", "dimensions": 2}


@pytest.mark.parametrize("upstream_model", ["cohere.embed-english-v3", "us.cohere.embed-v4:0"])
def test_cohere_embeddings_take_a_list(bstack, upstream_model):
    """The family is read from the model id (an inference profile's region prefix too)."""
    config = gateway_settings(bstack.upstream_url, "withhold", "sqlite:///:memory:")
    config["routes"] = [{"match": "emb", "provider": "bedrock", "upstream_model": upstream_model}]
    url = bstack.add_gateway(f"cohere-{upstream_model}", config)
    answer = {"embeddings": [[1.0, 0.0], [0.0, 1.0]], "id": "e1", "texts": ["a", "b"]}
    bstack.upstream.script(upstream_model, Script(body=orjson.dumps(answer)))
    client = openai.OpenAI(base_url=url + "/v1", api_key="sk-client", max_retries=0)
    result = client.embeddings.create(model="emb", input=["a", "b"])
    assert [list(d.embedding) for d in result.data] == [[1.0, 0.0], [0.0, 1.0]]
    assert bstack.upstream.last(upstream_model).json == {
        "texts": ["a", "b"],
        "input_type": "search_document",
    }


def test_titan_with_two_texts_is_refused_before_sending(bstack):
    model = "br-amazon.titan-embed-text-v1"
    bstack.upstream.script(model, Script(body=b"{}"))
    with pytest.raises(Exception) as caught:
        bstack.openai().embeddings.create(model=model, input=["a", "b"])
    assert getattr(caught.value, "status_code", None) == 400
    assert bstack.upstream.received[model] == []
