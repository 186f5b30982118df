"""A reset is not a missing terminator: the two breaks of a started stream, told apart everywhere.

For each client format and upstream wire, one stream the upstream resets mid-way (an RST after
three events: `connection_lost`) and one it ends properly without its wire's terminator (the
chunked body's last chunk after three events: `missing_terminator`), through a real gateway in
front of `tests/fault_upstream.py`. Each exchange is checked in the client's error event, the
audit record, `gateway audit` (the truncated list's `why`, the summary's missing terminators) and
/metrics (the cut reason and the upstream error class).
"""

from __future__ import annotations

import subprocess
import sys
import urllib.request
from collections import Counter
from pathlib import Path
from typing import Any

import orjson
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests import fault_upstream as fu
from tests.fault_support import (
    CLIENTS,
    PAIRS,
    FaultStack,
    Reply,
    assert_error_event,
    gateway_of,
    scripted,
    send,
    the_record,
)

GATEWAY = str(Path(sys.executable).parent / "gateway")
# (the play, the cut reason, the record's error class, the OpenAI error event's code)
BREAKS = {
    "reset": (fu.reset_mid_body, "connection_lost", "stream_connection_lost", "connection_lost"),
    "no-terminator": (
        fu.end_mid_stream,
        "missing_terminator",
        "stream_truncated",
        "stream_truncated",
    ),
}
PROVIDERS = {"openai": "openai-calm", "anthropic": "anthropic-calm"}


class Sent:
    def __init__(self, reply: Reply, record: dict[str, Any]) -> None:
        self.reply = reply
        self.record = record


@pytest.fixture(scope="module")
def broken(tmp_path_factory: pytest.TempPathFactory):
    """Every break for every pair, sent once: (stack, {(break, client, wire): Sent})."""
    s = FaultStack(tmp_path_factory.mktemp("cut-reasons"))
    s.start()
    try:
        sent = {}
        for name, (play, *_rest) in BREAKS.items():
            for client, wire in PAIRS:
                model = scripted(s, wire, play())
                reply = send(s, CLIENTS[client], model, True)
                sent[(name, client, wire)] = Sent(reply, the_record(s, model))
        yield s, sent
    finally:
        s.stop()


@pytest.mark.parametrize(("client", "wire"), PAIRS)
@pytest.mark.parametrize("how", list(BREAKS))
def test_the_client_and_the_record_say_which_break(broken, how, client, wire):
    _stack, sent = broken
    _play, cut_reason, error_class, code = BREAKS[how]
    got = sent[(how, client, wire)]
    error = assert_error_event(CLIENTS[client], got.reply)
    ext = gateway_of(CLIENTS[client], got.reply)
    assert (ext["cut_reason"], ext["stop_reason"]) == (cut_reason, "error")
    if client == "chat":
        assert error["code"] == code
    record = got.record
    assert (record["truncated"], record["cut_reason"]) == (1, cut_reason)
    assert (record["error_class"], record["stop_reason"]) == (error_class, "error")
    assert record["terminator_seen"] == 0
    assert [a["outcome"] for a in record["attempts"]] == ["broken"]


def audit(stack: FaultStack, *args: str) -> Any:
    db = stack.audit_db("single")
    out = subprocess.run(
        [GATEWAY, "audit", "--store", f"sqlite:///{db}", "--since", "1h", *args],
        capture_output=True,
        check=True,
        timeout=60,
    )
    return orjson.loads(out.stdout)


def test_gateway_audit_tells_a_reset_from_a_missing_terminator(broken):
    stack, sent = broken
    listed = audit(stack, "--truncated", "--limit", "100", "--format", "json")
    why = {item["id"]: item["why"] for item in listed}
    for (how, _client, _wire), got in sent.items():
        assert why[got.record["id"]] == BREAKS[how][1]
    summary = {group["group"]: group for group in audit(stack, "--format", "json")}
    for wire, provider in PROVIDERS.items():
        # Three clients each: the resets are cut, but not counted as missing terminators.
        assert summary[provider]["truncated"] == 2 * len(CLIENTS)
        assert summary[provider]["missing_terminators"] == len(CLIENTS), wire


def samples(stack: FaultStack, name: str, label: str) -> Counter[tuple[str, str]]:
    """A counter's values summed by (provider, `label`), over every model."""
    with urllib.request.urlopen(f"{stack.urls['single']}/metrics", timeout=10) as response:
        text = response.read().decode()
    sums: Counter[tuple[str, str]] = Counter()
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == name:
                sums[(sample.labels["provider"], sample.labels[label])] += int(sample.value)
    return sums


def test_metrics_tell_a_reset_from_a_missing_terminator(broken):
    stack, _sent = broken
    cut = samples(stack, "gateway_truncated_exchanges_total", "cut_reason")
    errors = samples(stack, "gateway_upstream_errors_total", "error_class")
    for provider in PROVIDERS.values():
        for _play, cut_reason, error_class, _code in BREAKS.values():
            assert cut[(provider, cut_reason)] == len(CLIENTS), (provider, cut_reason, cut)
            assert errors[(provider, error_class)] == len(CLIENTS), (provider, error_class)
