"""The request that continues a cut answer, in the client's own format (it is then sent as
any request of the client is: relayed to its own wire, or translated).

The answer so far becomes an assistant turn at the end of the conversation. On a wire that
continues an assistant turn (Anthropic's prefill) that is all; on the others a user turn follows
that asks the model to continue exactly where it stopped:

    body = client.continued_body(obj, "The quick brown", True)   # a row of gateway.client_formats
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

ContinuedBody = Callable[[dict[str, Any], str, bool], dict[str, Any]]

CONTINUE_INSTRUCTION: Final = (
    "Your previous message was cut off. Continue it exactly where it stopped, starting with the "
    "next character: do not repeat any of it, do not comment on the interruption."
)


def continued_chat(obj: dict[str, Any], text: str, ask: bool) -> dict[str, Any]:
    """OpenAI Chat Completions: `messages` gains the answer so far (and the request)."""
    if not text:
        return obj
    messages = [*obj.get("messages", ()), {"role": "assistant", "content": text}]
    if ask:
        messages.append({"role": "user", "content": CONTINUE_INSTRUCTION})
    return {**obj, "messages": messages}


def continued_messages(obj: dict[str, Any], text: str, ask: bool) -> dict[str, Any]:
    """Anthropic Messages: the answer so far is the last assistant turn (joined to one the
    client prefilled itself). Extended thinking is left out: a turn that continues an
    assistant's cannot think first, and the client saw the answer's thinking already."""
    body = {key: value for key, value in obj.items() if key != "thinking"}
    if not text:
        return body
    messages = list(obj.get("messages", ()))
    last = messages[-1] if messages else None
    if isinstance(last, dict) and last.get("role") == "assistant":
        content = last.get("content")
        if isinstance(content, str):
            joined: Any = content + text
        else:
            joined = [*(content or ()), {"type": "text", "text": text}]
        messages[-1] = {**last, "content": joined}
    else:
        messages.append({"role": "assistant", "content": text})
    if ask:
        messages.append({"role": "user", "content": CONTINUE_INSTRUCTION})
    body["messages"] = messages
    return body


def continued_responses(obj: dict[str, Any], text: str, ask: bool) -> dict[str, Any]:
    """OpenAI Responses: `input` gains an assistant message item (and the request)."""
    if not text:
        return obj
    given = obj.get("input")
    items: list[Any] = (
        [{"role": "user", "content": given}] if isinstance(given, str) else list(given or ())
    )
    content = [{"type": "output_text", "text": text, "annotations": []}]
    items.append({"type": "message", "role": "assistant", "content": content})
    if ask:
        items.append({"type": "message", "role": "user", "content": CONTINUE_INSTRUCTION})
    return {**obj, "input": items}
