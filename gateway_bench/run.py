"""A bench run's measurements: the matrix of cells, alternating targets, and the idle probe.

Per cell and repetition, the targets (direct, the gateway, another gateway) run back to back,
in an order that rotates between repetitions, so that a noisy moment of the shared machine
falls on every target in turn rather than on one. Each run is one load-generator job; its
record keeps the raw result (latency summary and distribution, errors, the CPU and RSS of the
target's process tree and the upstream's) with the cell, repetition and target it belongs to.

The idle probe opens held streams through a gateway (`hbench-...-hold`: the upstream sends a
first event, then nothing) in steps (100, 500, 1000) and reads the gateway's RSS at each: what
one open, idle stream costs it in memory, and whether that stays flat as streams pile up.

    bench = Bench(plan, direct, [gateway, compare], load, progress, logs)
    records = bench.matrix()
    idle = bench.idle_probe()
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from gateway_bench.children import LoadGenerator
from gateway_bench.gateway_log import GatewayLog
from gateway_bench.plan import HOLD, Cell, Format, Plan
from gateway_bench.procstat import ProcessTree
from gateway_bench.progress import Reporter
from gateway_bench.scenario import Scenario
from gateway_bench.targets import Target
from gateway_bench.wires import WIRES

SETTLE_S: Final = 0.3  # before reading a held-stream RSS: allocations and the audit queue land


def rotated(targets: Sequence[Target], rep: int) -> list[Target]:
    shift = rep % len(targets)
    return [*targets[shift:], *targets[:shift]]


@dataclass(frozen=True, slots=True)
class Load:
    """What one run sends: a format's request, for a scenario model, at a concurrency."""

    format: Format
    model: str  # the scenario's model name (a target may rewrite it: Target.model)
    stream: bool
    concurrency: int
    history_bytes: int = 0


