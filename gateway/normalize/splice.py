"""Splicing a continuation onto a cut answer: what of the continuation's text the client must
not see twice, and which of its events belong in the answer already under way.

A model asked to continue an answer often repeats its tail first ("...the quick brown" then
"brown fox"), or the whole of it. `OverlapTrimmer` holds the continuation's first text until it
can tell, then drops the longest tail of the text already sent that the continuation repeats:

    trimmer = OverlapTrimmer(sent="The quick brown")
    trimmer.feed("brown fox")   # "": it could still be a repetition of more
    trimmer.feed(" jumps")      # " fox jumps": "brown" was the overlap
    trimmer.flush()             # what it still holds, at the continuation's end

A repeated tail counts as an overlap when it is at least MIN_OVERLAP characters long, or when
it starts at a word boundary and is at least MIN_WORD_OVERLAP long or the start of the word the
continuation goes on with (the cut word repeated: "the la" then "lazy"); shorter coincidences
are text. `SplicedDecoder` wraps the continuation's
stream decoder: its text goes through the trimmer (held text is decided at the first event that
ends the text: not a usage count, which some wires send first or with every chunk), its
MessageStart and thinking are dropped (the client's answer already started, and its reasoning
was streamed).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Final

from gateway.events import Event, MessageStart, TextDelta, ThinkingDelta, Usage
from gateway.formats.registry import StreamDecoder
from gateway.formats.sse import SSEFrame

MIN_OVERLAP: Final = 8
MIN_WORD_OVERLAP: Final = 3


def overlap(sent: str, text: str) -> int:
    """How many leading characters of `text` repeat the tail of `sent` (0: none counts).

    Every length at which a prefix of `text` equals a suffix of `sent` is a border of
    `text[:m] + separator + sent[-m:]`: the prefix function finds them all in O(m), longest
    first, so a continuation that repeats a long answer whole costs no more than its length."""
    size = min(len(sent), len(text))
    if size == 0:
        return 0
    seq: list[str | None] = [*text[:size], None, *sent[len(sent) - size :]]
    borders = _prefix_function(seq)
    length = borders[-1]
    while length > 0:
        if _counts(sent, text, length):
            return length
        length = borders[length - 1]
    return 0


def _counts(sent: str, text: str, length: int) -> bool:
    """Whether a repetition of `length` characters is one, not a coincidence: a long one, or
    one from a word boundary that is a few characters long or the start of the word the
    continuation goes on with ("the la" then "lazy")."""
    if length >= MIN_OVERLAP:
        return True
    start = len(sent) - length
    if not (start == 0 or sent[start - 1].isspace() or text[0].isspace()):
        return False
    return length >= MIN_WORD_OVERLAP or (
        text[length - 1].isalnum() and text[length : length + 1].isalnum()
    )


def _prefix_function(seq: list[str | None]) -> list[int]:
    """borders[i]: the length of the longest proper prefix of seq[: i + 1] that is also its
    suffix (Knuth-Morris-Pratt's failure function)."""
    borders = [0] * len(seq)
    for i in range(1, len(seq)):
        k = borders[i - 1]
        while k and seq[i] != seq[k]:
            k = borders[k - 1]
        if seq[i] == seq[k]:
            k += 1
        borders[i] = k
    return borders


class OverlapTrimmer:
    """The continuation's text, less what repeats the text already sent. `blank_sent`: the text
    sent ends in whitespace the continuation request left out (an assistant prefill must not
    end with it), so the continuation's leading whitespace is dropped."""

    __slots__ = ("_blank_sent", "_held", "_sent", "decided")

    def __init__(self, sent: str, blank_sent: bool = False) -> None:
        self._sent = sent
        self._blank_sent = blank_sent
        self._held = ""
        self.decided = not sent  # nothing sent: nothing to repeat

    def feed(self, text: str) -> str:
        if self.decided:
            return text
        held = self._held + text
        if self._blank_sent:
            held = held.lstrip()
            if not held:
                self._held = ""
                return ""
        if held in self._sent:  # may still grow into a repetition of the sent text's tail
            self._held = held
            return ""
        return self._decide(held)

    def flush(self) -> str:
        """The end of the continuation's text (or another kind of event came): decide now."""
        if self.decided:
            return ""
        return self._decide(self._held)

    def _decide(self, held: str) -> str:
        self.decided = True
        self._held = ""
        return held[overlap(self._sent, held) :]


class SplicedDecoder:
    """A continuation's stream decoder, as the answer it continues needs its events."""

    __slots__ = ("_inner", "trimmer")

    def __init__(self, inner: StreamDecoder, trimmer: OverlapTrimmer) -> None:
        self._inner = inner
        self.trimmer = trimmer

    def decode(self, frame: SSEFrame) -> tuple[dict[str, Any] | None, list[Event]]:
        obj, events = self._inner.decode(frame)
        return obj, spliced(events, self.trimmer) if events else events

    def eof(self) -> list[Event]:
        return spliced(self._inner.eof(), self.trimmer)


def spliced(events: list[Event], trimmer: OverlapTrimmer) -> list[Event]:
    """A continuation's events as the answer it continues needs them (a stream's frame by frame,
    or a whole body's at once): text trimmed, MessageStart and thinking left out."""
    out: list[Event] = []
    for event in events:
        cls = event.__class__
        if cls is TextDelta:
            assert isinstance(event, TextDelta)
            text = trimmer.feed(event.text)
            if text:
                out.append(TextDelta(text))
            continue
        if cls is MessageStart or cls is ThinkingDelta:
            continue
        if not trimmer.decided and cls is not Usage:  # the text is over: decide now
            held = trimmer.flush()
            if held:
                out.append(TextDelta(held))
        out.append(event)
    return out


@dataclass(slots=True)
class Splices:
    """One exchange's continuations: what its route allows, and what was spliced so far.

    Built only for a streamed exchange whose route turns recovery on; `gateway.summary()` is
    the `recovered` object of the `gateway` extension and of the audit record."""

    mid_stream: int  # breaks it may continue (0: none)
    max_tokens: int  # answers cut at max tokens it may continue (0: none)
    breaks: int = 0
    length_cuts: int = 0
    at_chars: list[int] = field(default_factory=list)
    targets: list[str] = field(default_factory=list)
    causes: list[str] = field(default_factory=list)

    def continues_length(self) -> bool:
        """Whether an answer cut at max tokens may still be continued: its stream writer holds
        the ending until the exchange knows."""
        return self.length_cuts < self.max_tokens

    def may_continue(self, cause: str) -> bool:
        if cause == "length":
            return self.continues_length()
        return self.breaks < self.mid_stream

    def spliced_at(self, cause: str, at_chars: int, target: str) -> None:
        if cause == "length":
            self.length_cuts += 1
        else:
            self.breaks += 1
        self.at_chars.append(at_chars)
        self.targets.append(target)
        self.causes.append(cause)

    def summary(self) -> dict[str, Any] | None:
        if not self.at_chars:
            return None
        return {
            "breaks": self.breaks,
            "max_tokens": self.length_cuts,
            "at_chars": list(self.at_chars),
            "targets": list(self.targets),
            "causes": list(self.causes),
        }
