"""`gateway bench --plot FILE.png`: the latency distributions, one panel per cell.

Each panel draws, per target, the cumulative distribution of request latency (each run keeps
101 quantiles; the repetitions' quantiles are averaged), on a logarithmic time axis so that
direct (tens of microseconds) and a gateway (milliseconds) share one panel. matplotlib is an
optional extra: `pip install 'llm-gateway[bench]'`; `require()` says so in one line before the
bench starts, rather than after minutes of measuring.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any, Final

from gateway_bench.plan import FORMATS, MODES

MISSING_EXTRA: Final = (
    "--plot needs matplotlib, which is not installed: pip install 'llm-gateway[bench]'"
)
PANEL_INCHES: Final = (3.2, 2.6)


class PlotUnavailable(RuntimeError):
    pass


def require() -> None:
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise PlotUnavailable(MISSING_EXTRA) from None


def averaged_quantiles(records: Sequence[Mapping[str, Any]]) -> list[float]:
    curves = [r["latency_quantiles_ms"] for r in records if r.get("latency_quantiles_ms")]
    if not curves:
        return []
    width = min(len(c) for c in curves)
    return [sum(c[i] for c in curves) / len(curves) for i in range(width)]


def plot(document: Mapping[str, Any], path: str) -> None:
    require()
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FuncFormatter

    cells = document["cells"]
    columns = sorted({(c["format"], c["concurrency"]) for c in cells}, key=column_order)
    rows = [m for m in MODES if any(c["mode"] == m for c in cells)]
    figure, axes = plt.subplots(
        len(rows),
        len(columns),
        figsize=(PANEL_INCHES[0] * len(columns), PANEL_INCHES[1] * len(rows)),
        squeeze=False,
        sharey=True,
    )
    names = [t["name"] for t in document["targets"]]
    runs = document["runs"]
    for cell in cells:
        axis = axes[rows.index(cell["mode"])][columns.index((cell["format"], cell["concurrency"]))]
        for name in names:
            mine = [r for r in runs if r["cell"] == cell["cell"] and r["target"] == name]
            curve = averaged_quantiles(mine)
            if curve and all(v > 0 for v in curve):
                percent = [100 * i / (len(curve) - 1) for i in range(len(curve))]
                axis.plot(curve, percent, label=name)
        axis.set_xscale("log")
        axis.xaxis.set_major_formatter(FuncFormatter(tick_label))
        axis.xaxis.set_minor_formatter(FuncFormatter(minor_tick_label))
        axis.set_title(
            f"{MODES[cell['mode']].label}, {FORMATS[cell['format']].label}, c{cell['concurrency']}",
            fontsize=8,
        )
        axis.tick_params(which="both", labelsize=7)
        axis.grid(True, which="both", alpha=0.3)
    for row in axes:
        row[0].set_ylabel("percentile", fontsize=8)
    for axis in axes[-1]:
        axis.set_xlabel("latency, ms (log)", fontsize=8)
    axes[0][0].legend(fontsize=7)
    figure.suptitle("gateway bench: latency distributions", fontsize=10)
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)


def tick_label(value: float, position: int) -> str:
    return f"{value:g}"


def minor_tick_label(value: float, position: int) -> str:
    """Only 2x, 3x and 5x a power of ten: every minor tick labelled collides on a short span."""
    mantissa = value / 10 ** math.floor(math.log10(value)) if value > 0 else 0
    return f"{value:g}" if round(mantissa, 6) in (2.0, 3.0, 5.0) else ""


def column_order(column: tuple[str, int]) -> tuple[int, int]:
    return list(FORMATS).index(column[0]), column[1]
