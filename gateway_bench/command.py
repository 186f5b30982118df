"""`gateway bench`: from arguments (`gateway_bench.arguments`) to the report.

`main_bench` is what `gateway.cli` runs. Arguments are checked before any process starts (a bad
one is one line and exit status 2); `gateway_bench.session` does the measuring,
`gateway_bench.report` the showing.
"""

from __future__ import annotations

import argparse
import signal
import sys
from collections.abc import Callable
from dataclasses import replace
from typing import Any, Final, TypeVar

from rich.console import Console

from gateway_bench import gateway_config, plot, report
from gateway_bench.children import ChildFailed
from gateway_bench.field_plan import FieldPlan, quick_field_plan
from gateway_bench.plan import Plan, preset
from gateway_bench.progress import Bar, Reporter, Silent
from gateway_bench.session import compare_headers, compare_key, execute
from gateway_bench.targets import split_url


def plan_of(args: argparse.Namespace) -> Plan:
    plan = preset(args.quick)
    changes: dict[str, Any] = {
        field: getattr(args, field)
        for field in (
            "reps",
            "duration",
            "max_requests",
            "warmup",
            "timeout",
            "concurrency",
            "modes",
            "formats",
            "chunks",
        )
        if getattr(args, field) is not None
    }
    if args.pace_ms is not None:
        changes["pace_ms"] = args.pace_ms
    if args.idle_streams is not None:
        changes["idle_levels"] = tuple(sorted(set(args.idle_streams)))
    if args.no_idle:
        changes["idle_levels"] = ()
    return replace(plan, **changes)


FIELD_ONLY: Final = (
    "requests",
    "trials",
    "rounds",
    "sweep",
    "cold_starts",
    "audit",
    "seed",
    "markdown",
    "compare_start",
)
MATRIX_ONLY: Final = ("growth", "modes", "formats", "concurrency", "idle_streams", "no_idle")


def field_plan_of(args: argparse.Namespace) -> FieldPlan:
    plan = quick_field_plan() if args.quick else FieldPlan()
    changes: dict[str, Any] = {
        field: getattr(args, field)
        for field in (
            "requests",
            "trials",
            "rounds",
            "cold_starts",
            "audit",
            "seed",
            "chunks",
            "timeout",
        )
        if getattr(args, field) is not None
    }
    if args.sweep is not None:
        changes["sweep"] = tuple(sorted(set(args.sweep)))
    if args.warmup is not None:
        changes["warmup"] = args.warmup
    if args.duration is not None:
        changes["sweep_duration"] = args.duration
    if args.gateway_url:
        changes["audit"] = ()  # measured as it runs: the bench starts no gateway
    return replace(plan, **changes)


def check_suite(args: argparse.Namespace) -> None:
    """An option of the other suite is a mistake worth one line, not a silent no-op."""
    other = MATRIX_ONLY if args.suite == "field" else FIELD_ONLY
    given = [name for name in other if getattr(args, name, None) not in (None, False)]
    if given:
        flags = ", ".join("--" + name.replace("_", "-") for name in given)
        raise ValueError(f"{flags}: not an option of --suite {args.suite}")


def check_arguments(args: argparse.Namespace) -> None:
    """ValueError naming the argument, before any process starts."""
    for flag, url in (("--gateway-url", args.gateway_url), ("--compare", args.compare)):
        if url:
            try:
                split_url(url)
            except ValueError as exc:
                raise ValueError(f"{flag}: {exc}") from None
    if args.compare and args.compare_name in ("direct", "gateway", "gateway-no-audit"):
        raise ValueError(f"--compare-name: {args.compare_name!r} is taken")
    if getattr(args, "compare_start", None) and not args.compare:
        raise ValueError("--compare-start: needs --compare, the URL the command listens at")
    if args.plot:
        plot.require()
    if args.upstream_port and not 0 < args.upstream_port < 65536:
        raise ValueError(f"--upstream-port: not a port: {args.upstream_port}")


P = TypeVar("P", Plan, FieldPlan)

# Stopped like Ctrl-C, so that every process the bench started is stopped in turn.
STOP_SIGNALS: Final = (signal.SIGTERM, signal.SIGHUP)


class Stopped(Exception):
    def __init__(self, number: signal.Signals) -> None:
        super().__init__(number.name)
        self.signal = number


def stop_on(number: int, frame: object) -> None:
    raise Stopped(signal.Signals(number))


def checked(args: argparse.Namespace, make_plan: Callable[[argparse.Namespace], P]) -> P | None:
    """The suite's plan once every argument checked out; None (said in one line) else."""
    try:
        check_suite(args)
        plan = make_plan(args)
        check_arguments(args)
        compare_key(args)
        compare_headers(args)
    except (ValueError, plot.PlotUnavailable) as exc:
        print(f"gateway bench: {exc}", file=sys.stderr)
        return None
    return plan


def run_reported(args: argparse.Namespace, warn: Console, measure: Any) -> Any:
    """`measure(progress)`'s document, with the bench's signals and failures handled: an int is
    the exit status of a run that did not end."""
    to_stdout = args.json == "-" or getattr(args, "markdown", None) == "-"
    quiet = to_stdout or args.no_progress or not warn.is_terminal
    progress: Reporter = Silent() if quiet else Bar(warn)
    previous = {sig: signal.signal(sig, stop_on) for sig in STOP_SIGNALS}
    try:
        return measure(progress)
    except ChildFailed as exc:
        print(f"gateway bench: {exc}", file=sys.stderr)
        return 1
    except (KeyboardInterrupt, Stopped) as exc:
        number = exc.signal if isinstance(exc, Stopped) else signal.SIGINT
        stopped = f"gateway bench: stopped by {number.name}; so is every process it started"
        print(stopped, file=sys.stderr)
        return 128 + number
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def main_field(args: argparse.Namespace, warn: Console) -> int:
    from gateway_bench import field_plot, field_report
    from gateway_bench.field_session import execute_field

    plan = checked(args, field_plan_of)
    if plan is None:
        return 2
    document = run_reported(args, warn, lambda progress: execute_field(args, plan, progress, warn))
    if isinstance(document, int):
        return document
    if args.json:
        report.write_json(document, args.json)
    if args.markdown:
        text = field_report.markdown(document)
        if args.markdown == "-":
            sys.stdout.write(text)
        else:
            with open(args.markdown, "w", encoding="utf-8") as file:
                file.write(text)
    if args.json != "-" and args.markdown != "-":
        console = Console(width=max(Console().width, 160))
        for renderable in field_report.field_tables(document):
            console.print(renderable)
    if args.plot:
        field_plot.plot_field(document, args.plot)
    return 0


def main_bench(args: argparse.Namespace) -> int:
    warn = Console(stderr=True)
    if args.suite == "field":
        return main_field(args, warn)
    if args.workers is None:
        args.workers = 1
    plan = checked(args, plan_of)
    if plan is None:
        return 2
    if args.print_config:
        print(gateway_config.render(args.upstream_port or 18080, None), end="")
        return 0
    to_stdout = args.json == "-"
    document = run_reported(args, warn, lambda progress: execute(args, plan, progress, warn))
    if isinstance(document, int):
        return document
    if args.json:
        report.write_json(document, args.json)
    if not to_stdout:
        console = Console(width=max(Console().width, 200))  # the matrix needs it; wraps else
        for renderable in report.tables(document):
            console.print(renderable)
    if args.plot and "cells" in document:
        plot.plot(document, args.plot)
    return 0
