"""The model seam: one method that turns a conversation into the model's next `Turn`.

`OpenAIChatClient` and `AnthropicMessagesClient` implement it over HTTP; a test double is a class
with this one method. An implementation never raises for a failed call: it returns
`Turn.failed(...)` (stop reason ERROR, a typed `ModelError`), so the loop treats every failure as
a turn outcome.

    class Scripted:
        def __init__(self, turns: list[Turn]) -> None:
            self.turns = turns

        async def complete(self, request: ModelRequest) -> Turn:
            return self.turns.pop(0)
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from gateway.loop.conversation import Message
from gateway.loop.tools import Tool
from gateway.loop.turn import Turn


@dataclass(frozen=True, slots=True)
class ModelRequest:
    messages: Sequence[Message]
    tools: Sequence[Tool] = ()
    system: str | None = None


class ModelClient(Protocol):
    async def complete(self, request: ModelRequest) -> Turn: ...
