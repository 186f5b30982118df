"""Responses reasoning items -> Anthropic thinking blocks, first in their assistant message
(RESPONSES.md §7.1, §7.3).

The message core (Responses -> Chat -> Anthropic) has no place for thinking, so the blocks are
put in afterwards, by position: the walk below counts the assistant messages the input forms by
the core's own grouping (contiguous assistant messages and calls are one assistant message, a
system item or an empty message breaks nothing, a user message or a call output ends it).

    >>> token = reasoning_token.encode(reasoning_token.Thinking(signature="s"))
    >>> items = [{"role": "user", "content": "hi"},
    ...          {"type": "reasoning", "summary": [{"type": "summary_text", "text": "Hm."}],
    ...           "encrypted_content": token},
    ...          {"role": "assistant", "content": "Hello."}]
    >>> messages = [{"role": "user", "content": [{"type": "text", "text": "hi"}]},
    ...             {"role": "assistant", "content": [{"type": "text", "text": "Hello."}]}]
    >>> place(messages, read(items))
    1
    >>> messages[1]["content"][0]
    {'type': 'thinking', 'thinking': 'Hm.', 'signature': 's'}

A reasoning item belongs to the run of assistant items it sits in. One with no gateway token
(OpenAI's encrypted reasoning, or none), or in a run that sends nothing to Anthropic, is not
carried; the caller counts it as dropped.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from gateway.translate import reasoning_token
from gateway.translate.translation import Dropped

Block = dict[str, Any]

_ASSISTANT_ITEMS = frozenset({"function_call", "custom_tool_call"})
_USER_ITEMS = frozenset({"function_call_output", "custom_tool_call_output"})
_TEXT_PARTS = frozenset({"input_text", "output_text", "text"})


@dataclass
class Placement:
    """Thinking blocks by the ordinal of the assistant message they lead, and how many
    assistant messages the input forms (checked against the core's output)."""

    blocks: dict[int, list[Block]] = field(default_factory=dict)
    turns: int = 0


def read(items: Any) -> Placement:
    placement = Placement()
    in_assistant = False
    pending: list[Block] = []  # thinking waiting for its run's first assistant message
    for item in items if isinstance(items, list) else ():
        if not isinstance(item, dict):
            continue
        kind = item.get("type", "message" if "role" in item else None)
        if kind == "reasoning":
            block = thinking_block(item)
            if block is not None and in_assistant:
                placement.blocks.setdefault(placement.turns - 1, []).append(block)
            elif block is not None:
                pending.append(block)
            continue
        side = _side(kind, item)
        if side == "assistant":
            if not in_assistant:
                placement.turns += 1
                in_assistant = True
            if pending:
                placement.blocks.setdefault(placement.turns - 1, []).extend(pending)
                pending = []
        elif side == "user":
            in_assistant = False
            pending = []  # a run of reasoning alone: nothing to lead
    return placement


def place(messages: list[dict[str, Any]], placement: Placement) -> int:
    """Put the blocks first in their assistant messages; returns how many were placed. When the
    core grouped the input otherwise than the walk counted, none is placed: a thinking block in
    the wrong turn would be worse than none."""
    assistants = [m for m in messages if m.get("role") == "assistant"]
    if len(assistants) != placement.turns:
        return 0
    placed = 0
    for ordinal, blocks in placement.blocks.items():
        assistants[ordinal]["content"][:0] = blocks
        placed += len(blocks)
    return placed


def thinking_block(item: Block) -> Block | None:
    """The Anthropic block a reasoning item stands for, if it carries a gateway token."""
    thinking = reasoning_token.decode(item.get("encrypted_content"))
    if thinking is None:
        return None
    if thinking.redacted is not None:
        return {"type": "redacted_thinking", "data": thinking.redacted}
    summary = item.get("summary")
    parts = [p for p in summary if isinstance(p, dict)] if isinstance(summary, list) else []
    text = "".join(p["text"] for p in parts if isinstance(p.get("text"), str))
    return {"type": "thinking", "thinking": text, "signature": thinking.signature}


def _side(kind: Any, item: Block) -> str | None:
    """Which side of the Anthropic conversation an item adds a block to, if any."""
    if kind in _ASSISTANT_ITEMS:
        return "assistant"
    if kind in _USER_ITEMS:
        return "user"
    role = item.get("role")
    if kind != "message" or role not in ("user", "assistant"):
        return None  # system and developer text goes to `system`; other items are dropped
    return role if _sends_content(item.get("content"), role) else None


def _sends_content(content: Any, role: str) -> bool:
    """Whether the core makes a block of a message's content (it skips empty text; an assistant
    message's refusal parts send nothing)."""
    if isinstance(content, str):
        return bool(content)
    for part in content if isinstance(content, list) else ():
        kind = part.get("type") if isinstance(part, dict) else None
        if kind in _TEXT_PARTS:
            if part.get("text"):
                return True
        elif role == "user":
            return True
    return False


def without_gateway_reasoning(body: dict[str, Any]) -> tuple[dict[str, Any], Dropped] | None:
    """A Responses upstream cannot read the gateway's `gw1:` tokens (a conversation that moved
    from an Anthropic model): the reasoning items carrying one are left out and counted."""
    items = body.get("input")
    if not isinstance(items, list):
        return None
    # Only reasoning items can carry one; found first by a test per item, not a call per item.
    reasoning = [
        item for item in items if isinstance(item, dict) and item.get("type") == "reasoning"
    ]
    if not reasoning or not any(map(_carries_gateway_token, reasoning)):
        return None
    kept = [item for item in items if not _carries_gateway_token(item)]
    dropped = Dropped(items={"reasoning": len(items) - len(kept)})
    return {**body, "input": kept}, dropped


def _carries_gateway_token(item: Any) -> bool:
    return (
        isinstance(item, dict)
        and item.get("type") == "reasoning"
        and reasoning_token.decode(item.get("encrypted_content")) is not None
    )
