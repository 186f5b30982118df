"""`gateway conformance`'s arguments: what `gateway.cli` imports for every command. It imports
nothing but argparse, so `gateway serve` carries nothing of the tool (the run itself,
`gateway.conformance.command`, is imported only when `gateway conformance` runs).
"""

from __future__ import annotations

import argparse
from typing import Any, Final

DESCRIPTION: Final = """\
Score how faithfully a gateway passes truncation through. gateway conformance starts a
scripted loopback upstream that speaks OpenAI Chat (/v1/chat/completions), Anthropic Messages
(/v1/messages) and OpenAI Responses (/v1/responses), streamed and not, and drives the gateway
at URL with raw HTTP in each client format it speaks, for every case against every upstream
wire: each native stop reason, a tool call cut at max tokens, a stream reset mid-text and
mid-tool-call, a stream with no terminator, a stall past the gateway's timeout, garbage and a
multi-line data: event mid-stream, usage present and absent, error events and error statuses.
Each case gets a verdict: faithful, lossy (what was lost is named), hidden (a cut answer
presented as complete) or error (a clean error where an answer was possible).

  gateway conformance --print-config gateway > conformance.toml   # this gateway's routes
  gateway serve --config conformance.toml &
  gateway conformance http://127.0.0.1:8080
  gateway conformance http://127.0.0.1:4000 --key-env LITELLM_KEY  # LiteLLM proxy
  gateway conformance http://127.0.0.1:8787 \\
      --header 'x-portkey-config: @config/conformance-portkey.json'   # Portkey

The model name names the upstream wire and the case (conf-anthropic-max-tokens), so the gateway
must route conf-openai-* to <upstream>/v1 (OpenAI Chat), conf-anthropic-* to <upstream>
(Anthropic) and conf-responses-* to <upstream>/v1 (Responses), passing the name through;
--print-config prints that for this gateway, LiteLLM and Portkey. See docs/conformance.md.
"""
EXIT_STATUS: Final = (
    "exit status: 0 when no case is hidden; 3 when some case is hidden; 2 for a bad argument; "
    "1 when the target cannot be reached at all (or the upstream cannot listen)"
)


def add_conformance_parser(subparsers: Any) -> argparse.ArgumentParser:
    command: argparse.ArgumentParser = subparsers.add_parser(
        "conformance",
        help="score how faithfully any gateway passes truncation through",
        description=DESCRIPTION,
        epilog=EXIT_STATUS,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    command.add_argument("url", nargs="?", help="the gateway under test, e.g. http://HOST:PORT")
    what = command.add_argument_group("what to run")
    what.add_argument(
        "--format",
        default="all",
        help="client formats: openai, anthropic, responses, a comma list, or all (default)",
    )
    what.add_argument(
        "--wires", default="all", help="upstream wires, the same names (default: all)"
    )
    what.add_argument("--only", metavar="CASES", help="comma-separated case ids (default: all)")
    what.add_argument(
        "--stall", default="2", help="seconds the stall case stays silent (default 2)"
    )
    what.add_argument("--timeout", default="20", help="seconds per exchange beyond it (20)")
    what.add_argument("--concurrency", default="8", help="exchanges at once (default 8)")
    where = command.add_argument_group("the upstream and the target")
    where.add_argument(
        "--upstream-port",
        metavar="N",
        help="use the upstream already on this port (python -m gateway.conformance.upstream "
        "--port N) instead of starting one on 18091; with --print-config, its port",
    )
    where.add_argument(
        "--print-config",
        metavar="KIND",
        help="print the configuration gateway, litellm or portkey needs, and exit",
    )
    where.add_argument(
        "--key-env", metavar="VAR", help="environment variable with the target's key"
    )
    where.add_argument(
        "--header",
        action="append",
        default=[],
        metavar="'NAME: VALUE'",
        help="a header sent on every request (repeatable); a VALUE of @FILE is that file's text, "
        "JSON made one line",
    )
    out = command.add_argument_group("output")
    out.add_argument("--json", metavar="FILE", help="every case as JSON ('-' for stdout)")
    out.add_argument("--no-progress", action="store_true", help="no progress bar")
    return command
