"""`previous_response_id` and `store`: the gateway keeps Responses answers (in memory by default,
SQLite as an option, never the audit database) and puts the stored conversation in front of a
chained request, so a stateless upstream receives the whole history (RESPONSES.md §10)."""

from __future__ import annotations

import asyncio
import json
import sqlite3
import time
from pathlib import Path
from typing import Any

import openai
import pytest

from gateway.responses_store import StoredResponse, owner_of
from gateway.responses_store.memory import MemoryStore
from gateway.responses_store.opening import open_response_store
from gateway.responses_store.sqlite import TRIM_EVERY, SQLiteResponseStore
from tests.conftest import openai_client
from tests.responses_support import WEATHER_TOOL, post
from tests.scenarios import Answer, Tool, script_for

WIRES = ("openai", "anthropic")
PREFIX = {"openai": "oa", "anthropic": "an"}


def turn(upstream, unique_model, wire: str, answer: Answer, stream: bool = False) -> str:
    model = unique_model(PREFIX[wire])
    upstream.script(model, script_for(wire, answer, model, stream))
    return model


def history(upstream, model: str, wire: str) -> list[tuple[str, str]]:
    """(role, text) of what the upstream received, tool calls and results by id."""
    body = upstream.last(model).json
    out: list[tuple[str, str]] = []
    if wire == "openai":
        for m in body["messages"]:
            if m.get("tool_calls"):
                out += [("call", c["id"]) for c in m["tool_calls"]]
            if m["role"] == "tool":
                out.append(("result", m["tool_call_id"]))
            elif isinstance(m.get("content"), str) and m["content"]:
                out.append((m["role"], m["content"]))
        return out
    for m in body["messages"]:
        for block in m["content"]:
            if block["type"] == "text":
                out.append((m["role"], block["text"]))
            elif block["type"] == "tool_use":
                out.append(("call", block["id"]))
            elif block["type"] == "tool_result":
                out.append(("result", block["tool_use_id"]))
    return out


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
@pytest.mark.parametrize("wire", WIRES)
def test_a_chain_over_three_turns_sends_the_whole_history(
    stack, upstream, unique_model, wire, stream
):
    client = openai_client(stack)
    call_id = "call_w" if wire == "openai" else "toolu_w"

    parents: list[Any] = []  # the previous_response_id of every Response object the client saw

    def create(answer: Answer, **kwargs: Any) -> Any:
        model = turn(upstream, unique_model, wire, answer, stream)
        if not stream:
            created = client.responses.create(model=model, **kwargs)
            parents.append({created.previous_response_id})
            return model, created
        with client.responses.stream(model=model, **kwargs) as events:
            seen = {e.response.previous_response_id for e in events if hasattr(e, "response")}
            parents.append(seen)
            return model, events.get_final_response()

    _, first = create(Answer(text="Hello Ada."), input="My name is Ada.", instructions="Be terse.")
    tools = [WEATHER_TOOL]
    calling = Answer(tools=[Tool(call_id, "get_weather", '{"city":"Bern"}')])
    _, second = create(
        calling, input="Weather in Bern?", previous_response_id=first.id, tools=tools
    )
    output = [{"type": "function_call_output", "call_id": call_id, "output": "Rain"}]
    model, third = create(Answer(text="Rain, Ada."), input=output, previous_response_id=second.id)

    assert third.output_text == "Rain, Ada."
    # Echoed as OpenAI does, on every Response object of a stream too (created, completed, ...)
    assert parents == [{None}, {first.id}, {second.id}]
    assert third.previous_response_id == second.id
    assert history(upstream, model, wire) == [
        ("user", "My name is Ada."),
        ("assistant", "Hello Ada."),
        ("user", "Weather in Bern?"),
        ("call", call_id),
        ("result", call_id),
    ]
    sent = upstream.last(model).json
    assert "previous_response_id" not in sent
    assert "Be terse." not in json.dumps(sent)  # instructions belong to their own request only


