"""The field suite's load runs: latency at concurrency 10, then the capacity sweep, per trial.

Each trial runs every workload against every target in an order drawn from the trial's own
random generator (seeded: a run can be repeated as it ran). The latency run is `requests`
requests at `concurrency`, exactly; a sweep run lasts `sweep_duration` seconds (and at least a
few requests per connection). Both drop their warm-up.

A run is measured in `rounds` slices (`gateway_bench.slices`): each round runs one slice of
every run of the phase (of every workload and target, at one sweep concurrency), the workloads
shuffled and for each workload the targets, afresh each round. Runs that are compared with each
other (a gateway with the direct call, Responses with Chat) so share the host's moments: on a
shared machine whose speed drifts by more than the margins judged, over the minute a trial
takes, one block per run would judge the drift. The slices are merged into one record per run.

    field = FieldBench(plan, direct, targets, load_generator, progress, logs)
    records = field.measure()
"""

from __future__ import annotations

import collections
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
from gateway_bench.slices import merged
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
        rounds = plan.rounds
        floor = Plan().min_requests_per_connection
        timed = Plan(
            duration=plan.sweep_duration / rounds,
            min_requests_per_connection=-(-floor // rounds),
            warmup=plan.warmup,
            timeout=plan.timeout,
        )
        self.latency = [
            Bench(exact(plan, size), direct, targets, load, progress, logs, raw=True)
            for size in split(plan.requests, rounds)
        ]
        self.sweep = [Bench(timed, direct, targets, load, progress, logs, raw=True)] * rounds
        self.progress = progress

    @staticmethod
    def size_of(plan: FieldPlan, targets: int) -> int:
        """The slices of a session with `targets` targets, direct included."""
        slices = len(split(plan.requests, plan.rounds)) + len(plan.sweep) * plan.rounds
        return len(plan.names) * targets * slices * plan.trials

    def load_of(self, workload: Workload, concurrency: int) -> Load:
        model = Scenario(self.plan.chunks).model(workload.format.prefix)
        return Load(workload.format, model, workload.stream, concurrency)

    def measure(self) -> list[dict[str, Any]]:
        records: list[dict[str, Any]] = []
        for trial in range(self.plan.trials):
            order = random.Random(self.plan.seed + trial)
            workloads = list(self.plan.workloads())
            records += self.phase(
                LATENCY, self.latency, trial, workloads, [self.plan.concurrency], order
            )
            records += self.phase(SWEEP, self.sweep, trial, workloads, self.plan.sweep, order)
        return records

    def phase(
        self,
        phase: str,
        benches: Sequence[Bench],
        trial: int,
        workloads: Sequence[Workload],
        concurrencies: Sequence[int],
        order: random.Random,
    ) -> list[dict[str, Any]]:
        """Every run of `phase` in one trial, a slice a round: one record per run, in the order
        of the first round."""
        records: list[dict[str, Any]] = []
        for concurrency in concurrencies:
            slices: dict[tuple[str, str], list[dict[str, Any]]] = collections.defaultdict(list)
            for index, bench in enumerate(benches):
                for workload in shuffled(workloads, order):
                    load = self.load_of(workload, concurrency)
                    for target in shuffled(self.everyone, order):
                        label = (
                            f"trial {trial + 1} {phase}, round {index + 1}/{len(benches)}: "
                            f"{workload.label} c{concurrency}, {target.name}"
                        )
                        self.progress.step(label)
                        record = bench.run(target, load, trial, phase=phase, workload=workload.name)
                        slices[(workload.name, target.name)].append(record)
                        self.progress.advance()
            records += (merged(parts) for parts in slices.values())
        return records


def exact(plan: FieldPlan, requests: int) -> Plan:
    """Exactly `requests` requests at the latency runs' concurrency."""
    return Plan(
        duration=1e-3,  # the floor below decides
        max_requests=requests,
        min_requests_per_connection=-(-requests // plan.concurrency),
        warmup=plan.warmup,
        timeout=plan.timeout,
    )


def split(total: int, parts: int) -> list[int]:
    """`total` in `parts` sizes that differ by one at most, the larger first (none of 0)."""
    size, rest = divmod(total, parts)
    return [size + (1 if index < rest else 0) for index in range(min(parts, total))]


def shuffled(items: Sequence[Any], order: random.Random) -> list[Any]:
    out = list(items)
    order.shuffle(out)
    return out
