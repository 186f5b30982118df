"""A worker's process as the supervisor sees it (gateway.worker_process), and the start of
`gateway serve --workers N`, whose first worker is started before asyncio is even imported
(gateway.launch): real processes, both ways of waiting for one (a pidfd, and a thread where
there is none)."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from gateway.worker_process import WorkerProcess

ROOT = Path(__file__).resolve().parent.parent


def sleeper() -> WorkerProcess:
    code = "import time; time.sleep(60)"
    return WorkerProcess(subprocess.Popen([sys.executable, "-c", code]))


@pytest.fixture(params=["pidfd", "thread"])
def waiting(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    if request.param == "thread":  # as on a system without pidfds
        monkeypatch.delattr(os, "pidfd_open", raising=False)
    elif not hasattr(os, "pidfd_open"):
        pytest.skip("no pidfd on this system")
    return str(request.param)


async def test_every_waiter_gets_the_signal_that_ended_the_process(waiting: str) -> None:
    process = sleeper()
    assert process.returncode is None
    waiters = [asyncio.create_task(process.wait()) for _ in range(3)]
    await asyncio.sleep(0.05)
    assert not any(waiter.done() for waiter in waiters)  # it still runs
    process.send_signal(signal.SIGTERM)
    statuses = await asyncio.wait_for(asyncio.gather(*waiters), 10)
    assert statuses == [-signal.SIGTERM] * 3
    assert process.returncode == -signal.SIGTERM
    assert await process.wait() == -signal.SIGTERM  # known now: at once


async def test_an_exit_status_is_the_processs_own(waiting: str) -> None:
    popen = subprocess.Popen([sys.executable, "-c", "raise SystemExit(3)"])
    assert await asyncio.wait_for(WorkerProcess(popen).wait(), 10) == 3


async def test_a_signal_after_the_exit_is_dropped(waiting: str) -> None:
    process = sleeper()
    process.kill()
    assert await asyncio.wait_for(process.wait(), 10) == -signal.SIGKILL
    process.send_signal(signal.SIGTERM)  # reaped already: no error, no other process hit
    process.kill()


def test_discard_kills_and_reaps_workers_waiting_for_their_spec() -> None:
    from gateway.launch import discard, start_worker

    started = [start_worker(os.environ), start_worker(os.environ)]
    discard(started)
    assert [worker.process.returncode for worker in started] == [-signal.SIGKILL] * 2
    assert all(worker.channel.fileno() == -1 for worker in started)  # closed


def test_gateway_serve_starts_its_first_worker_before_it_imports_asyncio() -> None:
    """The first worker's imports are the longest part of a start: they begin before the
    supervisor's own (asyncio, the logging, the settings)."""
    script = (
        "import sys\n"
        "from gateway import cli, launch\n"
        "def begin(count, env):\n"
        "    print('asyncio' in sys.modules, 'gateway.settings' in sys.modules, count)\n"
        "    raise SystemExit(0)\n"
        "launch.Launch.begin = begin\n"
        "cli.main(['serve', '--workers', '2'])\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, cwd=ROOT, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["False", "False", "2"]
