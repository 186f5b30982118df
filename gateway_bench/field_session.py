"""One `gateway bench --suite field` session: its processes, its cold starts, its runs, and the
JSON document of all of it.

Order: the fake upstream starts; cold starts are measured first, while nothing else loads the
machine (the upstream's own, then each gateway's, `cold_starts` times each, every start on a
fresh port and stopped before the next); then the gateways are started for the load runs (audit
trail on, and off: `[audit] store = "off"`), each with the same `--workers`, and another gateway
given with `--compare` joins them. A gateway given with `--gateway-url` is measured as it runs:
no cold start, no audit-off twin.

    document = execute_field(args, plan, progress, warn_console)
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import asdict
from pathlib import Path
from typing import Any, Final

from rich.console import Console

from gateway.listen import raise_open_files_limit
from gateway_bench import field_goals, gateway_config
from gateway_bench.children import Children, free_port
from gateway_bench.coldstart import FirstRequest, cold_start, start, stop, wait_answered
from gateway_bench.field_plan import PUBLISHED, PUBLISHED_SOURCE, REFERENCE_WORKLOAD, FieldPlan
from gateway_bench.field_plan import WORKLOADS as FIELD_WORKLOADS
from gateway_bench.field_run import FieldBench
from gateway_bench.field_summary import summarize
from gateway_bench.gateway_log import GatewayLog
from gateway_bench.progress import Reporter
from gateway_bench.scenario import Scenario
from gateway_bench.session import about, compare_target, pids_of
from gateway_bench.targets import Target
from gateway_bench.wires import WIRES

GATEWAY: Final = "gateway"  # the audit trail on: the one judged
NO_AUDIT: Final = "gateway-no-audit"
FIELD_FORMATS: Final = tuple(dict.fromkeys(w.format.name for w in FIELD_WORKLOADS.values()))


def first_request(target: Target, wire_name: str, prefix: str) -> FirstRequest:
    """A non-streamed request of `wire_name` to `target` (a Chat request, through a gateway),
    with the target's model name and key."""
    wire = WIRES[wire_name]
    model = target.model(Scenario().model(prefix))
    headers = {"content-type": "application/json", **wire.headers, **target.headers}
    path = target.root + wire.request_path(model, False)
    return FirstRequest(target.host, target.port, path, wire.body(model, False, 0), headers)


def local(port: int) -> Target:
    return Target("local", "gateway", "127.0.0.1", port)


def gateway_argv(config: Path, port: int, *, workers: int | None) -> list[str]:
    argv = [sys.executable, "-m", "gateway", "serve", "--config", str(config)]
    argv += ["--port", str(port)]
    return argv + (["--workers", str(workers)] if workers is not None else [])


# What a start is not to pay for: a first start after an install or an edit compiles the
# bytecode (pip compiles it at install; an editable checkout on the first import), and an
# environment that forbids writing it (PYTHONDONTWRITEBYTECODE) would pay it on every start.
NOT_COLD: Final = ("PYTHONDONTWRITEBYTECODE",)


def start_env(env: Mapping[str, str]) -> dict[str, str]:
    return {key: value for key, value in env.items() if key not in NOT_COLD}


class Starts:
    """Cold starts, `cold_starts` times each after one start that is not counted (it compiles
    what is not compiled yet and reads the files into the page cache, as an installed gateway
    has): the upstream's own, each gateway the bench starts, and the one `--compare-start`
    starts."""

    def __init__(self, plan: FieldPlan, tmp: Path, progress: Reporter) -> None:
        self.plan, self.tmp, self.progress = plan, tmp, progress
        self.chat = FIELD_WORKLOADS[REFERENCE_WORKLOAD].format
        self.seconds: dict[str, list[float]] = {}

    def measure(
        self,
        name: str,
        argv_at: Callable[[int], list[str]],
        env: Mapping[str, str],
        target_at: Callable[[int], Target],
        wire: str,
        timeout: float = 60.0,
    ) -> None:
        """`argv_at(port)`, `target_at(port)`: each start gets a fresh port, unless the target
        is at a fixed one (another gateway's command, whose port is in it)."""
        runs = self.seconds.setdefault(name, [])
        for index in range(self.plan.cold_starts + 1):
            self.progress.step(f"cold start: {name}" + ("" if index else " (not counted)"))
            port = free_port()
            request = first_request(target_at(port), wire, self.chat.prefix)
            log = self.tmp / f"{name}-starts.log"
            seconds = cold_start(argv_at(port), start_env(env), request, log, timeout)
            if index:
                runs.append(seconds)
                self.progress.advance()


def upstream_argv(port: int) -> list[str]:
    return [sys.executable, "-m", "gateway_bench.upstream", "--port", str(port)]


