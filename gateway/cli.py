"""The command line: `gateway serve [--config PATH] [--host H] [--port P] [--workers N]
[--log-level L] [--log-format F]`, `gateway audit`, `gateway keys hash|new`, `gateway reload`,
`gateway bench` and `gateway conformance`."""

from __future__ import annotations

import argparse
import gc
import os
import signal
import sys
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, NoReturn

from gateway.access.command import add_keys_parser
from gateway.arg_types import at_least_one
from gateway.audit.arguments import add_audit_parser
from gateway.conformance.arguments import add_conformance_parser
from gateway.log_choices import LOG_FORMATS, LOG_LEVELS
from gateway.reload_command import add_reload_parser

if TYPE_CHECKING:
    from gateway.config_source import ConfigSource
    from gateway.launch import Launch
    from gateway.listen import ListenAddress
    from gateway.price_subset import PendingPrices
    from gateway.settings import Settings

EXIT_STATUS = (
    "exit status: 0 after a stop by SIGTERM, SIGINT or SIGHUP; 2 for a bad argument or "
    "configuration; 1 when the gateway cannot listen or cannot open its audit store (or its "
    "workers cannot start)"
)


class OneLineErrorParser(argparse.ArgumentParser):
    """Reports a usage error as one line naming the argument, with exit status 2."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: {message} (see {self.prog} --help)\n")


def port_number(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a port number: {text!r}") from None
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"must be from 0 to 65535, not {value}")
    return value


worker_count = at_least_one("a number of workers")


def non_empty(text: str) -> str:
    if not text.strip():
        raise argparse.ArgumentTypeError("must not be empty")
    return text


# `gateway bench` is a tool beside the product (the top-level package gateway_bench): its
# arguments are read only when it is the command, so no other command, `serve` above all, imports
# it. Any other command line sees this placeholder, which is what `gateway --help` lists.
BENCH_HELP = "measure the gateway's cost against a built-in fake upstream (and other gateways)"


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = OneLineErrorParser(prog="gateway", description=__doc__, epilog=EXIT_STATUS)
    commands = parser.add_subparsers(dest="command", required=True)
    serve = commands.add_parser("serve", help="run the gateway", epilog=EXIT_STATUS)
    serve.add_argument(
        "--config", type=non_empty, help="TOML file (default: $GATEWAY_CONFIG, else built-in)"
    )
    serve.add_argument(
        "--host", type=non_empty, help="address to listen on (overrides [server] host)"
    )
    serve.add_argument("--port", type=port_number, help="port to listen on, 0 for any free one")
    serve.add_argument(
        "--workers",
        type=worker_count,
        help="processes sharing the port (overrides [server] workers; default: one per core)",
    )
    serve.add_argument(
        "--log-level",
        type=str.lower,
        choices=LOG_LEVELS,
        help="the lowest level logged (overrides [logging] level; default info); warning and "
        "above leave out the line per exchange",
    )
    serve.add_argument(
        "--log-format",
        type=str.lower,
        choices=LOG_FORMATS,
        help="json, console (a readable line each) or auto: console when stderr is a terminal, "
        "else json (overrides [logging] format; default auto)",
    )
    add_audit_parser(commands)
    add_keys_parser(commands)
    add_reload_parser(commands)
    if argv[:1] == ["bench"]:
        from gateway_bench.arguments import add_bench_parser

        add_bench_parser(commands, BENCH_HELP)
    else:
        commands.add_parser("bench", help=BENCH_HELP)
    add_conformance_parser(commands)
    return parser.parse_args(argv)


def listen_address(
    args: argparse.Namespace, settings: Settings, source: ConfigSource
) -> ListenAddress:
    from gateway.listen import ListenAddress

    def origin(flag: str, field: str, given: object) -> str:
        if given is not None:
            return flag
        if source.path is not None and field in settings.server.model_fields_set:
            return f"server.{field} in {source.path}"
        return f"the default server.{field}; change it with {flag}"

    host = settings.server.host if args.host is None else args.host
    port = settings.server.port if args.port is None else args.port
    return ListenAddress(
        host, port, origin("--host", "host", args.host), origin("--port", "port", args.port)
    )


def serve(args: argparse.Namespace, env: Mapping[str, str]) -> int:
    # First of all, the processes that start on their own, while this one imports, validates
    # and prepares; they get what they wait for once it is known. With several workers
    # (`--workers N`, or the default on a machine of several cores) the first worker comes
    # first of all: its imports are the longest part of the start, so it starts before this
    # process imports asyncio and the logging (gateway.launch). Then the price table's child.
    gc.disable()  # until it listens (gateway.serving's settle_collector), or supervises
    from gateway.cores import default_count

    launch = None
    likely = args.workers if args.workers is not None else default_count()
    if likely > 1:
        from gateway.launch import Launch

        launch = Launch.begin(likely, env)
    from gateway import logs
    from gateway.price_cache import PriceCache
    from gateway.price_subset import PendingPrices

    logs.configure()
    prices = PendingPrices.begin(PriceCache.default(env))
    try:
        return _serve(args, env, prices, launch)
    finally:
        prices.abandon()  # asked already when the gateway started: a no-op then


def _serve(
    args: argparse.Namespace, env: Mapping[str, str], prices: PendingPrices, launch: Launch | None
) -> int:
    # The serving path is imported here, not for `gateway --help` or another command.
    from providers import tls_trust

    tls_trust.import_aiohttp()  # before anything imports it: the trust store is read if needed
    from gateway import event_loop, logs
    from gateway.config_source import config_source
    from gateway.listen import listen_failure, open_listeners, reserve_address
    from gateway.serving import Serving, StartupFailed, run_server
    from gateway.settings import ConfigError, load_settings
    from gateway.signals import RELOAD_SIGNAL
    from gateway.startup import startup_report, store_location
    from gateway.workers import plan_workers

    def fail(status: int, line: str) -> int:
        if launch is not None:
            launch.abandon()
        print(line, file=sys.stderr)
        return status

    # A reload (SIGUSR1) before the app can take it would end the process: it waits till then.
    signal.pthread_sigmask(signal.SIG_BLOCK, (RELOAD_SIGNAL,))
    source = config_source(args.config, env)
    config_path = None if source.path is None else str(source.path)
    try:
        settings = load_settings(source.path, env)
    except ConfigError as exc:
        return fail(2, str(ConfigError(source.label(), exc.problems)))
    settings = with_log_flags(settings, args)
    logs.configure(settings.logging.level, form=settings.logging.format)
    try:
        plan = plan_workers(args.workers, settings, source)
    except ConfigError as exc:
        return fail(2, str(exc))
    prices.ask(settings)  # the child has been reading the table meanwhile
    if plan.count == 1 and launch is not None:  # `[server] workers = 1`, or the memory limits
        launch.abandon()
        launch = None
    elif plan.count > 1 and launch is None:  # `[server] workers` on a single core: known now
        from gateway.launch import Launch

        launch = Launch.begin(plan.count, env)
    audit_store = settings.audit.store
    address = listen_address(args, settings, source)
    try:
        report = startup_report(settings, source, env, audit_store, host=address.host, workers=plan)
    except ValueError as exc:
        return fail(2, str(ConfigError(source.label(), [("audit.store", str(exc))])))
    # One process listens itself; a supervisor only reserves the address for its workers.
    bind = open_listeners if plan.count == 1 else reserve_address
    try:
        sockets = bind(address.host, address.port)
    except OSError as exc:
        return fail(1, f"gateway serve: {listen_failure(exc, address)}")
    for line in report:
        print(line.render(), file=sys.stderr)
    location = store_location(audit_store)
    if plan.count > 1:
        gc.enable()  # the supervisor serves nothing: its start is over
        from gateway.supervisor import supervise

        shown = address.shown_host()
        count = plan.count
        return supervise(settings, count, sockets, shown, location, config_path, launch, prices)
    serving = Serving(
        on_ready=lambda port: _print_listening(address.shown_host(), port),
        config_path=config_path,
        prices=prices,
    )
    try:
        event_loop.run(run_server(settings, sockets, location, serving))
    except StartupFailed as exc:
        print(f"gateway serve: {exc}", file=sys.stderr)
        return 1
    return 0


def with_log_flags(settings: Settings, args: argparse.Namespace) -> Settings:
    """`--log-level` and `--log-format` win over `[logging]`; workers get the settings."""
    given = {"level": args.log_level, "format": args.log_format}
    flags = {key: value for key, value in given.items() if value is not None}
    if not flags:
        return settings
    return settings.model_copy(update={"logging": settings.logging.model_copy(update=flags)})


def _print_listening(shown_host: str, port: int) -> None:
    print(f"listening on http://{shown_host}:{port}", file=sys.stderr, flush=True)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    if args.command == "serve":  # its workers start before the logging is set up
        return serve(args, os.environ)
    from gateway import logs

    logs.configure()
    # A command's implementation is imported by its branch: `gateway serve` does not carry the
    # report's renderers (rich).
    if args.command == "audit":
        from gateway.audit.command import main_audit

        return main_audit(args)
    if args.command == "keys":
        from gateway.access.command import main_keys

        return main_keys(args)
    if args.command == "reload":
        from gateway.reload_command import main_reload

        return main_reload(args)
    if args.command == "bench":
        from gateway_bench.command import main_bench

        return main_bench(args)
    if args.command == "conformance":
        from gateway.conformance.command import main_conformance

        return main_conformance(args)
    raise AssertionError(f"no such command: {args.command}")  # argparse allows no other
