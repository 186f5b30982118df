"""Shortening an answer for display or a report: the middle goes, the end always stays.

The end of an answer says how it ended (a cut answer's last line is the truncation marker), so
every place the library shortens an answer keeps its tail, and a little of its head for context.

    shorten(answer, 2000)   # answer itself when it fits; else head + "[... n characters elided
                            # ...]" + tail, at most 2000 characters, ending as `answer` ends
"""

from __future__ import annotations

ELISION = "\n[... {n} characters elided ...]\n"


def shorten(text: str, limit: int) -> str:
    """At most `limit` characters of `text`: a third of the room for the head, the rest for the
    tail. When even the elision note does not fit, the last `limit` characters."""
    if limit < 1:
        raise ValueError(f"the limit must be at least 1, not {limit}")
    if len(text) <= limit:
        return text
    room = limit - len(ELISION.format(n=len(text)))  # n never has more digits than len(text)
    if room <= 0:
        return text[-limit:]
    head = room // 3
    tail = room - head
    return text[:head] + ELISION.format(n=len(text) - head - tail) + text[-tail:]
