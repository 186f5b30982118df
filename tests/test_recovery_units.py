"""The pieces of stream recovery on their own: overlap trimming, the spliced decoder, the
aggregator resumed by a continuation, the continuation request of each client format, which
cuts may be mended, and the [recovery] settings."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest

from gateway.client_formats import CLIENT_FORMATS
from gateway.events import (
    MessageStart,
    RefusalDelta,
    Stop,
    StopReason,
    StreamEnd,
    StreamError,
    TextDelta,
    ThinkingDelta,
    ToolCallStart,
    Usage,
)
from gateway.formats.sse import SSEFrame
from gateway.handlers.recovery import Recovery
from gateway.normalize.aggregate import ChunkAggregator
from gateway.normalize.splice import OverlapTrimmer, SplicedDecoder, Splices, overlap
from gateway.settings import ConfigError, parse_settings
from gateway.translate.continuation import CONTINUE_INSTRUCTION


@pytest.mark.parametrize(
    ("sent", "text", "repeated"),
    [
        ("The quick brown", " fox", 0),  # a plain continuation
        ("The quick brown", "brown fox", 5),  # the last word again
        ("The quick brown", "quick brown fox", 11),
        ("The quick brown", "The quick brown fox", 15),  # the whole answer again
        ("the la", "lazy dog", 2),  # the cut word, whole
        ("the l", "lazy dog", 1),
        ("the la", " lazy", 3),  # ... with the space before it
        ("It is a", "nd so on", 0),  # the rest of the cut word
        ("abc", "c d", 0),  # one character mid-word: a coincidence
        ("I", "I think", 0),  # a one-letter word is not a repetition
        ("count 12345678", "12345678 more", 8),  # long enough wherever it starts
        ("x", "", 0),
        ("", "text", 0),
    ],
)
def test_overlap_counts_repetitions_not_coincidences(sent, text, repeated):
    assert overlap(sent, text) == repeated


def test_a_long_repetition_is_found_in_linear_time():
    sent = "ab" * 50_000
    assert overlap(sent, sent + " and more") == len(sent)


def test_the_trimmer_holds_what_may_still_repeat_the_tail():
    trimmer = OverlapTrimmer("The quick brown")
    assert trimmer.feed("bro") == ""  # may be "brown" again
    assert trimmer.feed("wn") == ""
    assert trimmer.feed(" fox") == " fox"
    assert trimmer.feed(" jumps") == " jumps"  # decided: later text goes straight through


def test_the_trimmer_gives_what_it_holds_at_the_end():
    trimmer = OverlapTrimmer("The quick brown")
    assert trimmer.feed("qu") == ""
    assert trimmer.flush() == "qu"  # too short to be a repetition


def test_the_trimmer_drops_leading_space_a_prefill_left_out():
    trimmer = OverlapTrimmer("the lazy ", blank_sent=True)
    assert trimmer.feed(" ") == ""
    assert trimmer.feed(" dog") == "dog"


class Scripted:
    def __init__(self, *batches):
        self.batches = list(batches)

    def decode(self, frame):
        return None, self.batches.pop(0)

    def eof(self):
        return self.batches.pop(0) if self.batches else []


def test_the_spliced_decoder_trims_text_and_drops_what_the_answer_has():
    inner = Scripted(
        [MessageStart("msg_2", "m"), Usage(input_tokens=5), ThinkingDelta("hmm"), TextDelta("bro")],
        [TextDelta("wn fox"), Usage(output_tokens=3), Stop(StopReason.STOP, "end_turn")],
        [StreamEnd(True)],
    )
    decoder = SplicedDecoder(inner, OverlapTrimmer("The quick brown"))
    frame = SSEFrame(None, b"{}")
    assert decoder.decode(frame)[1] == [Usage(input_tokens=5)]  # usage decides nothing
    assert decoder.decode(frame)[1] == [
        TextDelta(" fox"),
        Usage(output_tokens=3),
        Stop(StopReason.STOP, "end_turn"),
    ]
    assert decoder.eof() == [StreamEnd(True)]


def test_held_text_goes_out_before_the_event_that_ends_the_text():
    decoder = SplicedDecoder(
        Scripted([TextDelta("qu"), ToolCallStart(0, "c1", "f")]), OverlapTrimmer("The quick")
    )
    assert decoder.decode(SSEFrame(None, b"{}"))[1] == [
        TextDelta("qu"),
        ToolCallStart(0, "c1", "f"),
    ]


def test_a_resumed_aggregator_keeps_the_text_and_adds_the_usage():
    agg = ChunkAggregator()
    for event in (MessageStart("m1", "model"), Usage(10, 4), TextDelta("The quick ")):
        agg.handle(event)
    agg.handle(StreamError("truncated", "reset"))
    assert agg.error is not None
    agg.resume()
    assert agg.error is None and agg.stop == (StopReason.UNKNOWN, None)
    for event in (Usage(12, 3), TextDelta("brown fox"), Stop(StopReason.STOP, "stop")):
        assert agg.handle(event) is None
    agg.handle(StreamEnd(True))
    response = agg.final()
    assert response.text == "The quick brown fox"
    assert (response.usage.input_tokens, response.usage.output_tokens) == (22, 7)
    assert response.usage.cache_read_tokens is None  # unknown in both: still unknown
    assert (response.stop_reason, response.complete, response.id) == (StopReason.STOP, True, "m1")


def test_an_aggregator_resumed_after_its_end_takes_events_again():
    agg = ChunkAggregator()
    for event in (TextDelta("a"), Stop(StopReason.LENGTH, "length"), StreamEnd(True)):
        agg.handle(event)
    agg.resume()
    assert agg.handle(TextDelta("b")) is None  # not "after the end of the stream"
    agg.handle(Stop(StopReason.STOP, "stop"))
    agg.handle(StreamEnd(True))
    assert agg.final().text == "ab"


def test_the_chat_continuation_asks_in_a_user_turn():
    obj = {"model": "m", "messages": [{"role": "user", "content": "Tell me"}], "stream": True}
    body = CLIENT_FORMATS["openai"].continued_body(obj, "The quick", True)
    assert body["messages"][1:] == [
        {"role": "assistant", "content": "The quick"},
        {"role": "user", "content": CONTINUE_INSTRUCTION},
    ]
    assert obj["messages"] == [{"role": "user", "content": "Tell me"}]  # not changed in place
    assert CLIENT_FORMATS["openai"].continued_body(obj, "", True) is obj  # nothing sent yet


def test_the_messages_continuation_prefills_and_joins_a_prefill_of_the_client():
    obj = {
        "model": "m",
        "max_tokens": 64,
        "thinking": {"type": "enabled", "budget_tokens": 1024},
        "messages": [
            {"role": "user", "content": "Tell me"},
            {"role": "assistant", "content": [{"type": "text", "text": "Sure:"}]},
        ],
    }
    body = CLIENT_FORMATS["anthropic"].continued_body(obj, " the quick", False)
    assert "thinking" not in body  # a continued assistant turn cannot think first
    assert body["messages"][-1] == {
        "role": "assistant",
        "content": [{"type": "text", "text": "Sure:"}, {"type": "text", "text": " the quick"}],
    }
    asked = CLIENT_FORMATS["anthropic"].continued_body(obj, " the quick", True)
    assert asked["messages"][-1] == {"role": "user", "content": CONTINUE_INSTRUCTION}


def test_the_responses_continuation_makes_items_of_a_string_input():
    obj = {"model": "m", "input": "Tell me", "stream": True}
    body = CLIENT_FORMATS["responses"].continued_body(obj, "The quick", True)
    assert body["input"] == [
        {"role": "user", "content": "Tell me"},
        {
            "type": "message",
            "role": "assistant",
            "content": [{"type": "output_text", "text": "The quick", "annotations": []}],
        },
        {"type": "message", "role": "user", "content": CONTINUE_INSTRUCTION},
    ]


class NoContinuer:
    async def __call__(self, sent, cause):
        return None


def streamed(*events):
    agg = ChunkAggregator()
    for event in events:
        agg.handle(event)
    return agg


@pytest.mark.parametrize(
    ("events", "error", "cause"),
    [
        ([TextDelta("a")], StreamError("truncated", "reset"), "missing_terminator"),
        ([TextDelta("a")], StreamError("timeout", "idle"), "upstream_timeout"),
        ([TextDelta("a")], StreamError("upstream_error", "overloaded"), "upstream_error"),
        ([TextDelta("a")], StreamError("protocol", "garbage"), "upstream_error"),
        ([], StreamError("truncated", "reset"), "missing_terminator"),  # only the head was sent
        ([TextDelta("a")], StreamError("aborted", "the client left"), None),
        ([TextDelta("a")], StreamError("gateway", "a bug"), None),
        ([TextDelta("a"), ToolCallStart(0, "c", "f")], StreamError("truncated", "r"), None),
        ([RefusalDelta("no")], StreamError("truncated", "reset"), None),
        ([ThinkingDelta("hmm")], StreamError("truncated", "reset"), None),  # cut while thinking
        (
            [ThinkingDelta("hmm"), TextDelta("a")],
            StreamError("truncated", "r"),
            "missing_terminator",
        ),
    ],
)
def test_which_breaks_may_be_mended(events, error, cause):
    recovery = Recovery(Splices(mid_stream=1, max_tokens=0), NoContinuer())
    assert recovery.cause_of_break(streamed(*events), error) == cause


def test_the_bounds_are_counted_apart():
    splices = Splices(mid_stream=1, max_tokens=2)
    recovery = Recovery(splices, NoContinuer())
    agg = streamed(TextDelta("a"))
    splices.spliced_at("missing_terminator", 1, "t/*")
    assert recovery.cause_of_break(agg, StreamError("truncated", "again")) is None
    assert recovery.continues_length(agg)
    splices.spliced_at("length", 2, "t/*")
    splices.spliced_at("length", 3, "t/*")
    assert not recovery.continues_length(agg)
    assert splices.summary() == {
        "breaks": 1,
        "max_tokens": 2,
        "at_chars": [1, 2, 3],
        "targets": ["t/*", "t/*", "t/*"],
        "causes": ["missing_terminator", "length", "length"],
    }
    assert not recovery.continues_length(streamed())  # no text: nothing to continue


def settings(**recovery):
    return parse_settings(
        {
            "providers": {"m": {"kind": "mock"}},
            "routes": [
                {"match": "own-*", "provider": "m", "recovery": {"max_tokens": "continue"}},
                {"match": "*", "provider": "m"},
            ],
            "recovery": recovery,
        }
    )


def test_a_routes_recovery_sets_its_keys_over_the_top_level_ones():
    configured = settings(mid_stream="continue", max_recoveries=2)
    own = configured.recovery_for(configured.resolve_route("own-x"))
    assert (own.mid_stream, own.max_recoveries, own.max_tokens) == ("continue", 2, "continue")
    other = configured.recovery_for(configured.resolve_route("x"))
    assert (other.mid_stream, other.max_tokens, other.enabled) == ("continue", "off", True)
    assert not settings().recovery.enabled  # off by default


@pytest.mark.parametrize(
    ("key", "value"), [("mid_stream", "yes"), ("max_recoveries", -1), ("maxtokens", "continue")]
)
def test_a_bad_recovery_value_is_a_configuration_error(key, value):
    with pytest.raises(ConfigError, match="recovery"):
        settings(**{key: value})


def test_the_recovery_pages_configuration_is_valid():
    page = (Path(__file__).resolve().parent.parent / "docs" / "recovery.md").read_text()
    blocks = re.findall(r"```toml\n(.*?)```", page, re.S)
    assert blocks
    providers = {"anthropic": {"kind": "anthropic"}, "openai": {"kind": "openai"}}
    for block in blocks:
        configured = parse_settings({"providers": providers, **tomllib.loads(block)})
        assert configured.recovery.mid_stream == "continue"
        route = configured.resolve_route("smart")
        assert route is not None and configured.recovery_for(route).max_tokens == "continue"
