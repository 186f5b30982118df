"""`gateway bench --growth`: how CPU per request grows as one dimension of the traffic grows.

Three dimensions, each a series of runs of the same-format route at `growth_concurrency`:

    stream length       streamed answers of 20, 200, 2,000 chunks (burst)
    request size        non-streamed requests carrying 1 KB to 1 MB of message history
    open slow streams   non-streamed requests while 0, 100, 1,000 held streams stay open

Cost must grow linearly in bytes, never worse: for the first two the marginal cost (per chunk,
per KB: what each further unit cost between two points) must not rise along the series; for
the third, CPU per request must not rise with the streams open (each open stream is idle; a
gateway that scans every open stream per request or per tick shows here). The repetitions
alternate the targets as the matrix does; there is no direct run (nothing is added to).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Final

from gateway_bench import stats
from gateway_bench.plan import FORMATS
from gateway_bench.run import Bench, Load, rotated
from gateway_bench.scenario import Scenario
from gateway_bench.targets import Target

LINEAR_FACTOR: Final = 1.3
LINEAR_SLACK_US: Final = 0.5
FLAT_FACTOR: Final = 1.25
SAME: Final = FORMATS["same"]


@dataclass(frozen=True, slots=True)
class Axis:
    name: str
    points: Callable[[Bench], Sequence[int]]
    load: Callable[[int, int], Load]  # (point, concurrency)
    label: Callable[[int], str]
    unit: float  # the point's value per unit of the marginal (1 chunk, 1,000 bytes)
    unit_name: str
    held: bool = False  # hold `point` streams open through the target during the run


def kilobytes(value: int) -> str:
    return f"{value / 1000:g} KB" if value < 1_000_000 else f"{value / 1_000_000:g} MB"


AXES: Final = (
    Axis(
        "stream length",
        lambda bench: bench.plan.growth_chunks,
        lambda n, c: Load(SAME, Scenario(n).model(SAME.prefix), True, c),
        lambda n: f"{n:,} chunks",
        1,
        "us/chunk",
    ),
    Axis(
        "request size",
        lambda bench: bench.plan.growth_bytes,
        lambda n, c: Load(SAME, Scenario().model(SAME.prefix), False, c, history_bytes=n),
        kilobytes,
        1000,
        "us/KB",
    ),
    Axis(
        "open slow streams",
        lambda bench: bench.plan.growth_streams,
        lambda n, c: Load(SAME, Scenario().model(SAME.prefix), False, c),
        lambda n: f"{n:,} open",
        1,
        "x",
        held=True,
    ),
)


def growth_size(bench: Bench) -> int:
    points = sum(len(axis.points(bench)) for axis in AXES)
    return points * bench.plan.reps * len(bench.targets)


def measure(bench: Bench) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Per dimension and target: the series and its verdict; and the raw records."""
    records: list[dict[str, Any]] = []
    out: dict[str, Any] = {}
    concurrency = bench.plan.growth_concurrency
    for axis in AXES:
        for point in axis.points(bench):
            load = axis.load(point, concurrency)
            for rep in range(bench.plan.reps):
                for target in rotated(bench.targets, rep):
                    bench.progress.step(
                        f"growth: {axis.label(point)}, rep {rep + 1}: {target.name}"
                    )
                    records.append(run_point(bench, axis, point, load, rep, target))
                    bench.progress.advance()
        out[axis.name] = {
            target.name: series(axis, axis.points(bench), records, target.name)
            for target in bench.targets
        }
    return out, records


def run_point(
    bench: Bench, axis: Axis, point: int, load: Load, rep: int, target: Target
) -> dict[str, Any]:
    labels = {"cell": f"growth/{axis.name}/{point}", "axis": axis.name, "point": point}
    if not (axis.held and point):
        return bench.run(target, load, rep, **labels)
    held = bench.hold(target, point)
    try:
        record = bench.run(target, load, rep, **labels)
    finally:
        bench.release()
    record["held"] = held
    return record


def series(
    axis: Axis, points: Sequence[int], records: Sequence[dict[str, Any]], name: str
) -> dict[str, Any]:
    rows: list[dict[str, Any]] = []
    for point in points:
        mine = [
            r
            for r in records
            if r.get("axis") == axis.name and r["point"] == point and r["target"] == name
        ]
        rows.append(
            {
                "x": point,
                "label": axis.label(point),
                "cpu_ms_per_req": stats.median([r.get("cpu_ms_per_req") for r in mine]),
                "rps": stats.median([r["rps"] for r in mine]),
                "errors": sum(sum(r["errors"].values()) for r in mine),
            }
        )
    cpu = [row["cpu_ms_per_req"] for row in rows]
    linear = flat_verdict(rows, cpu) if axis.held else marginal_verdict(axis, rows, cpu)
    xs = [float(p) for p in points]
    slope = stats.loglog_slope(xs, cpu) if all(x > 0 for x in xs) else None
    return {"points": rows, "linear": linear, "loglog_slope": slope, "unit": axis.unit_name}


def marginal_verdict(
    axis: Axis, rows: list[dict[str, Any]], cpu: Sequence[float | None]
) -> bool | None:
    """Fill each row's marginal (us per unit since the previous point); linear or better when
    the last marginal is within LINEAR_FACTOR (+ slack) of the largest one before it."""
    marginals: list[float] = []
    for i in range(1, len(rows)):
        low, high = cpu[i - 1], cpu[i]
        if low is None or high is None:
            return None
        units = (rows[i]["x"] - rows[i - 1]["x"]) / axis.unit
        marginal = (high - low) * 1000 / units
        rows[i]["marginal"] = marginal
        rows[i]["marginal_text"] = f"{marginal:.2f} {axis.unit_name}"
        marginals.append(marginal)
    if len(marginals) < 2:
        return None
    return marginals[-1] <= max(marginals[:-1]) * LINEAR_FACTOR + LINEAR_SLACK_US


def flat_verdict(rows: list[dict[str, Any]], cpu: Sequence[float | None]) -> bool | None:
    base = cpu[0]
    if not base:
        return None
    for row, value in zip(rows, cpu, strict=True):
        if value is not None:
            row["marginal"] = value / base
            row["marginal_text"] = f"{value / base:.2f}x"
    present = [value for value in cpu[1:] if value is not None]
    return all(value <= base * FLAT_FACTOR for value in present) if present else None
