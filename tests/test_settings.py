from __future__ import annotations

import re
from pathlib import Path

import pydantic
import pytest

from gateway import settings as settings_module
from gateway.settings import (
    AdminSettings,
    AgentGuardSettings,
    AuditSettings,
    ConfigError,
    KeySettings,
    LimitsSettings,
    ProviderSettings,
    ResolvedRoute,
    ResolvedTarget,
    ResponsesSettings,
    RouteSettings,
    ServerSettings,
    Settings,
    StateSettings,
    TruncationSettings,
    default_settings,
    load_settings,
)

EXAMPLE = Path(__file__).resolve().parent.parent / "config" / "gateway.example.toml"

MINIMAL = """
[providers.mock]
kind = "mock"
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "gw.toml"
    path.write_text(text, encoding="utf-8")
    return path


def config_error(tmp_path: Path, text: str) -> tuple[Path, str]:
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as info:
        load_settings(path, env={})
    return path, str(info.value)


def test_example_file_loads_with_documented_values() -> None:
    s = load_settings(EXAMPLE, env={})

    assert s.server == ServerSettings(host="127.0.0.1", port=8080)
    assert list(s.providers) == ["openai", "anthropic", "local", "mock"]
    openai, anthropic, local, mock = (s.providers[n] for n in s.providers)
    assert (openai.kind, openai.base_url, openai.api_key_env) == (
        "openai",
        "https://api.openai.com/v1",
        "OPENAI_API_KEY",
    )
    assert (anthropic.kind, anthropic.base_url, anthropic.api_key_env) == (
        "anthropic",
        "https://api.anthropic.com",
        "ANTHROPIC_API_KEY",
    )
    assert (openai.first_byte_timeout, openai.idle_timeout, openai.total_timeout) == (
        600.0,
        300.0,
        1800.0,
    )
    assert openai.connect_timeout == 10.0
    assert openai.retry.attempts == 3 and 529 in openai.retry.on_status
    assert (local.kind, local.base_url, local.resolve_api_key({})) == (
        "openai",
        "http://127.0.0.1:11434/v1",
        "ollama",
    )
    assert (local.first_byte_timeout, local.idle_timeout, local.connect_timeout) == (
        300.0,
        300.0,
        2.0,
    )
    assert (mock.kind, mock.base_url) == ("mock", None)
    assert [(r.match, r.provider, r.upstream_model) for r in s.routes] == [
        ("mock*", "mock", None),
        ("fast", "local", "llama3.1:8b"),
        ("*:*", "local", None),
        ("claude-haiku-*", "anthropic", "claude-haiku-4-5-20251001"),
        ("claude-*", "anthropic", None),
        ("smart", None, None),
        ("gpt-*", "openai", None),
        ("o[134]*", "openai", None),
    ]
    smart = s.resolve_route("smart")
    assert smart is not None
    assert [(t.provider_name, t.upstream_model, t.weight) for t in smart.targets] == [
        ("anthropic", "claude-sonnet-4-5", 3.0),
        ("openai", "gpt-4.1", 1.0),
        ("local", "qwen2.5-coder:7b", 0.0),
    ]
    assert s.retry_for(smart).attempts == 3 and s.retry_for(smart).deadline == 30.0
    assert (s.circuit.failures, s.circuit.cooldown) == (5, 30.0)
    assert s.truncation == TruncationSettings(tool_calls="withhold")
    # The example leaves `store` out: the per-user data directory (gateway.audit.location).
    default = f"sqlite:///{Path.home()}/.local/share/llm-gateway/audit.db"
    assert s.audit == AuditSettings(store=default, log_content=False)


@pytest.mark.parametrize(
    "model",
    [
        ServerSettings,
        ProviderSettings,
        RouteSettings,
        TruncationSettings,
        AuditSettings,
        AgentGuardSettings,
        ResponsesSettings,
        KeySettings,
        AdminSettings,
        LimitsSettings,
        StateSettings,
        Settings,
    ],
)
def test_example_file_shows_every_key(model: type[pydantic.BaseModel]) -> None:
    text = EXAMPLE.read_text(encoding="utf-8")
    for key in model.model_fields:
        assert re.search(rf"^\[*{key}\b|^{key} =|^#\s+{key}\b", text, re.M), key


@pytest.mark.parametrize("model", ["claude-x", "gpt-4o", "mock-text", "o3-mini", "chatgpt-4o"])
def test_default_without_keys_serves_everything_from_mock(model: str) -> None:
    s = default_settings({})

    assert list(s.providers) == ["mock"]
    route = s.resolve_route(model)
    assert route is not None
    assert (route.provider_name, route.upstream_model) == ("mock", model)
    assert (s.server.host, s.server.port) == ("127.0.0.1", 8080)


@pytest.mark.parametrize(
    ("model", "provider"),
    [("claude-x", "anthropic"), ("gpt-4o", "openai"), ("o1", "openai"), ("mock-text", "mock")],
)
def test_default_with_keys_routes_to_the_real_providers(model: str, provider: str) -> None:
    s = default_settings({"OPENAI_API_KEY": "sk-o", "ANTHROPIC_API_KEY": "sk-a"})

    assert sorted(s.providers) == ["anthropic", "mock", "openai"]
    route = s.resolve_route(model)
    assert route is not None and route.provider_name == provider
    assert s.providers["openai"].api_key_env == "OPENAI_API_KEY"
    assert s.providers["anthropic"].api_key_env == "ANTHROPIC_API_KEY"
    assert s.providers["anthropic"].resolve_api_key({"ANTHROPIC_API_KEY": "sk-a"}) == "sk-a"


def test_default_with_one_key_routes_only_that_provider_upstream() -> None:
    s = default_settings({"ANTHROPIC_API_KEY": "sk-a", "OPENAI_API_KEY": ""})

    assert sorted(s.providers) == ["anthropic", "mock"]
    claude, gpt = s.resolve_route("claude-x"), s.resolve_route("gpt-4o")
    assert claude is not None and claude.provider_name == "anthropic"
    assert gpt is not None and gpt.provider_name == "mock"
    assert s.resolve_route("llama3") is None


def test_path_none_reads_gateway_config_else_builtin_default(tmp_path: Path) -> None:
    path = write(tmp_path, MINIMAL + "[server]\nport = 9999\n")

    assert load_settings(None, env={"GATEWAY_CONFIG": str(path)}).server.port == 9999
    assert load_settings(None, env={}) == default_settings({})


def test_first_matching_route_wins(tmp_path: Path) -> None:
    s = load_settings(
        write(
            tmp_path,
            MINIMAL
            + """
