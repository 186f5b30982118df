"""With no [recovery] key (the default), what a client receives is byte for byte what it was
before recovery existed: a broken stream, a stream cut at max tokens, a complete one and a
break inside a tool call, through every client format and upstream wire.

The golden files (tests/golden/recovery_off/) were written by the gateway as it was before the
recovery landed; ids and times are normalized (they differ per exchange). Regenerate them only
for an intended change of the default path: `UPDATE_GOLDEN=1 pytest tests/test_recovery_golden.py`.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from tests.recovery_support import AT, CLIENTS, TEXT, WIRES, RecoveryStack, raw_stream
from tests.recovery_upstream import Stream

GOLDEN = Path(__file__).resolve().parent / "golden" / "recovery_off"
CASES = {
    "reset": lambda: [Stream(TEXT, cut_at=AT)],
    "length": lambda: [Stream(TEXT[:AT], end="length")],
    "complete": lambda: [Stream(TEXT)],
    "tool-break": lambda: [Stream(TEXT, tool=True)],
}
TIMES = re.compile(rb'"(created|created_at|completed_at)":\d+')
MINTED = re.compile(rb"_[0-9a-f]{32}")  # a Responses id the gateway mints, and its items' ids


@pytest.fixture(scope="module")
def rstack(tmp_path_factory: pytest.TempPathFactory):
    s = RecoveryStack(tmp_path_factory.mktemp("recovery-golden"), recovery=False)
    s.start()
    yield s
    s.stop()


def normalized(body: bytes, request_id: str, model: str) -> bytes:
    body = body.replace(request_id.encode(), b"REQUEST_ID").replace(model.encode(), b"MODEL")
    return MINTED.sub(b"_ID", TIMES.sub(rb'"\1":0', body))


@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("wire", list(WIRES))
@pytest.mark.parametrize("client", list(CLIENTS))
def test_without_recovery_the_bytes_are_as_before(rstack, client, wire, case):
    model = rstack.scripted("mid", wire, *CASES[case]())
    headers, body = raw_stream(rstack, client, model)
    text = normalized(body, headers["x-request-id"], model)
    path = GOLDEN / f"{client}-{wire}-{case}.sse"
    if os.environ.get("UPDATE_GOLDEN"):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(text)
    assert text == path.read_bytes()
    assert len(rstack.requests(model)) == 1
