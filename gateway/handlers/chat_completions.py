"""`POST /v1/chat/completions`: the OpenAI Chat Completions endpoint."""

from __future__ import annotations

from gateway.encode import openai_body
from gateway.encode.openai_relay import OpenAIRelay
from gateway.encode.openai_stream import OpenAIChatWriter
from gateway.handlers.exchange import ClientSpec
from gateway.handlers.validation import ChatCompletionsBody

SPEC = ClientSpec(
    format="openai",
    endpoint="chat completions",
    body_model=ChatCompletionsBody,
    relay=OpenAIRelay,
    writer=OpenAIChatWriter,
    relay_body=openai_body.relay_body,
    build_body=openai_body.build_body,
)