COMPARE_START_TIMEOUT_S: Final = 300.0  # LiteLLM proxy takes tens of seconds


@contextlib.contextmanager
def started_compare(args: argparse.Namespace, tmp: Path, target: Target) -> Iterator[None]:
    """The `--compare-start` command, running for the load runs; stopped (its group) at exit."""
    log = tmp / "compare.log"
    process: subprocess.Popen[bytes] = start(["sh", "-c", args.compare_start], os.environ, log)
    try:
        chat = FIELD_WORKLOADS[REFERENCE_WORKLOAD].format
        request = first_request(target, chat.client_wire, chat.prefix)
        wait_answered(process, request, time.perf_counter() + COMPARE_START_TIMEOUT_S, log)
        yield
    finally:
        stop(process)


def write_configs(plan: FieldPlan, upstream_port: int, tmp: Path) -> dict[str, Path]:
    """The configuration of each gateway the bench starts: the audit trail on, and off."""
    configs: dict[str, Path] = {}
    for mode in plan.audit:
        name = GATEWAY if mode == "on" else NO_AUDIT
        config = tmp / f"{name}.toml"
        config.write_text(
            gateway_config.render(
                upstream_port, tmp / "audit.db", formats=FIELD_FORMATS, audit_off=mode == "off"
            )
        )
        configs[name] = config
    return configs


def measure_starts(
    args: argparse.Namespace,
    starts: Starts,
    configs: Mapping[str, Path],
    env: Mapping[str, str],
    compare: Target | None,
) -> None:
    chat = starts.chat
    starts.measure("direct", upstream_argv, os.environ, local, chat.upstream_wire)
    for name, config in configs.items():
        argv_at = functools.partial(gateway_argv, config, workers=args.workers)
        starts.measure(name, argv_at, env, local, chat.client_wire)
    if compare is not None and args.compare_start:
        starts.measure(
            compare.name,
            lambda port: ["sh", "-c", args.compare_start],
            os.environ,
            lambda port: compare,
            chat.client_wire,
            COMPARE_START_TIMEOUT_S,
        )


def execute_field(
    args: argparse.Namespace, plan: FieldPlan, progress: Reporter, warn: Console
) -> dict[str, Any]:
    started = time.time()
    raise_open_files_limit()
    with (
        tempfile.TemporaryDirectory(prefix="gateway-bench-field-") as name,
        Children() as kids,
        contextlib.ExitStack() as running,
    ):
        tmp = Path(name)
        upstream = kids.upstream(args.upstream_port)
        direct = Target("direct", "direct", "127.0.0.1", upstream.port, "", (upstream.pid,))
        env = gateway_config.gateway_env(os.environ)
        configs = {} if args.gateway_url else write_configs(plan, upstream.port, tmp)
        compare = compare_target(args, warn, find_pid=False) if args.compare else None
        measured_starts = 1 + len(configs) + (1 if args.compare_start else 0)
        field_size = FieldBench.size_of(plan, 1 + len(configs) + (1 if args.compare else 0))
        progress.start(plan.cold_starts * measured_starts + field_size)
        try:
            starts = Starts(plan, tmp, progress)
            measure_starts(args, starts, configs, env, compare)
            if compare is not None and args.compare_start:
                running.enter_context(started_compare(args, tmp, compare))
            targets: list[Target] = []
            logs: dict[str, GatewayLog] = {}
            for target_name, config in configs.items():
                log = tmp / f"{target_name}.log"
                child = kids.gateway(config, log, env, free_port(), args.workers)
                targets.append(Target.from_url("gateway", target_name, child.url, (child.pid,)))
                logs[target_name] = GatewayLog(log)
            if args.gateway_url:
                targets.append(given_gateway(args, warn))
            if compare is not None:
                targets.append(compare_target(args, warn))  # its pid, now that it runs
            field = FieldBench(plan, direct, targets, kids.load_generator(), progress, logs)
            records = field.measure()
        finally:
            progress.stop()
    names = [direct.name, *(t.name for t in targets)]
    summary = summarize(plan, records, starts.seconds, names)
    judged = targets[0].name
    return {
        "suite": "field",
        "plan": asdict(plan),
        "workers": args.workers,
        "targets": [t.public() for t in [direct, *targets]],
        **summary,
        "judged": judged,
        "goals": field_goals.public(field_goals.check(summary, judged)),
        "published": {"source": PUBLISHED_SOURCE, "rows": [asdict(p) for p in PUBLISHED]},
        "runs": records,
        "bench": about(args, started),
    }


def given_gateway(args: argparse.Namespace, warn: Console) -> Target:
    pids = pids_of(args.gateway_pid, args.gateway_url, "the gateway", warn)
    return Target.from_url("gateway", GATEWAY, args.gateway_url, pids)
