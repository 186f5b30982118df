"""`gateway bench`'s arguments: what `gateway.cli` imports for every command (the measuring
itself, `gateway_bench.command`, is imported only when `gateway bench` runs).
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import Any, Final

from gateway_bench.plan import FORMATS, MODES

DESCRIPTION: Final = """\
Measure what the gateway costs. gateway bench starts a zero-latency fake upstream that speaks
every wire the gateway does (OpenAI Chat and Responses, Anthropic Messages, Gemini, Bedrock
Converse), starts the gateway in front of it (audit trail on, its own config in a temporary
directory), and runs a closed-loop load generator against the upstream directly and through
the gateway, alternating them within each repetition. It prints medians and ratios per cell
(non-stream, 20-chunk stream in one burst, 20-chunk stream paced one chunk per write; same-
format Chat -> OpenAI and cross-format Chat -> Anthropic; concurrency 1, 32, 64): requests/s,
p50 and p99 latency and what the gateway adds to them, time to first byte, CPU per request and
per chunk (from /proc), peak RSS, errors; then RSS per idle open stream, and the gateway's
performance targets as a pass/fail checklist.

  gateway bench                                  # the default matrix, 3 repetitions
  gateway bench --quick                          # a smoke run of a few seconds
  gateway bench --compare http://127.0.0.1:4000 --compare-name litellm \\
      --compare-key-env LITELLM_KEY --upstream-port 18090
                                                 # another gateway in the same rounds
  gateway bench --growth                         # CPU growth with stream length, request
                                                 # size and open streams
  gateway bench --json out.json --plot out.png   # everything, and the latency CDFs
  gateway bench --suite field                    # the field's six workloads (below)

Another gateway given with --compare (or --gateway-url) must route the model names the bench
sends to the fake upstream: `bench-*` to its OpenAI Chat endpoint (<upstream>/v1), `xbench-*` to
its Anthropic endpoint (<upstream>), `hbench-*` (held streams) like `bench-*`; pin the upstream's
port with --upstream-port, and see --print-config for the gateway's own configuration of it.
The scenario is in the model name (`bench-c20-p1`: 20 chunks, paced 1 ms apart), so the other
gateway must pass the name through (--compare-model 'openai/{model}' rewrites it on the way);
config/bench-litellm.yaml does so for LiteLLM proxy. Only loopback targets are accepted.

