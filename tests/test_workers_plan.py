"""What several workers change, without starting them: how many run and why, what the startup
report says, the settings a worker receives, and the private directory the last one removes
(real processes holding its lock). tests/test_workers.py runs them."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gateway import workers
from gateway.config_source import ConfigSource
from gateway.private_dir import LOCK, PREFIX, STALE_AFTER, PrivateDir, remove_stale
from gateway.restart_policy import (
    GIVE_UP_AFTER,
    RESTART_DELAY_MAX,
    RESTART_DELAY_MIN,
    gives_up,
    restart_delay,
)
from gateway.settings import ConfigError, load_settings, parse_settings
from gateway.startup import startup_report
from gateway.workers import (
    WorkerSpec,
    encode_spec,
    for_workers,
    memory_limit,
    plan_workers,
    read_spec,
)

BUILT_IN = ConfigSource(None, "built-in default")
STORE = "sqlite:///gateway-audit.db"
HASH = "ab" * 32
MOCK = {"providers": {"mock": {"kind": "mock"}}, "routes": [{"match": "m*", "provider": "mock"}]}
CONFIGS = sorted(Path(__file__).parent.parent.joinpath("config").glob("*.toml"))


@pytest.fixture
def four_cores(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(workers, "default_count", lambda: 4)


def with_key(**limits: object) -> dict[str, object]:
    return {**MOCK, "keys": [{"name": "ci", "sha256": HASH, **limits}]}


def test_default_is_the_cores_this_process_may_use():
    assert workers.default_count() == len(os.sched_getaffinity(0))


def test_the_flag_wins_over_the_file_which_wins_over_the_cores(four_cores, tmp_path):
    source = ConfigSource(tmp_path / "gw.toml", "--config")
    settings = parse_settings({**MOCK, "server": {"workers": 3}})
    assert plan_workers(2, settings, source).count == 2
    assert plan_workers(2, settings, source).origin == "--workers"
    plan = plan_workers(None, settings, source)
    assert (plan.count, plan.origin) == (3, f"server.workers in {tmp_path / 'gw.toml'}")
    plan = plan_workers(None, parse_settings(MOCK), BUILT_IN)
    assert (plan.count, plan.origin, plan.fallback) == (4, "one per core", None)


@pytest.mark.parametrize(
    ("config", "limit"),
    [
        (with_key(requests_per_window=5), "keys[0].requests_per_window"),
        (with_key(tokens_per_window=500), "keys[0].tokens_per_window"),
        ({**with_key(), "limits": {"max_concurrent_per_key": 2}}, "limits.max_concurrent_per_key"),
    ],
)
def test_per_key_limits_in_memory_are_named(config, limit):
    settings = parse_settings(config)
    assert memory_limit(settings) == limit
    shared = parse_settings({**config, "state": {"redis": "redis://127.0.0.1:6379/0"}})
    assert memory_limit(shared) is None


def test_keys_without_limits_and_a_per_process_cap_need_no_shared_state():
    assert memory_limit(parse_settings(with_key())) is None
    per_process = {**with_key(), "limits": {"max_concurrent": 8}}
    assert memory_limit(parse_settings(per_process)) is None


def test_limits_in_memory_make_the_default_one_worker_with_a_warning(four_cores):
    plan = plan_workers(None, parse_settings(with_key(requests_per_window=5)), BUILT_IN)
    assert plan.count == 1
    assert plan.fallback is not None
    assert "keys[0].requests_per_window" in plan.fallback and "[state] redis" in plan.fallback
    lines = startup_report(parse_settings(MOCK), BUILT_IN, {}, STORE, workers=plan)
    assert f"warning: {plan.fallback}" in [line.render() for line in lines]
    assert not any(line.text.startswith("workers:") for line in lines)


def test_an_explicit_count_with_limits_in_memory_is_a_configuration_error(tmp_path):
    source = ConfigSource(tmp_path / "gw.toml", "--config")
    settings = parse_settings(with_key(requests_per_window=5))
    with pytest.raises(ConfigError) as flag:
        plan_workers(2, settings, source)
    assert flag.value.problems[0][0] == "--workers"
    in_file = parse_settings({**with_key(requests_per_window=5), "server": {"workers": 2}})
    with pytest.raises(ConfigError) as file:
        plan_workers(None, in_file, source)
    assert file.value.problems[0][0] == "server.workers"
    assert str(tmp_path / "gw.toml") in str(file.value)
    assert plan_workers(1, settings, source).count == 1  # one worker: nothing to split


def test_the_report_names_the_workers_and_the_shared_responses_store(four_cores):
    plan = plan_workers(None, parse_settings(MOCK), BUILT_IN)
    lines = startup_report(parse_settings(MOCK), BUILT_IN, {}, STORE, workers=plan)
    info = [line.text for line in lines if line.level == "info"]
    assert info[-1] == "workers: 4 (one per core)"
    responses = next(text for text in info if text.startswith("responses store: "))
    assert "the 4 workers share" in responses and "removed at exit" in responses
    # A store the operator chose is named as always: the workers share that one.
    chosen = parse_settings({**MOCK, "responses": {"store": "off"}})
    plan = plan_workers(None, chosen, BUILT_IN)
    off = [line.text for line in startup_report(chosen, BUILT_IN, {}, STORE, workers=plan)]
    assert "responses store: off (previous_response_id is never found)" in off


def test_one_worker_says_nothing_new():
    settings = parse_settings(MOCK)
    plan = plan_workers(1, settings, BUILT_IN)
    assert startup_report(settings, BUILT_IN, {}, STORE, workers=plan) == startup_report(
        settings, BUILT_IN, {}, STORE
    )


def test_workers_share_the_default_responses_store_in_the_private_directory(tmp_path):
    settings = parse_settings(MOCK)
    shared = for_workers(settings, str(tmp_path))
    assert shared.responses.store == f"shared-memory:///{tmp_path}/responses.db"
    assert shared.responses.ttl == settings.responses.ttl
    chosen = parse_settings({**MOCK, "responses": {"store": "off"}})
    assert for_workers(chosen, str(tmp_path)) is chosen


@pytest.mark.parametrize("path", CONFIGS, ids=[p.name for p in CONFIGS])
def test_the_spec_carries_the_settings_exactly(path):
    settings = load_settings(path, {})
    spec = WorkerSpec(2, settings, (7, 8), "/a/trail.db", "/tmp/x")
    ours, theirs = socket.socketpair()
    with ours, theirs:
        ours.sendall(encode_spec(spec))
        assert read_spec(theirs) == spec


# --- the private directory -----------------------------------------------------------------------

HOLD = """
import sys, time
from gateway.private_dir import LOCK, PREFIX, STALE_AFTER, PrivateDir, remove_stale
shared = PrivateDir(sys.argv[1])
shared.join()
print("held", flush=True)
sys.stdin.read()  # until the test closes stdin
print("removed" if shared.leave() else "kept", flush=True)
"""


def holder(path: str) -> subprocess.Popen[str]:
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLD, path], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None and proc.stdout.readline() == "held\n"
    return proc


def leave(proc: subprocess.Popen[str]) -> str:
    out, _ = proc.communicate(timeout=30)
    return out.strip()


def test_the_last_process_to_leave_removes_the_private_directory():
    shared = PrivateDir.create()
    path = Path(shared.path)
    assert path.is_dir() and (path / "metrics").is_dir()
    assert path.stat().st_mode & 0o777 == 0o700
    first, second = holder(shared.path), holder(shared.path)
    assert shared.leave() is False  # the supervisor leaves first (it was killed): kept
    assert leave(first) == "kept"
    assert path.is_dir()
    assert leave(second) == "removed"
    assert not path.exists()


def test_a_killed_holder_lets_go_of_the_private_directory():
    shared = PrivateDir.create()
    killed = holder(shared.path)
    killed.kill()
    killed.wait()
    assert shared.leave() is True
    assert not Path(shared.path).exists()


# --- the restart policy --------------------------------------------------------------------------


def test_a_worker_that_ran_a_while_is_restarted_at_once_one_that_keeps_dying_later_and_later():
    delays = [restart_delay(n) for n in range(10)]
    assert delays[:4] == [0.0, RESTART_DELAY_MIN, 2 * RESTART_DELAY_MIN, 4 * RESTART_DELAY_MIN]
    assert delays == sorted(delays)
    assert delays[-1] == RESTART_DELAY_MAX


def test_a_failed_start_ends_the_gateway_at_first_then_only_when_nothing_serves():
    assert gives_up(1, listening=False, serving=1)  # the first start: at once
    assert not gives_up(1, listening=True, serving=0)
    assert not gives_up(GIVE_UP_AFTER * 10, listening=True, serving=1)  # others serve: retry
    assert not gives_up(GIVE_UP_AFTER - 1, listening=True, serving=0)
    assert gives_up(GIVE_UP_AFTER, listening=True, serving=0)


def test_a_new_supervisor_removes_what_a_gateway_killed_whole_left_behind(tmp_path):
    """Every process of a gateway killed at once: nobody removed its directory. The next one
    removes it once untouched for STALE_AFTER seconds, never one still held or recent."""
    left, held, recent = (PrivateDir(str(tmp_path / f"{PREFIX}{name}")) for name in "abc")
    for shared in (left, held, recent):
        os.makedirs(shared.path)
        Path(shared.path, LOCK).touch()
    holding = holder(held.path)
    old = time.time() - 2 * STALE_AFTER
    for shared in (left, held):
        os.utime(shared.path, (old, old))
    (tmp_path / "unrelated").mkdir()
    os.utime(tmp_path / "unrelated", (old, old))

    assert remove_stale(str(tmp_path)) == [left.path]
    assert not Path(left.path).exists()
    assert Path(held.path).is_dir() and Path(recent.path).is_dir()
    assert (tmp_path / "unrelated").is_dir()
    assert leave(holding) == "removed"  # the last one out