[providers.other]
kind = "openai"

[[routes]]
match = "gpt-4o-mini*"
provider = "mock"

[[routes]]
match = "gpt-*"
provider = "other"

[[routes]]
match = "gpt-4o"
provider = "mock"

[[routes]]
match = "*"
provider = "mock"
""",
        ),
        env={},
    )

    def where(model: str) -> tuple[int, str] | None:
        route = s.resolve_route(model)
        return None if route is None else (route.route_index, route.provider_name)

    assert where("gpt-4o-mini-2024") == (0, "mock")
    assert where("gpt-4o") == (1, "other")  # route 2 is shadowed by route 1
    assert where("GPT-4o") == (3, "mock")  # matching is case-sensitive
    assert where("") == (3, "mock")


TWO_ROUTES = (
    MINIMAL
    + """
[providers.other]
kind = "openai"

[[routes]]
match = "gpt-*"
provider = "other"

[[routes]]
match = "*"
provider = "mock"
"""
)


def test_a_kept_route_is_the_one_matching_finds(tmp_path: Path) -> None:
    s = load_settings(write(tmp_path, TWO_ROUTES), env={})
    first = s.resolve_route("gpt-4o")
    assert first is not None and first.provider_name == "other"
    assert s.resolve_route("gpt-4o") is first  # kept: not matched and built again
    other = s.resolve_route("llama3")
    assert other is not None and (other.route_index, other.upstream_model) == (1, "llama3")


def test_a_copy_with_other_routes_does_not_answer_from_the_old_ones(tmp_path: Path) -> None:
    s = load_settings(write(tmp_path, TWO_ROUTES), env={})
    assert s.resolve_route("gpt-4o").provider_name == "other"  # type: ignore[union-attr]
    swapped = s.model_copy(update={"routes": tuple(reversed(s.routes))})
    route = swapped.resolve_route("gpt-4o")
    assert route is not None and (route.route_index, route.provider_name) == (0, "mock")
    assert s.resolve_route("gpt-4o").provider_name == "other"  # type: ignore[union-attr]


def test_kept_routes_are_bounded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(settings_module, "ROUTE_CACHE_SIZE", 8)
    s = load_settings(write(tmp_path, TWO_ROUTES), env={})
    for n in range(50):  # a client making up names
        assert s.resolve_route(f"made-up-{n}") is not None
    _, found = s._resolved
    assert 0 < len(found) <= 8
    assert s.resolve_route("gpt-4o").provider_name == "other"  # type: ignore[union-attr]


def test_upstream_model_renames_and_falls_back_to_client_name(tmp_path: Path) -> None:
    s = load_settings(
        write(
            tmp_path,
            MINIMAL
            + """