--suite field runs the shape of the field's public 2-vCPU benchmark: Chat, Responses and
Messages, each streamed and not (`bench-*`, `rbench-*`, `abench-*`: each client wire to the same
wire upstream); per workload and target 8,000 requests at concurrency 10 (p50, p99, time to first
token) and a capacity sweep at concurrency 1, 16 and 128 (peak req/s), in two trials of random
order, each run in 4 slices interleaved with the others' (--rounds); peak RSS, per worker too;
cold start (process start to first answer). The gateway runs with the audit trail on and,
beside it, off; every figure also as a ratio to the direct call to the fake upstream in the
same trial; the published table beside it, and the targets.
"""


def csv_ints(text: str) -> tuple[int, ...]:
    try:
        values = tuple(int(part) for part in text.split(",") if part.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"not a comma-separated list of numbers: {text!r}"
        ) from None
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError(f"must be numbers of at least 1: {text!r}")
    return values


def csv_names(known: Sequence[str]) -> Any:
    def parse(text: str) -> tuple[str, ...]:
        names = tuple(part.strip() for part in text.split(",") if part.strip())
        unknown = [name for name in names if name not in known]
        if unknown or not names:
            raise argparse.ArgumentTypeError(
                f"unknown {', '.join(unknown) or 'empty list'} (known: {', '.join(known)})"
            )
        return names

    return parse


def positive(kind: type[float] | type[int]) -> Any:
    def parse(text: str) -> float | int:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
        if value <= 0:
            raise argparse.ArgumentTypeError(f"must be more than 0, not {text}")
        return value

    return parse


def add_bench_parser(subparsers: Any, help_line: str) -> argparse.ArgumentParser:
    bench: argparse.ArgumentParser = subparsers.add_parser(
        "bench",
        help=help_line,
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    what = bench.add_argument_group("what to measure")
    what.add_argument(
        "--suite",
        choices=("matrix", "field"),
        default="matrix",
        help="matrix: the cost matrix (default); field: the field's six workloads",
    )
    what.add_argument("--quick", action="store_true", help="a smoke run: c1 and c8, 1 rep, 0.3 s")
    what.add_argument("--growth", action="store_true", help="the cost-growth series instead")
    what.add_argument("--reps", type=positive(int), help="repetitions per cell (default 3)")
    what.add_argument("--duration", type=positive(float), help="seconds per run (default 2)")
    what.add_argument("--max-requests", type=positive(int), help="cap per run (default 200000)")
    what.add_argument("--warmup", type=positive(int), help="requests before each run (50)")
    what.add_argument("--timeout", type=positive(float), help="seconds per request (30)")
    what.add_argument("--concurrency", type=csv_ints, help="e.g. 1,32,64 (the default)")
    what.add_argument("--modes", type=csv_names(list(MODES)), help="nonstream,burst,paced")
    what.add_argument("--formats", type=csv_names(list(FORMATS)), help="same,cross (default)")
    what.add_argument("--chunks", type=positive(int), help="content chunks per stream (20)")
    what.add_argument("--pace-ms", type=positive(float), help="ms between paced chunks (1)")
    what.add_argument(
        "--idle-streams", type=csv_ints, help="held-stream levels of the idle probe (100,500,1000)"
    )
    what.add_argument("--no-idle", action="store_true", help="skip the idle-stream probe")
    field = bench.add_argument_group("--suite field")
    field.add_argument("--requests", type=positive(int), help="per latency run (8000)")
    field.add_argument("--trials", type=positive(int), help="randomized trials (2)")
    field.add_argument(
        "--rounds", type=positive(int), help="interleaved slices of every run, a trial (4)"
    )
    field.add_argument("--sweep", type=csv_ints, help="the sweep's concurrencies (1,16,128)")
    field.add_argument("--cold-starts", type=positive(int), help="starts per gateway (5)")
    field.add_argument(
        "--audit", type=csv_names(["on", "off"]), help="the gateways started: on,off (default)"
    )
    field.add_argument("--seed", type=int, help="of the trials' random orders (2026)")
    field.add_argument("--markdown", metavar="FILE", help="the tables as Markdown ('-': stdout)")
    where = bench.add_argument_group("targets")
    where.add_argument("--gateway-url", help="a gateway already running, instead of starting one")
    where.add_argument("--gateway-pid", type=int, help="its process (default: found by its port)")
    where.add_argument(
        "--workers",
        type=positive(int),
        help="gateway serve --workers for the gateway it starts (default: 1 for the matrix, "
        "the gateway's own default, one per core, for --suite field)",
    )
    where.add_argument("--upstream-port", type=int, default=0, help="the fake upstream's port")
    where.add_argument("--compare", metavar="URL", help="another gateway, measured alongside")
    where.add_argument("--compare-name", default="compare", help="its name in the report")
    where.add_argument(
        "--compare-model",
        default="{model}",
        help="the model it is sent; {model} is the scenario's name (default: {model})",
    )
    where.add_argument("--compare-key", help="its key, sent as bearer and x-api-key; never shown")
    where.add_argument("--compare-key-env", help="the environment variable holding its key")
    where.add_argument("--compare-pid", type=int, help="its process (default: found by its port)")
    where.add_argument(
        "--compare-header",
        metavar="'NAME: VALUE'",
        action="append",
        default=[],
        help="a header sent to it on every request (repeatable); a VALUE of @FILE is that "
        "file's text, JSON made one line (Portkey's x-portkey-config); never shown",
    )
    where.add_argument(
        "--compare-start",
        metavar="COMMAND",
        help="--suite field: a shell command that starts it, listening at --compare's URL; the "
        "bench times its cold starts, then starts it for the runs and stops it at the end",
    )
    out = bench.add_argument_group("output")
    out.add_argument("--json", metavar="FILE", help="everything as JSON; '-' for stdout only")
    out.add_argument("--plot", metavar="FILE.png", help="latency distributions (needs [bench])")
    out.add_argument("--no-progress", action="store_true", help="no progress bar")
    out.add_argument(
        "--print-config",
        action="store_true",
        help="print the gateway configuration for --upstream-port and exit",
    )
    return bench
