"""`gateway serve` imports what its configured providers and its command need, no more.

botocore (Bedrock), google-auth with requests and cryptography (Vertex AI), rich (`gateway
audit`'s tables) and genai-prices' update client (httpx2) add some 25 MB of resident memory
together; a provider kind's module is imported when a provider of that kind is built. A
subprocess builds the app and lists `sys.modules`, so the savings cannot regress silently. A
missing package of a configured kind is a configuration error naming it.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gateway.price_table import import_submodules
from gateway.settings import ConfigError, parse_settings
from providers import registry
from providers.registry import KINDS, ProviderKind, build_provider

# Imported by no app without a Bedrock or Vertex AI provider, and by no `gateway serve`.
NEVER_BY_DEFAULT = (
    "botocore",
    "google.auth",
    "requests",
    "cryptography",
    "rich",
    "providers.bedrock",
    "providers.vertex",
    "providers.google_credentials",
    "gateway.formats.aws_eventstream",
    "gateway.audit.command",
    "gateway.audit.render",
    "gateway.dashboard.api",  # the dashboard's aggregates: on its first API call
    "gateway.dashboard.aggregate",
    "redis",
    "asyncpg",
    "bpe_openai",
    "httpx2",  # genai-prices' price-update client (gateway.price_table)
    "genai_prices.update_prices",
    # `gateway conformance`: only its argument parser (gateway.conformance.arguments) is read
    "gateway.conformance.command",
    "gateway.conformance.run",
    "gateway.conformance.upstream",
    # `gateway bench`, a tool beside the product: not even its argument parser
    "gateway_bench",
    "gateway_bench.arguments",
)

# What `gateway serve` does before it serves: its arguments, the startup report, the app.
BUILD_APP = """
import sys
import gateway.cli
from gateway.app import build_app
from gateway.settings import default_settings, parse_settings
from gateway.config_source import config_source
from gateway.startup import startup_report
gateway.cli.parse_args(["serve"])
settings = {settings}
list(startup_report(settings, config_source(None, {{}}), {{}}, settings.audit.store))
build_app(settings)
print("\\n".join(sorted(sys.modules)))
"""

BENCH_LIKE = """parse_settings({
    "providers": {
        "o": {"kind": "openai", "base_url": "http://127.0.0.1:9/v1", "api_key": "k"},
        "a": {"kind": "anthropic", "base_url": "http://127.0.0.1:9", "api_key": "k"},
        "r": {"kind": "openai_responses", "base_url": "http://127.0.0.1:9/v1", "api_key": "k"},
        "m": {"kind": "mock"},
    },
    "routes": [{"match": "*", "provider": "o"}],
    "audit": {"store": "sqlite:///:memory:"},
})"""


def imported_by_build_app(settings: str) -> set[str]:
    code = BUILD_APP.format(settings=settings)
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env={}
    )
    assert result.returncode == 0, result.stderr
    return set(result.stdout.split())


def heavy(modules: set[str]) -> list[str]:
    return sorted(
        name
        for name in modules
        if any(name == top or name.startswith(top + ".") for top in NEVER_BY_DEFAULT)
    )


@pytest.mark.parametrize("settings", ["default_settings({})", BENCH_LIKE], ids=["default", "http"])
def test_serving_without_bedrock_or_vertex_imports_neither(settings: str) -> None:
    assert heavy(imported_by_build_app(settings)) == []


# The command line's other commands and `--help` read their arguments only: not the settings
# (pydantic's models, the providers' pools and with them aiohttp's client), not the serving path.
SERVING_PATH = (
    "aiohttp",
    "providers",
    "gateway.settings",
    "gateway.serving",
    "gateway.supervisor",
    "gateway.startup",
    "gateway.app",
    "gateway.access.control",
)
PARSE_ONLY = """
import sys
import gateway.cli
gateway.cli.parse_args({argv})
print("\\n".join(sorted(sys.modules)))
"""


@pytest.mark.parametrize(
    "argv", [["keys", "new"], ["audit"], ["conformance", "http://127.0.0.1:9"]]
)
def test_the_command_line_reads_arguments_without_the_serving_path(argv: list[str]) -> None:
    code = PARSE_ONLY.format(argv=argv)
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, env={}
    )
    assert result.returncode == 0, result.stderr
    modules = set(result.stdout.split())
    assert "gateway.cli" in modules
    loaded = [m for m in modules if any(m == t or m.startswith(t + ".") for t in SERVING_PATH)]
    assert loaded == []


def test_a_postgresql_trail_does_not_load_sqlite() -> None:
    postgres = """parse_settings({
        "providers": {"m": {"kind": "mock"}},
        "routes": [{"match": "*", "provider": "m"}],
        "audit": {"store": "postgresql://gw@127.0.0.1:9/audit"},
    })"""
    modules = imported_by_build_app(postgres)
    assert "sqlite3" not in modules and "_sqlite3" not in modules


def test_each_kind_imports_its_module_when_built() -> None:
    bedrock = """parse_settings({
        "providers": {"b": {"kind": "bedrock", "region": "eu-west-1", "api_key": "k"}},
        "routes": [{"match": "*", "provider": "b"}],
        "audit": {"store": "sqlite:///:memory:"},
    })"""
    modules = imported_by_build_app(bedrock)
    assert {"providers.bedrock", "botocore"} <= modules
    assert "gateway.formats.aws_eventstream" in modules  # its framing: not read inside the loop
    assert "google.auth" not in modules


def options(kind: str) -> dict[str, Any]:
    needed = {
        "vertex": {"project": "p", "region": "us-east5"},
        "bedrock": {"region": "us-east-1"},
        "azure_openai": {"base_url": "https://r.openai.azure.com", "api_version": "v1"},
        "azure_openai_responses": {"base_url": "https://r.openai.azure.com", "api_version": "v1"},
    }
    return {"kind": kind, "api_key": "k", **needed.get(kind, {})}


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_a_kind_row_names_the_wire_its_provider_speaks(kind: str) -> None:
    settings = parse_settings({"providers": {"p": options(kind)}})
    provider = build_provider("p", settings.providers["p"], {})
    assert provider.wire == KINDS[kind].wire


def test_a_missing_package_of_a_configured_kind_is_a_configuration_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(registry, "_installed", lambda module: module != "botocore")
    with pytest.raises(ConfigError) as caught:
        parse_settings({"providers": {"b": options("bedrock")}})
    assert 'kind "bedrock" needs botocore: pip install botocore' in str(caught.value)
    parse_settings({"providers": {"o": options("openai")}})  # other kinds do not need it


def test_missing_packages_are_found_without_importing_them() -> None:
    kind = ProviderKind(
        "k",
        "openai",
        KINDS["openai"].build,
        packages=(("json", "json"), ("no_such_module_x.y", "no-such-x"), ("nosuchmod_z", "z")),
    )
    assert kind.missing_packages() == ["no-such-x", "z"]


PRICES_LATER = """
import sys
from gateway.cost import Pricer, Tokens
assert "genai_prices" not in sys.modules and "httpx2" not in sys.modules
import genai_prices
from genai_prices import Usage, calc_price
assert genai_prices.types is sys.modules["genai_prices.types"]
assert genai_prices.data_snapshot.get_snapshot() is sys.modules["gateway.price_table"].whole_table()
cost = Pricer({"o": "openai"}).cost(Tokens(1500, 200, 1000, None), "o", "gpt-4o")
usage = Usage(input_tokens=1500, output_tokens=200, cache_read_tokens=1000)
table = calc_price(usage, "gpt-4o", provider_id="openai").total_price
assert cost is not None and cost.usd == float(table)
"""


def test_genai_prices_imported_later_is_the_same_table() -> None:
    """The table is imported without genai_prices' `__init__` (gateway.price_table); importing the
    package afterwards runs it and shares the same submodules."""
    result = subprocess.run(
        [sys.executable, "-c", PRICES_LATER], capture_output=True, text=True, timeout=120, env={}
    )
    assert result.returncode == 0, result.stderr


def fake_package(root: Path, name: str, submodules: dict[str, str]) -> None:
    package = root / name
    package.mkdir()
    (package / "__init__.py").write_text("from . import a\nINIT_RAN = True\n")
    for module, text in submodules.items():
        (package / f"{module}.py").write_text(text)


@pytest.fixture
def sandbox(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    monkeypatch.syspath_prepend(str(tmp_path))
    yield tmp_path
    for name in [n for n in sys.modules if n.startswith("fakeprices")]:
        del sys.modules[name]


def test_submodules_are_imported_without_the_init(sandbox: Path) -> None:
    fake_package(sandbox, "fakeprices1", {"a": "A = 1\n", "b": "from .a import A\n", "c": ""})
    import_submodules("fakeprices1", frozenset({"c"}))
    assert "fakeprices1" not in sys.modules
    assert {"fakeprices1.a", "fakeprices1.b"} <= set(sys.modules)
    assert "fakeprices1.c" not in sys.modules
    import fakeprices1  # type: ignore[import-not-found]

    assert fakeprices1.INIT_RAN and fakeprices1.a is sys.modules["fakeprices1.a"]


@pytest.mark.parametrize(
    "needs", ["from fakeprices2 import INIT_RAN\n", "import fakeprices2\nfakeprices2.INIT_RAN\n"]
)
def test_a_submodule_that_needs_the_init_gets_it(sandbox: Path, needs: str) -> None:
    fake_package(sandbox, "fakeprices2", {"a": "A = 1\n", "b": needs})
    import_submodules("fakeprices2")
    assert sys.modules["fakeprices2"].INIT_RAN
    assert sys.modules["fakeprices2"].a is sys.modules["fakeprices2.a"]
    assert "fakeprices2.b" in sys.modules


# A supervisor (`gateway serve --workers N`) reads and validates the settings, writes the startup
# report, opens the stores and starts workers: none of it needs the HTTP stack (aiohttp, with the
# TLS trust store it loads as it is imported), the app, or the price table, which each worker
# imports for itself. Its workers start importing while it does this, on the same cores.
SUPERVISOR_IMPORTS = """
import sys
import gateway.cli
from gateway.config_source import config_source
from gateway.settings import parse_settings
from gateway.startup import startup_report
import gateway.supervisor
gateway.cli.parse_args(["serve", "--workers", "2"])
settings = {settings}
list(startup_report(settings, config_source(None, {{}}), {{}}, settings.audit.store))
print("\\n".join(sorted(sys.modules)))
"""
NOT_IN_THE_SUPERVISOR = ("aiohttp", "providers.http", "gateway.app", "genai_prices")


def test_the_supervisor_imports_no_http_stack_app_or_price_table() -> None:
    code = SUPERVISOR_IMPORTS.format(settings=BENCH_LIKE)
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env={}
    )
    assert result.returncode == 0, result.stderr
    modules = set(result.stdout.split())
    assert "gateway.supervisor" in modules and "gateway.settings" in modules
    loaded = [
        m for m in modules if any(m == t or m.startswith(t + ".") for t in NOT_IN_THE_SUPERVISOR)
    ]
    assert loaded == []


def test_the_audit_parser_groups_by_what_the_report_can() -> None:
    from gateway.audit.arguments import GROUP_BY
    from gateway.audit.report import GROUP_BY as REPORT_GROUP_BY

    assert GROUP_BY == REPORT_GROUP_BY