[[routes]]
match = "fast"
provider = "mock"
upstream_model = "mock-fast-v2"

[[routes]]
match = "mock-*"
provider = "mock"
""",
        ),
        env={},
    )

    assert s.resolve_route("fast") == ResolvedRoute(
        route_index=0,
        route=s.routes[0],
        targets=(ResolvedTarget("mock/mock-fast-v2", "mock", "mock-fast-v2", 1.0),),
    )
    route = s.resolve_route("mock-text")
    assert route is not None
    assert (route.route_index, route.upstream_model) == (1, "mock-text")
    assert s.resolve_route("slow") is None


def test_unknown_top_level_key_names_key_and_file(tmp_path: Path) -> None:
    path, message = config_error(tmp_path, MINIMAL + "[serverr]\nport = 1\n")

    assert message == f"config error in {path}: serverr: unknown key"


def test_unknown_nested_keys_name_dotted_path(tmp_path: Path) -> None:
    path, message = config_error(
        tmp_path,
        """
[providers.openai]
kindd = "openai"

[[routes]]
match = "a"
provider = "openai"

[[routes]]
match = "b"
provider = "openai"
upstream = "c"
""",
    )

    assert message.splitlines() == [
        f"config error in {path}: providers.openai.kind: required key missing",
        f"config error in {path}: providers.openai.kindd: unknown key",
        f"config error in {path}: routes[1].upstream: unknown key",
    ]


def test_route_naming_missing_provider_is_rejected_with_index(tmp_path: Path) -> None:
    path, message = config_error(
        tmp_path,
        MINIMAL
        + """
[providers.openai]
kind = "openai"

[[routes]]
match = "a"
provider = "mock"

[[routes]]
match = "b"
provider = "foo"
""",
    )

    assert message == (
        f'config error in {path}: routes[1].provider: no provider named "foo" '
        "(configured: mock, openai)"
    )


def test_both_api_key_and_api_key_env_are_rejected(tmp_path: Path) -> None:
    path, message = config_error(
        tmp_path,
        """
