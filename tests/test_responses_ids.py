"""Responses answer ids (gateway.encode.responses_ids) and the store's owner hash."""

from __future__ import annotations

import hashlib
import hmac
import os
import re

import pytest

from gateway.encode.responses_ids import POOL, new_response_id
from gateway.responses_store import owner_of

ID = re.compile(r"resp_[0-9a-f]{32}")


def test_ids_have_the_format_and_never_repeat_across_pool_reads() -> None:
    ids = [new_response_id() for _ in range(POOL * 3 + 7)]
    assert all(ID.fullmatch(i) for i in ids)
    assert len(set(ids)) == len(ids)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_forked_child_never_mints_its_parents_next_ids() -> None:
    new_response_id()  # the pool holds ids the parent has not used yet
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: its next ids, to the parent
        os.write(write, " ".join(new_response_id() for _ in range(4)).encode())
        os._exit(0)
    os.close(write)
    os.waitpid(pid, 0)
    child = set(os.read(read, 4096).decode().split())
    os.close(read)
    parent = {new_response_id() for _ in range(4)}
    assert len(child) == 4
    assert not child & parent


def test_owner_is_the_keyed_hash_of_the_credential() -> None:
    secret = os.urandom(32)
    for headers, credential in (
        ({"authorization": "Bearer sk-a"}, "Bearer sk-a"),
        ({"x-api-key": "sk-b"}, "sk-b"),
        ({"api-key": "sk-c"}, "sk-c"),
        ({}, ""),
    ):
        expected = hmac.new(secret, credential.encode(), hashlib.sha256).hexdigest()
        assert owner_of(secret, headers) == expected
        assert owner_of(secret, headers) == expected  # the kept key state is not consumed
    assert owner_of(os.urandom(32), {"authorization": "Bearer sk-a"}) != owner_of(
        secret, {"authorization": "Bearer sk-a"}
    )
