"""The field suite's load runs: latency at concurrency 10, then the capacity sweep, per trial.

Each trial runs every workload against every target in an order drawn from the trial's own
random generator (seeded: a run can be repeated as it ran): the workloads shuffled, and for each
workload the targets shuffled, so the direct call and the gateways of one workload run close
together in time, on the same machine, in an order no target is favoured by. The latency run is
`requests` requests at `concurrency`, exactly; a sweep run lasts `sweep_duration` seconds (and
at least a few requests per connection). Both drop their warm-up.

    field = FieldBench(plan, direct, targets, load_generator, progress, logs)
    records = field.measure()
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from typing import Any

from gateway_bench.children import LoadGenerator
from gateway_bench.field_plan import FieldPlan, Workload
from gateway_bench.gateway_log import GatewayLog
from gateway_bench.plan import Plan
from gateway_bench.progress import Reporter
from gateway_bench.run import Bench, Load
from gateway_bench.scenario import Scenario
from gateway_bench.targets import Target

LATENCY = "latency"
SWEEP = "sweep"


class FieldBench:
    def __init__(
        self,
        plan: FieldPlan,
        direct: Target,
        targets: Sequence[Target],
        load: LoadGenerator,
        progress: Reporter,
        logs: Mapping[str, GatewayLog] | None = None,
    ) -> None:
        self.plan = plan
        self.everyone = [direct, *targets]
        per_connection = -(-plan.requests // plan.concurrency)
        exact = Plan(
            duration=1e-3,  # the floor below decides: exactly `requests` requests
            max_requests=plan.requests,
            min_requests_per_connection=per_connection,
            warmup=plan.warmup,
            timeout=plan.timeout,
        )
        timed = Plan(duration=plan.sweep_duration, warmup=plan.warmup, timeout=plan.timeout)
        self.latency = Bench(exact, direct, targets, load, progress, logs)
        self.sweep = Bench(timed, direct, targets, load, progress, logs)
        self.progress = progress

    @staticmethod
    def size_of(plan: FieldPlan, targets: int) -> int:
        """The runs of a session with `targets` targets, direct included."""
        return len(plan.names) * targets * (1 + len(plan.sweep)) * plan.trials

    def load_of(self, workload: Workload, concurrency: int) -> Load:
        model = Scenario(self.plan.chunks).model(workload.format.prefix)
        return Load(workload.format, model, workload.stream, concurrency)

    def measure(self) -> list[dict[str, Any]]:
        records: list[dict[str, Any]] = []
        for trial in range(self.plan.trials):
            order = random.Random(self.plan.seed + trial)
            workloads = shuffled(list(self.plan.workloads()), order)
            for workload in workloads:
                load = self.load_of(workload, self.plan.concurrency)
                for target in shuffled(self.everyone, order):
                    records.append(self.one(self.latency, target, load, trial, workload, LATENCY))
            for workload in shuffled(workloads, order):
                for concurrency in self.plan.sweep:
                    load = self.load_of(workload, concurrency)
                    for target in shuffled(self.everyone, order):
                        records.append(self.one(self.sweep, target, load, trial, workload, SWEEP))
        return records

    def one(
        self, bench: Bench, target: Target, load: Load, trial: int, workload: Workload, phase: str
    ) -> dict[str, Any]:
        label = f"trial {trial + 1} {phase}: {workload.label} c{load.concurrency}, {target.name}"
        self.progress.step(label)
        record = bench.run(target, load, trial, phase=phase, workload=workload.name)
        self.progress.advance()
        return record


def shuffled(items: Sequence[Any], order: random.Random) -> list[Any]:
    out = list(items)
    order.shuffle(out)
    return out
