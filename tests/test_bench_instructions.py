"""`python -m gateway_bench.instructions`: a wire's instructions per request, from two starts of
the gateway under callgrind (the second answering more requests), the difference over the
extra requests."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from gateway_bench import instructions
from gateway_bench.instructions import NoCount, callgrind_total, per_request

CALLGRIND_HEAD = b"""# callgrind format
version: 1
creator: callgrind-3.19.0
pid: 4242
cmd:  python -m gateway serve
part: 1

positions: line
events: Ir
summary: 4103403878

fl=(1) ceval.c
fn=(1) _PyEval_EvalFrameDefault
15 900
"""


def test_the_total_is_the_summary_line() -> None:
    assert callgrind_total(CALLGRIND_HEAD) == 4103403878


def test_a_totals_line_counts_as_well() -> None:
    assert callgrind_total(b"events: Ir\nfn=(1) main\n3 7\ntotals: 1234\n") == 1234


def test_a_file_without_a_total_is_no_count() -> None:
    with pytest.raises(NoCount):
        callgrind_total(b"events: Ir\nfn=(1) main\n3 7\n")  # a run killed before its dump


def test_per_request_is_the_difference_over_the_extra_requests() -> None:
    assert per_request(2_000_000, 2_600_000, 1000) == 600.0


@pytest.mark.parametrize(("fewer", "more", "requests"), [(10, 10, 5), (10, 9, 5), (1, 10, 0)])
def test_a_run_that_did_not_count_more_is_refused(fewer: int, more: int, requests: int) -> None:
    with pytest.raises(ValueError):
        per_request(fewer, more, requests)


def test_an_unknown_wire_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        instructions.parse_args(["--wires", "chat,gemini"])
    assert info.value.code == 2
    assert "chat, responses, messages" in capsys.readouterr().err


@pytest.mark.skipif(shutil.which("valgrind") is None, reason="valgrind is not installed")
def test_two_wires_counted_under_callgrind(tmp_path: Path) -> None:
    out = tmp_path / "counts.json"
    argv = ["--wires", "chat,responses", "--requests", "150", "--base", "20", "--json", str(out)]
    assert instructions.main(argv) == 0
    document = json.loads(out.read_text())
    chat, responses = document["wires"]
    for wire in (chat, responses):
        assert wire["instructions_more"] > wire["instructions_fewer"]
        # A whole answer through one worker is some hundreds of thousands of instructions.
        assert 200_000 < wire["per_request"] < 5_000_000
    assert chat["x_chat"] == 1.0
    # Responses renders a bigger answer from events (an echo, minted ids), Chat relays its own.
    assert responses["x_chat"] > 1.0
    assert responses["x_chat"] == pytest.approx(
        responses["per_request"] / chat["per_request"], 1e-3
    )
