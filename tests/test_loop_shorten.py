"""`shorten`: the middle of an answer is elided and its end kept, within the limit."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gateway.loop import TRUNCATION_MARKER, shorten


def test_a_text_that_fits_is_unchanged():
    assert shorten("short answer", 12) == "short answer"


def test_the_middle_goes_and_the_end_stays():
    text = "".join(f"{n:03d} " for n in range(100))  # "000 001 ... 099 ", 400 characters
    # a third of the room left by the note for the head, the rest for the tail: 80 in all
    assert shorten(text, 80) == (
        "000 001 002 003\n[... 353 characters elided ...]\n092 093 094 095 096 097 098 099 "
    )


def test_a_cut_answer_keeps_its_marker():
    answer = "word " * 2000 + "\n\n" + TRUNCATION_MARKER
    short = shorten(answer, 500)
    assert len(short) <= 500 and short.endswith("word word \n\n" + TRUNCATION_MARKER)


def test_a_limit_too_small_for_the_note_keeps_only_the_tail():
    assert shorten("abcdefghijklmnopqrstuvwxyz", 5) == "vwxyz"


def test_the_limit_must_be_positive():
    with pytest.raises(ValueError, match="at least 1"):
        shorten("text", 0)


@given(st.text(max_size=3000), st.integers(min_value=1, max_value=2000))
def test_never_longer_than_the_limit_and_always_ending_as_the_text_ends(text, limit):
    short = shorten(text, limit)
    assert len(short) <= limit
    keep = min(len(text), max(1, limit // 2))
    assert short.endswith(text[-keep:]) if text else short == ""