def test_store_false_is_never_kept_and_chaining_to_it_is_not_found(stack, upstream, unique_model):
    client = openai_client(stack)
    model = turn(upstream, unique_model, "openai", Answer(text="secret-reply-3c1"))
    first = client.responses.create(model=model, input="hi", store=False)

    follow = turn(upstream, unique_model, "openai", Answer(text="unused"))
    with pytest.raises(openai.BadRequestError) as caught:
        client.responses.create(model=follow, input="again", previous_response_id=first.id)

    error = caught.value.body
    assert error["code"] == "previous_response_not_found"
    assert error["param"] == "previous_response_id"
    assert upstream.received[follow] == []


def test_another_credential_cannot_read_or_chain(stack, upstream, unique_model):
    mine = openai_client(stack)
    theirs = openai.OpenAI(
        base_url=stack.urls["withhold"] + "/v1", api_key="sk-other", max_retries=0
    )
    model = turn(upstream, unique_model, "anthropic", Answer(text="for my eyes"))
    first = mine.responses.create(model=model, input="hi")

    assert mine.responses.retrieve(first.id).output_text == "for my eyes"
    with pytest.raises(openai.NotFoundError):
        theirs.responses.retrieve(first.id)
    with pytest.raises(openai.NotFoundError):
        theirs.responses.delete(first.id)
    follow = turn(upstream, unique_model, "anthropic", Answer(text="unused"))
    with pytest.raises(openai.BadRequestError):
        theirs.responses.create(model=follow, input="x", previous_response_id=first.id)


def test_get_then_delete(stack, upstream, unique_model):
    client = openai_client(stack)
    model = turn(upstream, unique_model, "openai", Answer(text="kept"), stream=True)
    with client.responses.stream(model=model, input="hi") as events:
        for _ in events:
            pass
        created = events.get_final_response()

    fetched = client.responses.retrieve(created.id)
    assert fetched.id == created.id and fetched.output_text == "kept"
    client.responses.delete(created.id)
    with pytest.raises(openai.NotFoundError):
        client.responses.retrieve(created.id)
    status, _, text = post(
        stack, {"model": model, "input": "x", "previous_response_id": created.id}
    )
    assert status == 400 and "previous_response_not_found" in text


@pytest.mark.parametrize("wire", WIRES)
def test_withheld_calls_are_not_kept_for_the_next_turn(stack, upstream, unique_model, wire):
    client = openai_client(stack)
    native = "length" if wire == "openai" else "max_tokens"
    cut = Answer(text="Let me", tools=[Tool("call_cut", "get_weather", '{"ci')], native_stop=native)
    model = turn(upstream, unique_model, wire, cut)
    first = client.responses.create(model=model, input="Weather?", tools=[WEATHER_TOOL])
    assert first.status == "incomplete"

    follow = turn(upstream, unique_model, wire, Answer(text="ok"))
    client.responses.create(model=follow, input="Shorter, please", previous_response_id=first.id)

    assert history(upstream, follow, wire) == [
        ("user", "Weather?"),
        ("assistant", "Let me"),
        ("user", "Shorter, please"),
    ]


def test_a_failed_answer_is_not_kept(stack, upstream, unique_model):
    broken = Answer(text="Partial", terminator=False)
    model = turn(upstream, unique_model, "anthropic", broken, stream=True)
    status, _, text = post(stack, {"model": model, "input": "hi", "stream": True})
    assert status == 200 and "response.failed" in text
    response_id = json.loads(text.split("data: ", 1)[1].split("\n", 1)[0])["response"]["id"]

    follow = turn(upstream, unique_model, "anthropic", Answer(text="unused"))
    status, _, text = post(
        stack, {"model": follow, "input": "x", "previous_response_id": response_id}
    )
    assert status == 400 and "previous_response_not_found" in text


def test_the_audit_record_keeps_the_ids_and_never_the_content(stack, upstream, unique_model):
    client = openai_client(stack)
    model = turn(upstream, unique_model, "openai", Answer(text="answer-text-77a"))
    first = client.responses.create(model=model, input="prompt-text-77a")
    follow = turn(upstream, unique_model, "openai", Answer(text="ok"))
    second = client.responses.create(model=follow, input="more", previous_response_id=first.id)

    deadline, row = time.monotonic() + 5, None
    while row is None and time.monotonic() < deadline:
        with sqlite3.connect(stack.audit_db()) as db:
            row = db.execute(
                "SELECT response_id, previous_response_id FROM audit_records WHERE model = ?",
                (follow,),
            ).fetchone()
        time.sleep(0.05)
    assert row == (second.id, first.id)
    raw = Path(stack.audit_db()).read_bytes()
    assert b"prompt-text-77a" not in raw and b"answer-text-77a" not in raw


