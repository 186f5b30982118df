"""An OpenAI answer that refuses: `refusal` text with `finish_reason: "stop"` (recorded from
api.openai.com). It is a refusal, not a clean stop: the normalized reason is REFUSAL, the native
`stop` is kept, and the refusal text reaches the client. An OpenAI client keeps OpenAI's own
shape (finish `stop`, the `refusal` field); an Anthropic client gets `stop_reason: "refusal"`
and the text as the answer."""

from __future__ import annotations

import orjson
import pytest

from tests.fixtures_util import stream_body
from tests.scenarios import Answer
from tests.test_matrix_support import drive
from tests.upstream import Script

REFUSAL = "I'm sorry, I can't assist with that request."
RECORDED = "openai_chat/openai_python__refusal_stream.sse"
BODY = {
    "id": "chatcmpl-refusal-1",
    "object": "chat.completion",
    "created": 1727346172,
    "model": "gpt-4o-2024-08-06",
    "choices": [
        {
            "index": 0,
            "message": {"role": "assistant", "content": None, "refusal": REFUSAL},
            "logprobs": None,
            "finish_reason": "stop",
        }
    ],
    "usage": {"prompt_tokens": 79, "completion_tokens": 11, "total_tokens": 90},
}


def refusal_script(stream: bool) -> Script:
    if stream:
        return Script(chunks=[stream_body(RECORDED)])
    return Script(body=orjson.dumps(BODY))


@pytest.mark.parametrize("stream", [True, False], ids=["stream", "whole"])
@pytest.mark.parametrize("client", ["openai", "anthropic"])
def test_an_openai_refusal_is_a_refusal_with_its_native_stop_kept(
    stack, upstream, unique_model, client, stream
):
    answer = Answer()
    script = refusal_script(stream)
    seen = drive(
        stack, upstream, unique_model, client, "openai", answer, stream=stream, script=script
    )

    assert seen.error is None, seen.error
    assert seen.gateway is not None
    assert (seen.gateway["stop_reason"], seen.gateway["native_stop_reason"]) == ("refusal", "stop")
    assert seen.gateway["truncated"] is False
    if client == "openai":
        assert (seen.stop, seen.native) == ("stop", "stop")  # OpenAI's own shape, unchanged
        message = seen.obj.choices[0].message
        assert message.refusal == REFUSAL
    else:
        assert seen.stop == "refusal"
        assert seen.text == REFUSAL