[providers."my.local"]
kind = "openai"
api_key = "sk-literal-secret"
api_key_env = "OPENAI_API_KEY"
""",
    )

    assert message == (
        f'config error in {path}: providers."my.local": give api_key or api_key_env, not both'
    )
    assert "sk-literal-secret" not in message


OPENAI_X = '[providers.x]\nkind = "openai"\n'


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ('[server]\nport = "8080"', "server.port: must be a valid integer"),
        ("[server]\nport = 65536", "server.port: must be less than or equal to 65535"),
        ("[server]\nport = true", "server.port: must be a valid integer"),
        ('[server]\nhost = ""', "server.host: must not be empty"),
        (
            '[providers.x]\nkind = "gemeni"',
            'providers.x.kind: unknown provider kind "gemeni" '
            "(known: anthropic, azure_openai, azure_openai_responses, bedrock, gemini, mock, "
            "openai, openai_responses, vertex)",
        ),
        (OPENAI_X + "timeout = 0", "providers.x.timeout: must be greater than 0"),
        (
            OPENAI_X + "connect_timeout = nan",
            "providers.x.connect_timeout: must be a finite number",
        ),
        (
            OPENAI_X + 'base_url = "localhost:1"',
            "providers.x.base_url: must be an http:// or https:// URL",
        ),
        (
            OPENAI_X + 'base_url = "https://user:12345@example.test/v1"',
            "providers.x.base_url: must not hold credentials (give the key as api_key_env)",
        ),
        (OPENAI_X + "api_key = 12345", "providers.x.api_key: must be a valid string"),
        (
            '[truncation]\ntool_calls = "drop"',
            "truncation.tool_calls: must be 'withhold' or 'pass'",
        ),
        ('[audit]\nlog_content = "yes"', "audit.log_content: must be a valid boolean"),
        ("routes = 1", "routes: must be an array of tables"),
        ('[[routes]]\nmatch = "a"', "routes[0]: give provider or targets"),
    ],
)
def test_wrong_values_name_key_and_rule(tmp_path: Path, text: str, problem: str) -> None:
    path, message = config_error(tmp_path, text)

    assert message == f"config error in {path}: {problem}"
    assert "12345" not in message and "pydantic" not in message


def test_bad_toml_syntax_names_file_and_line(tmp_path: Path) -> None:
    path, message = config_error(tmp_path, '[server]\nhost = "127.0.0.1"\nport 8080\n')

    assert message.startswith(f"config error in {path}: invalid TOML: ")
    assert "line 3" in message


def test_missing_file_is_named(tmp_path: Path) -> None:
    missing = tmp_path / "nope.toml"
    with pytest.raises(ConfigError) as info:
        load_settings(str(missing), env={})

    assert str(info.value) == f"config error in {missing}: file not found"


def test_missing_file_from_gateway_config_is_named(tmp_path: Path) -> None:
    missing = str(tmp_path / "gone.toml")
    with pytest.raises(ConfigError, match=re.escape(f"config error in {missing}: file not found")):
        load_settings(None, env={"GATEWAY_CONFIG": missing})


def test_api_key_resolution() -> None:
    from_env = ProviderSettings(kind="openai", api_key_env="MY_KEY")
    literal = ProviderSettings(kind="anthropic", api_key="sk-lit")  # type: ignore[arg-type]
    neither = ProviderSettings(kind="openai")

    assert from_env.resolve_api_key({"MY_KEY": "sk-env", "OPENAI_API_KEY": "x"}) == "sk-env"
    assert from_env.resolve_api_key({}) is None
    assert from_env.resolve_api_key({"MY_KEY": ""}) is None
    assert literal.resolve_api_key({"ANTHROPIC_API_KEY": "other"}) == "sk-lit"
    assert neither.resolve_api_key({"OPENAI_API_KEY": "x"}) is None


def test_provider_defaults_per_kind_and_base_url_drops_trailing_slash() -> None:
    openai = ProviderSettings(kind="openai")
    assert (openai.first_byte_timeout, openai.idle_timeout, openai.connect_timeout) == (
        600.0,
        300.0,
        10.0,
    )
    assert (openai.api_key, openai.api_key_env) == (None, None)
    assert openai.base_url == "https://api.openai.com/v1"
    assert ProviderSettings(kind="anthropic").base_url == "https://api.anthropic.com"
    assert ProviderSettings(kind="mock").base_url is None
    local = ProviderSettings(kind="openai", base_url="http://127.0.0.1:8000/v1/")
    assert local.base_url == "http://127.0.0.1:8000/v1"


def test_secret_never_printed(tmp_path: Path) -> None:
    s = load_settings(
        write(tmp_path, '[providers.x]\nkind = "openai"\napi_key = "sk-topsecret"\n'), env={}
    )

    assert "sk-topsecret" not in repr(s)
    assert "sk-topsecret" not in str(s)
    assert "sk-topsecret" not in s.model_dump_json()
    assert s.providers["x"].resolve_api_key({}) == "sk-topsecret"


def test_settings_are_frozen() -> None:
    s = default_settings({})

    with pytest.raises(pydantic.ValidationError):
        s.server.port = 1  # type: ignore[misc]
    assert s.server.port == 8080


def test_model_names_lists_literal_patterns_and_routable_upstream_names(tmp_path: Path) -> None:
    s = load_settings(
        write(
            tmp_path,
            MINIMAL
            + """
[[routes]]
match = "fast"
provider = "mock"
upstream_model = "mock-fast"

[[routes]]
match = "mock-*"
provider = "mock"
upstream_model = "mock-big"

[[routes]]
match = "alias"
provider = "mock"
upstream_model = "not-routable"

[[routes]]
match = "fast"
provider = "mock"

[[routes]]
match = "v[12]"
provider = "mock"
""",
        ),
        env={},
    )

    assert s.model_names() == ["fast", "mock-fast", "mock-big", "alias"]
    assert default_settings({}).model_names() == []


def test_readme_providers_example_loads():
    """docs/providers.md's configuration example of every provider kind is a configuration."""
    import re
    import tomllib

    from gateway.settings import parse_settings

    readme = (Path(__file__).resolve().parents[1] / "docs" / "providers.md").read_text()
    block = next(
        b for b in re.findall(r"```toml\n(.*?)```", readme, re.S) if "[providers.gemini]" in b
    )
    settings = parse_settings(tomllib.loads(block))
    kinds = {p.kind for p in settings.providers.values()}
    assert kinds >= {"gemini", "vertex", "bedrock", "azure_openai", "openai"}
    assert settings.resolve_route("gpt-4o").upstream_model == "my-gpt-4o-deployment"