# --- the stores themselves ----------------------------------------------------------------------


def entry(response_id: str, owner: str, *, parent: str | None = None, ttl: float = 60) -> Any:
    now = time.time()
    items = [{"role": "user", "content": f"in {response_id}"}]
    out = [{"type": "message", "role": "assistant", "content": f"out {response_id}"}]
    return StoredResponse(
        response_id, parent, owner, now, now + ttl, "m", items, out, {"id": response_id}
    )


async def test_memory_store_expires_and_stays_within_its_bounds():
    store = MemoryStore(ttl=60, max_entries=2, max_bytes=10**6)
    await store.put(entry("r1", "me"))
    await store.put(entry("r2", "me", ttl=-1))  # already expired
    assert await store.get("r2", "me") is None
    await store.put(entry("r3", "me"))
    await store.put(entry("r4", "me"))
    assert await store.get("r1", "me") is None  # the least recently used went first
    assert (await store.get("r4", "me")) is not None and await store.get("r4", "you") is None

    small = MemoryStore(ttl=60, max_entries=100, max_bytes=entry("s9", "me").size * 2)
    for n in range(5):
        await small.put(entry(f"s{n}", "me"))
    kept = [n for n in range(5) if await small.get(f"s{n}", "me") is not None]
    assert kept == [3, 4]


async def test_sqlite_store_survives_a_restart_and_keeps_owners(tmp_path):
    path = tmp_path / "responses.db"
    store = SQLiteResponseStore(str(path), ttl=60)
    await store.open()
    owner = owner_of(store.secret, {"authorization": "Bearer sk-a"})
    await store.put(entry("r1", owner))
    await store.put(entry("r2", owner, parent="r1"))
    await store.close()

    reopened = SQLiteResponseStore(str(path), ttl=60)
    await reopened.open()
    assert owner_of(reopened.secret, {"authorization": "Bearer sk-a"}) == owner
    got = await reopened.get("r2", owner)
    assert got is not None and got.parent_id == "r1" and got.items_out[0]["content"] == "out r2"
    assert await reopened.get("r2", owner_of(reopened.secret, {})) is None
    assert await reopened.delete("r1", owner) and await reopened.get("r1", owner) is None
    await reopened.close()
    assert b"sk-a" not in path.read_bytes()  # the credential itself is never stored


async def test_the_workers_shared_store_keeps_the_memory_stores_bounds(tmp_path):
    """Several workers share a SQLite file in place of `memory`; it keeps the newest answers
    within max_entries and max_bytes (trimmed every TRIM_EVERY puts), as memory would."""
    url = "shared-memory:///" + str(tmp_path / "responses.db")
    size = entry("b000", "me").size
    by_count = open_response_store(url, 60, max_entries=50, max_bytes=10**9)
    by_bytes = open_response_store(url.replace("responses", "bytes"), 60, 10**6, size * 10)
    puts = 2 * TRIM_EVERY + 1  # the first put trims (and purges), then every TRIM_EVERY
    for store in (by_count, by_bytes):
        await store.open()
        for n in range(puts):
            await store.put(entry(f"b{n:03d}", "me"))
        kept = [n for n in range(puts) if await store.get(f"b{n:03d}", "me")]
        newest = 50 if store is by_count else 10
        assert kept == list(range(puts - newest, puts))
        await store.close()
    # An operator's own SQLite store keeps only its ttl, as before.
    assert SQLiteResponseStore(str(tmp_path / "own.db"), ttl=60).bounds is None


