"""`gateway serve` imports what its configured providers and its command need, no more.

botocore (Bedrock), google-auth with requests and cryptography (Vertex AI) and rich (`gateway
audit`'s tables) add some 25 MB of resident memory together; a provider kind's module is
imported when a provider of that kind is built. A subprocess builds the app and lists
`sys.modules`, so the savings cannot regress silently. A missing package of a configured kind
is a configuration error naming it.
"""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import pytest

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
    "redis",
    "asyncpg",
    "bpe_openai",
)

BUILD_APP = """
import sys
import gateway.cli
from gateway.app import build_app
from gateway.settings import default_settings, parse_settings
settings = {settings}
build_app(settings)
gateway.cli.parse_args(["serve"])
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


def test_each_kind_imports_its_module_when_built() -> None:
    bedrock = """parse_settings({
        "providers": {"b": {"kind": "bedrock", "region": "eu-west-1", "api_key": "k"}},
        "routes": [{"match": "*", "provider": "b"}],
        "audit": {"store": "sqlite:///:memory:"},
    })"""
    modules = imported_by_build_app(bedrock)
    assert {"providers.bedrock", "botocore"} <= modules
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
