"""`gateway bench --suite field --plot FILE.png`: the suite's figures as bars and curves.

Three panels: p99 latency at concurrency 10 per workload and target, peak throughput per
workload and target (both on a logarithmic axis, so the direct call and the gateways share it),
and the capacity sweep of Chat non-stream, req/s over concurrency. matplotlib is the optional
`[bench]` extra; `gateway_bench.plot.require()` says so before the bench starts.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

from gateway_bench.plot import minor_tick_label, require, tick_label

BAR_WIDTH: Final = 0.8


def targets_of(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    return list(dict.fromkeys(row["target"] for row in rows))


def plot_field(document: Mapping[str, Any], path: str) -> None:
    require()
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FuncFormatter

    rows = document["workloads"]
    targets = targets_of(rows)
    workloads = list(dict.fromkeys(row["label"] for row in rows))
    value = {(row["label"], row["target"]): row for row in rows}
    figure, axes = plt.subplots(1, 3, figsize=(16, 4.6))
    width = BAR_WIDTH / len(targets)
    for axis, key, title in (
        (axes[0], "p99_ms", f"p99 at c{document['plan']['concurrency']}, ms (log)"),
        (axes[1], "peak_rps", "peak throughput, req/s (log)"),
    ):
        for index, target in enumerate(targets):
            xs = [i + (index - (len(targets) - 1) / 2) * width for i in range(len(workloads))]
            ys = [value[(w, target)].get(key) or 0 for w in workloads]
            axis.bar(xs, ys, width, label=target)
        axis.set_yscale("log")
        axis.set_xticks(range(len(workloads)))
        axis.set_xticklabels(workloads, rotation=30, ha="right", fontsize=8)
        axis.set_title(title, fontsize=9)
        axis.grid(True, axis="y", which="both", alpha=0.3)
    sweep = document["plan"]["sweep"]
    chat = [row for row in rows if row["workload"] == "chat"]
    for row in chat:
        ys = [row["rps_by_concurrency"].get(str(c)) for c in sweep]
        axes[2].plot(sweep, [y or 0 for y in ys], marker="o", label=row["target"])
    for published in document["published"]["rows"]:
        axes[2].axhline(published["peak_rps"], linestyle=":", linewidth=1, color="grey")
        axes[2].annotate(
            f"{published['gateway']} (published)",
            (sweep[0], published["peak_rps"]),
            fontsize=7,
            color="grey",
            va="bottom",
        )
    axes[2].set_xscale("log")
    axes[2].set_yscale("log")
    axes[2].set_xticks(sweep)
    axes[2].set_xticklabels([str(c) for c in sweep])
    axes[2].set_title("Chat non-stream, req/s by concurrency (log)", fontsize=9)
    axes[2].grid(True, which="both", alpha=0.3)
    for axis in axes:
        axis.yaxis.set_major_formatter(FuncFormatter(tick_label))
        axis.yaxis.set_minor_formatter(FuncFormatter(minor_tick_label))
        axis.tick_params(which="both", labelsize=7)
    axes[0].legend(fontsize=7)
    axes[2].legend(fontsize=7, loc="lower right")
    figure.suptitle("gateway bench --suite field", fontsize=10)
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)