def test_a_sqlite_store_through_the_gateway(tmp_path, upstream, unique_model):
    from aiohttp import web

    from gateway.app import build_app
    from gateway.edge import make_runner
    from gateway.settings import parse_settings
    from tests.conftest import free_port, stack_settings

    async def scenario() -> None:
        runner = web.AppRunner(upstream.app())
        await runner.setup()
        await web.TCPSite(runner, "127.0.0.1", 0).start()
        up = f"http://127.0.0.1:{runner.addresses[0][1]}"
        config = stack_settings(up, "withhold", f"http://127.0.0.1:{free_port()}/v1")
        config["responses"] = {"store": f"sqlite:///{tmp_path / 'chains.db'}", "ttl": "1h"}
        gw = make_runner(build_app(parse_settings(config), env={}), access_log=None)
        await gw.setup()
        await web.TCPSite(gw, "127.0.0.1", 0).start()
        base = f"http://127.0.0.1:{gw.addresses[0][1]}/v1"
        client = openai.AsyncOpenAI(base_url=base, api_key="sk-client", max_retries=0)
        model = turn(upstream, unique_model, "openai", Answer(text="stored-in-file"))
        first = await client.responses.create(model=model, input="hi")
        secret = await client.responses.create(model=model, input="marker-9f1", store=False)
        fetched = await client.responses.retrieve(first.id)
        assert fetched.output_text == "stored-in-file"
        with pytest.raises(openai.NotFoundError):
            await client.responses.retrieve(secret.id)
        await client.close()
        await gw.cleanup()
        await runner.cleanup()

    asyncio.run(scenario())
    files = b"".join(p.read_bytes() for p in tmp_path.iterdir() if p.is_file())
    assert b"stored-in-file" in files and b"marker-9f1" not in files


def test_unsupported_tools_reject_answers_400_naming_them(tmp_path, upstream, unique_model):
    from aiohttp import web

    from gateway.app import build_app
    from gateway.edge import make_runner
    from gateway.settings import parse_settings
    from tests.conftest import free_port, stack_settings

    async def scenario() -> tuple[int, dict[str, Any]]:
        runner = web.AppRunner(upstream.app())
        await runner.setup()
        await web.TCPSite(runner, "127.0.0.1", 0).start()
        up = f"http://127.0.0.1:{runner.addresses[0][1]}"
        config = stack_settings(up, "withhold", f"http://127.0.0.1:{free_port()}/v1")
        config["responses"] = {"unsupported_tools": "reject"}
        gw = make_runner(build_app(parse_settings(config), env={}), access_log=None)
        await gw.setup()
        await web.TCPSite(gw, "127.0.0.1", 0).start()
        base = f"http://127.0.0.1:{gw.addresses[0][1]}/v1"
        client = openai.AsyncOpenAI(base_url=base, api_key="sk-client", max_retries=0)
        model = turn(upstream, unique_model, "openai", Answer(text="unused"))
        try:
            await client.responses.create(
                model=model, input="hi", tools=[{"type": "web_search"}, WEATHER_TOOL]
            )
        except openai.BadRequestError as exc:
            return exc.status_code, exc.body
        finally:
            await client.close()
            await gw.cleanup()
            await runner.cleanup()
        raise AssertionError("accepted")

    status, error = asyncio.run(scenario())
    assert status == 400 and error["param"] == "tools" and "web_search" in error["message"]


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
def test_a_chain_keeps_the_thinking_signature_the_client_never_asked_for(
    stack, upstream, unique_model, stream
):
    client = openai_client(stack)
    answer = Answer(text="42.", thinking="Let me think.", signature="sig-abc-123")
    model = turn(upstream, unique_model, "anthropic", answer, stream)
    if stream:
        with client.responses.stream(model=model, input="Question?") as events:
            for _ in events:
                pass
            first = events.get_final_response()
    else:
        first = client.responses.create(model=model, input="Question?")
    reasoning = [item for item in first.output if item.type == "reasoning"]
    assert reasoning and reasoning[0].encrypted_content is None  # not asked: not shown

    follow = turn(upstream, unique_model, "anthropic", Answer(text="ok"))
    client.responses.create(model=follow, input="And then?", previous_response_id=first.id)

    assistant = upstream.last(follow).json["messages"][1]
    assert assistant["role"] == "assistant"
    assert assistant["content"][0] == {
        "type": "thinking",
        "thinking": "Let me think.",
        "signature": "sig-abc-123",
    }
