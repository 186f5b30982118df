"""`POST /v1/messages`: the Anthropic Messages endpoint."""

from __future__ import annotations

from gateway.encode import anthropic_body
from gateway.encode.anthropic_relay import AnthropicRelay
from gateway.encode.anthropic_stream import AnthropicMessagesWriter
from gateway.handlers.exchange import ClientSpec
from gateway.handlers.validation import MessagesBody

SPEC = ClientSpec(
    format="anthropic",
    endpoint="messages",
    body_model=MessagesBody,
    relay=AnthropicRelay,
    writer=AnthropicMessagesWriter,
    relay_body=anthropic_body.relay_body,
    build_body=anthropic_body.build_body,
)