class Bench:
    def __init__(
        self,
        plan: Plan,
        direct: Target,
        targets: Sequence[Target],
        load: LoadGenerator,
        progress: Reporter,
        logs: Mapping[str, GatewayLog] | None = None,
        raw: bool = False,
    ) -> None:
        self.plan = plan
        self.raw = raw  # each result also holds its raw latencies (`gateway_bench.slices`)
        self.direct = direct
        self.targets = list(targets)
        self.load = load
        self.progress = progress
        self.logs = dict(logs or {})

    # --- one run -----------------------------------------------------------------------------

    def job(self, target: Target, load: Load, op: str = "run") -> dict[str, Any]:
        """The load generator's job for `load` sent to `target`: a direct run speaks the
        upstream wire, a gateway the client wire, with the target's model name and key."""
        if target.role == "direct":
            wire, model, headers = WIRES[load.format.upstream_wire], load.model, {}
        else:
            wire = WIRES[load.format.client_wire]
            model, headers = target.model(load.model), dict(target.headers)
        watch = {"server": list(target.pids)}
        if target is not self.direct:
            watch["upstream"] = list(self.direct.pids)
        return {
            "op": op,
            "host": target.host,
            "port": target.port,
            "path": target.root + wire.request_path(model, load.stream),
            "headers": headers,
            "wire": wire.name,
            "model": model,
            "stream": load.stream,
            "history_bytes": load.history_bytes,
            "concurrency": load.concurrency,
            "duration": self.plan.duration,
            "max_requests": self.plan.max_requests,
            "min_requests": self.plan.min_requests_per_connection * load.concurrency,
            "warmup": max(self.plan.warmup, load.concurrency),
            "timeout": self.plan.timeout,
            "watch": watch,
            "raw": self.raw,
        }

    def run(self, target: Target, load: Load, rep: int, **labels: Any) -> dict[str, Any]:
        job = self.job(target, load)
        result = self.load.job(job)
        log = self.logs.get(target.name)
        if log is not None:
            result["gateway_log"] = log.drain()
        server = result.get("servers", {}).get("server")
        ok = result["ok"]
        result["cpu_ms_per_req"] = server["cpu_s"] * 1000 / ok if server and ok else None
        return {
            **labels,
            "rep": rep,
            "target": target.name,
            "role": target.role,
            "model": job["model"],
            "stream": load.stream,
            "concurrency": load.concurrency,
            **result,
        }

    # --- the matrix --------------------------------------------------------------------------

    def matrix_size(self) -> int:
        cells = sum(1 for _ in self.plan.cells())
        return cells * self.plan.reps * (1 + len(self.targets))

    def matrix(self) -> list[dict[str, Any]]:
        records: list[dict[str, Any]] = []
        everyone = [self.direct, *self.targets]
        for cell in self.plan.cells():
            load = Load(
                cell.format,
                cell.model(self.plan.chunks, self.plan.pace_ms),
                cell.mode.stream,
                cell.concurrency,
            )
            for rep in range(self.plan.reps):
                for target in rotated(everyone, rep):
                    self.progress.step(f"{cell.key} rep {rep + 1}: {target.name}")
                    records.append(self.run(target, load, rep, **labels(cell)))
                    self.progress.advance()
        return records

    # --- held streams ------------------------------------------------------------------------

    def hold_job(self, target: Target, count: int) -> dict[str, Any]:
        model = Scenario(hold=True).model(HOLD.prefix)
        job = self.job(target, Load(HOLD, model, True, 1), op="hold")
        job["count"] = count
        return job

    def hold(self, target: Target, count: int) -> dict[str, Any]:
        return self.load.job(self.hold_job(target, count))

    def release(self) -> None:
        self.load.job({"op": "release"})

    def idle_probe_size(self) -> int:
        return len(self.probed()) * len(self.plan.idle_levels)

    def probed(self) -> list[Target]:
        return [target for target in self.targets if target.pids and target.follows_scenarios]

    def idle_probe(self) -> dict[str, Any]:
        """Per gateway: RSS with 0, then each level of held streams open."""
        out: dict[str, Any] = {}
        for target in self.probed():
            tree = ProcessTree(target.pids)
            time.sleep(SETTLE_S)
            base = tree.rss_bytes()
            levels: list[dict[str, Any]] = []
            opened = 0
            try:
                for level in self.plan.idle_levels:
                    self.progress.step(f"idle streams: {level} through {target.name}")
                    held = self.hold(target, level - opened)
                    opened = level
                    time.sleep(SETTLE_S)
                    tree.refresh()
                    rss = tree.rss_bytes()
                    levels.append(
                        {
                            "streams": level,
                            "open": held["open"],
                            "failures": held["failures"],
                            "rss_mb": rss / 2**20,
                            "kb_per_stream": (rss - base) / 1024 / level,
                        }
                    )
                    self.progress.advance()
            finally:
                self.release()
                log = self.logs.get(target.name)
                if log is not None:
                    log.drain()
            out[target.name] = {"base_rss_mb": base / 2**20, "levels": levels}
            out[target.name].update(flatness(base, levels))
        return out


def labels(cell: Cell) -> dict[str, Any]:
    return {"cell": cell.key, "mode": cell.mode.name, "format": cell.format.name}


FLAT_FACTOR: Final = 1.25
FLAT_SLACK_KB: Final = 2.0


def flatness(base: int, levels: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The RSS each further stream added between levels (KB), and whether it stayed flat: the
    last step costs no more per stream than the one before it, within 25% (and 2 KB). The first
    step, from no held stream, is not the reference: it may land in memory the gateway freed
    after the matrix, and look cheaper than streams are."""
    steps: list[float] = []
    previous_streams, previous_rss = 0, base / 2**20
    for level in levels:
        added = level["streams"] - previous_streams
        if added > 0:
            steps.append((level["rss_mb"] - previous_rss) * 1024 / added)
        previous_streams, previous_rss = level["streams"], level["rss_mb"]
    flat = None
    if len(steps) >= 2:
        flat = steps[-1] <= max(steps[-2], 0.0) * FLAT_FACTOR + FLAT_SLACK_KB
    return {"kb_per_stream_steps": steps, "flat": flat}
