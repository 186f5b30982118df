"""The deployment in the repository: Dockerfile, compose.yaml, deploy/ (gateway config,
Prometheus, OpenTelemetry collector, Grafana provisioning and dashboard) and deploy/kubernetes/.

No Docker here: each piece is checked against the real part it talks to where one can run in a
test. The gateway configurations load with the gateway's own settings loader (an unknown key
fails); the Dockerfile's healthcheck command runs against a served gateway; every SQL query of the
Grafana dashboard runs, its macros and template variable expanded as Grafana's PostgreSQL data
source expands them, against a real PostgreSQL holding records written by the gateway's own
PostgresStore, and its figures equal what `gateway audit` computes from the same records; every
metric a Prometheus panel names is in the /metrics of a gateway running the compose config,
scraped with the admin key as deploy/prometheus/prometheus.yml does. PostgreSQL comes from
GATEWAY_TEST_POSTGRES_URL (tests.audit_util: skipped without it, failing under CI=true).
"""

from __future__ import annotations

import asyncio
import json
import math
import os
import re
import shlex
import shutil
import subprocess
import sys
import tomllib
from collections import Counter, defaultdict
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import aiohttp
import asyncpg
import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from gateway.app import build_app
from gateway.audit.location import default_store_url
from gateway.audit.record import AuditRecord
from gateway.audit.report import (
    group_key,
    percentile,
    stop_reason_of,
    summarize,
    truncated_list,
)
from gateway.settings import Settings, load_settings, parse_settings
from tests.audit_util import open_backend
from tests.conftest import free_port
from tests.test_audit_e2e import Servers, wait_idle

ROOT = Path(__file__).resolve().parent.parent
DEPLOY = ROOT / "deploy"
COMPOSE = ROOT / "compose.yaml"
GATEWAY_TOML = DEPLOY / "gateway" / "gateway.toml"
DASHBOARD = DEPLOY / "grafana" / "dashboards" / "llm-gateway.json"
KUBERNETES = DEPLOY / "kubernetes"
SERVICES = {
    "gateway",
    "loadbalancer",
    "postgres",
    "redis",
    "otel-collector",
    "prometheus",
    "grafana",
}
# The secrets the configs name, with test values (never real keys).
ENV = {
    "GATEWAY_KEY": "test-gateway-key-0001",
    "GATEWAY_ADMIN_KEY": "test-admin-key-0002",
}


@pytest.fixture
async def servers() -> AsyncIterator[Servers]:
    s = Servers()
    yield s
    await s.close()


def load_yaml(path: Path) -> Any:
    return yaml.safe_load(path.read_text())


def compose() -> dict[str, Any]:
    return load_yaml(COMPOSE)


def dashboard() -> dict[str, Any]:
    return json.loads(DASHBOARD.read_text())


# --- Dockerfile ---------------------------------------------------------------------------------


def dockerfile_stages() -> list[list[tuple[str, str]]]:
    """The Dockerfile as stages of (INSTRUCTION, arguments), continuations joined, comments out;
    instructions before the first FROM (global ARGs) form stage 0."""
    instructions: list[tuple[str, str]] = []
    pending = ""
    for line in (ROOT / "Dockerfile").read_text().splitlines():
        if line.lstrip().startswith("#"):
            continue
        pending += line.rstrip()
        if pending.endswith("\\"):
            pending = pending[:-1] + " "
            continue
        if pending.strip():
            keyword, _, rest = pending.strip().partition(" ")
            instructions.append((keyword.upper(), rest.strip()))
        pending = ""
    stages: list[list[tuple[str, str]]] = [[]]
    for keyword, rest in instructions:
        if keyword == "FROM":
            stages.append([])
        stages[-1].append((keyword, rest))
    return stages


def instruction(stage: list[tuple[str, str]], keyword: str) -> list[str]:
    return [rest for kw, rest in stage if kw == keyword]


def image_env(stage: list[tuple[str, str]]) -> dict[str, str]:
    env: dict[str, str] = {}
    for rest in instruction(stage, "ENV"):
        for pair in shlex.split(rest):
            name, _, value = pair.partition("=")
            env[name] = value
    return env


def healthcheck_command() -> list[str]:
    final = dockerfile_stages()[-1]
    (check,) = instruction(final, "HEALTHCHECK")
    _, _, command = check.partition(" CMD ")
    return json.loads(command)


def test_dockerfile_is_multi_stage_slim_non_root_with_healthcheck_and_data_volume():
    stages = dockerfile_stages()
    (global_args,) = [rest for kw, rest in stages[0] if kw == "ARG"]
    assert global_args == "PYTHON_IMAGE=python:3.11-slim"
    builder, final = stages[1], stages[-1]
    assert len(stages) == 3  # the global ARG, the builder, the final stage
    assert instruction(builder, "FROM") == ["${PYTHON_IMAGE} AS builder"]
    assert instruction(final, "FROM") == ["${PYTHON_IMAGE}"]
    # The builder makes a wheel and a venv with the [otel] extra; only the venv moves on.
    (build,) = instruction(builder, "RUN")
    assert "pip wheel" in build and "python -m venv /opt/venv" in build
    assert "--no-cache-dir" in build and "[otel]" in build
    assert instruction(final, "COPY") == ["--from=builder /opt/venv /opt/venv"]
    assert not any("apt-get" in run or "pip install" in run for run in instruction(final, "RUN"))
    # A fixed non-root uid, and nothing runs as root after it.
    (user,) = instruction(final, "USER")
    uid = user.split(":")[0]
    assert uid.isdigit() and int(uid) >= 10000
    kinds = [kw for kw, _ in final]
    assert kinds.index("USER") > max(i for i, kw in enumerate(kinds) if kw in ("RUN", "COPY"))
    # The audit trail's default place is on the volume: no [audit] store means
    # $XDG_DATA_HOME/llm-gateway/audit.db.
    env = image_env(final)
    assert json.loads(instruction(final, "VOLUME")[0]) == ["/data"]
    assert default_store_url(env) == "sqlite:////data/llm-gateway/audit.db"
    assert env["PATH"].startswith("/opt/venv/bin:")
    # Listens on every interface of the container, on 8080, and checks /healthz.
    assert instruction(final, "EXPOSE") == ["8080"]
    assert json.loads(instruction(final, "ENTRYPOINT")[0]) == ["gateway"]
    assert json.loads(instruction(final, "CMD")[0]) == [
        "serve",
        "--host",
        "0.0.0.0",
        "--port",
        "8080",
    ]
    command = healthcheck_command()
    assert command[:2] == ["python", "-c"] and "http://127.0.0.1:8080/healthz" in command[2]
    assert "timeout=" in command[2]
    options = instruction(final, "HEALTHCHECK")[0].split(" CMD ")[0]
    assert "--timeout=" in options and "--interval=" in options


def test_the_otel_extra_the_image_installs_exists():
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]
    assert any(dep.startswith("opentelemetry-sdk") for dep in extras["otel"])


def dockerignored(path: str) -> bool:
    """Whether the build context leaves `path` out, as Docker decides: the last pattern of
    .dockerignore that matches the path or one of its parents wins (`!` includes again)."""
    patterns = [
        line.strip()
        for line in (ROOT / ".dockerignore").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    parts = path.split("/")
    candidates = ["/".join(parts[: i + 1]) for i in range(len(parts))]
    ignored = False
    for pattern in patterns:
        glob = pattern.removeprefix("!").rstrip("/")
        if any(fnmatchcase(candidate, glob) for candidate in candidates):
            ignored = not pattern.startswith("!")
    return ignored


def test_dockerignore_sends_only_the_sources_the_image_is_built_from():
    builder = dockerfile_stages()[1]
    sources = {rest.split()[0] for rest in instruction(builder, "COPY")}
    sources |= {s for rest in instruction(builder, "COPY") for s in rest.split()[:-1]}
    for source in sources:
        assert not dockerignored(source.rstrip("/")), source
    for kept in ("gateway/app.py", "providers/mock.py", "pyproject.toml", "README.md"):
        assert not dockerignored(kept), kept
    for left_out in (
        ".venv",
        ".venv/bin/python",
        ".git",
        "tests",
        "tests/test_deploy.py",
        ".env",
        "deploy",
        "config",
        "gateway/__pycache__",
        "gateway/__pycache__/app.cpython-311.pyc",
        "gateway-audit.db",
        ".pytest_cache",
    ):
        assert dockerignored(left_out), left_out


async def test_the_healthcheck_command_passes_on_a_served_gateway_and_fails_without_one(
    tmp_path, servers
):
    """The HEALTHCHECK's own command, pointed at a gateway served here (its port instead of
    8080): exit 0; once the gateway is gone: non-zero, within its timeout."""
    settings = parse_settings(
        {
            "providers": {"mock": {"kind": "mock"}},
            "routes": [{"match": "mock*", "provider": "mock"}],
            "audit": {"store": f"sqlite:///{tmp_path / 'audit.db'}"},
        },
        env={},
    )
    runner, base = await servers.start(build_app(settings, env={}))
    _, code = healthcheck_command()[1:3]
    here = code.replace("http://127.0.0.1:8080", base)
    assert here != code

    async def run() -> int:
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-c",
            here,
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.DEVNULL,
        )
        return await asyncio.wait_for(process.wait(), timeout=20)

    assert await run() == 0
    await servers.stop(runner)
    assert await run() != 0


# --- compose.yaml -------------------------------------------------------------------------------


def required_variables(text: str) -> set[str]:
    """Variables compose.yaml interpolates as required (`${NAME:?message}`)."""
    return set(re.findall(r"\$\{([A-Z0-9_]+):\?", text))


def env_example() -> dict[str, str]:
    values: dict[str, str] = {}
    for line in (DEPLOY / ".env.example").read_text().splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            name, _, value = line.partition("=")
            values[name] = value
    return values


def bind_mounts(service: dict[str, Any]) -> dict[str, str]:
    """Local path (relative to the repository) -> path in the container."""
    mounts: dict[str, str] = {}
    for volume in service.get("volumes", []):
        source, target = volume.split(":")[:2]
        if source.startswith("./"):
            mounts[source[2:]] = target
    return mounts


def test_compose_runs_the_whole_stack_with_healthchecks_and_ordered_starts():
    spec = compose()
    services = spec["services"]
    assert set(services) == SERVICES
    gateway = services["gateway"]
    assert gateway["build"] == {"context": ".", "dockerfile": "Dockerfile"}
    # Every service that can run a healthcheck has one; the collector's image has no shell.
    for name, service in services.items():
        if name != "otel-collector":
            test = service["healthcheck"]["test"]
            assert test[0] in ("CMD", "CMD-SHELL"), name
    assert gateway["healthcheck"]["test"] == ["CMD", *healthcheck_command()]
    healthy = {"condition": "service_healthy"}
    assert gateway["depends_on"] == {
        "postgres": healthy,
        "redis": healthy,
        # Span export never blocks nor fails a request: the gateway need not wait for it.
        "otel-collector": {"condition": "service_started"},
    }
    assert services["prometheus"]["depends_on"] == {"gateway": healthy}
    assert services["grafana"]["depends_on"] == {"postgres": healthy, "prometheus": healthy}
    # Named volumes are declared; every local file mounted exists.
    for name, service in services.items():
        for volume in service.get("volumes", []):
            source = volume.split(":")[0]
            if source.startswith("./"):
                assert (ROOT / source).exists(), (name, source)
            else:
                assert source in spec["volumes"], (name, source)
    assert "gateway-data:/data" in gateway["volumes"]
    assert "postgres-data:/var/lib/postgresql/data" in services["postgres"]["volumes"]
    # Published ports listen on loopback unless .env says otherwise; the data stores are not
    # published at all.
    published = {name: s.get("ports", []) for name, s in services.items()}
    assert not published["postgres"] and not published["redis"]
    # The replicas are reached through the load balancer only, which waits for them.
    assert not published["gateway"] and gateway["deploy"]["replicas"] == "${GATEWAY_REPLICAS:-3}"
    assert services["loadbalancer"]["depends_on"] == {"gateway": healthy}
    for name in ("loadbalancer", "grafana", "prometheus"):
        (port,) = published[name]
        loopback = r"\$\{[A-Z]+_BIND:-127\.0\.0\.1\}:\$\{[A-Z]+_PORT:-\d+\}:\d+"
        assert re.fullmatch(loopback, port), port


def test_compose_takes_every_secret_from_env_and_the_example_defines_them():
    text = COMPOSE.read_text()
    spec = compose()
    example = env_example()
    assert required_variables(text) <= set(example)
    for name, service in spec["services"].items():
        for var, value in (service.get("environment") or {}).items():
            if re.search(r"KEY|PASSWORD|SECRET|TOKEN", var):
                assert str(value).startswith("${"), (name, var)  # never a literal secret
    for var, value in example.items():
        if re.search(r"KEY|PASSWORD", var):
            assert value == "" or value.startswith("change-me"), var
    assert ".env" in (ROOT / ".gitignore").read_text().split()


def compose_gateway_env() -> dict[str, str]:
    """The gateway container's environment with each interpolated value filled in."""
    environment = compose()["services"]["gateway"]["environment"]
    return {var: f"test-{var.lower()}" for var in environment} | {
        "GATEWAY_CONFIG": environment["GATEWAY_CONFIG"]
    }


def test_compose_gateway_config_loads_and_names_the_stack_services():
    spec = compose()
    services = spec["services"]
    gateway = services["gateway"]
    mounts = bind_mounts(gateway)
    assert mounts["deploy/gateway/gateway.toml"] == gateway["environment"]["GATEWAY_CONFIG"]
    env = compose_gateway_env()
    settings = load_settings(GATEWAY_TOML, env=env)
    assert settings.server.host == "0.0.0.0" and settings.server.port == 8080
    # Every variable the config reads is one compose passes.
    named = {p.api_key_env for p in settings.providers.values() if p.api_key_env}
    named |= {k.key_env for k in settings.keys if k.key_env}
    named |= {settings.admin.key_env} if settings.admin.key_env else set()
    assert named <= set(gateway["environment"])
    assert settings.keys and settings.admin.configured
    # The audit trail is the postgres service, as its user and database; the password is
    # PGPASSWORD, the postgres service's own.
    store = urlsplit(settings.audit.store)
    postgres = services["postgres"]["environment"]
    assert store.scheme == "postgresql" and store.password is None
    assert (store.hostname, store.port) == ("postgres", 5432)
    assert store.username == postgres["POSTGRES_USER"]
    assert store.path == "/" + postgres["POSTGRES_DB"]
    assert gateway["environment"]["PGPASSWORD"] == postgres["POSTGRES_PASSWORD"]
    # Shared state in the redis service; spans to the collector's OTLP/HTTP receiver.
    assert settings.state.redis is not None
    redis = urlsplit(settings.state.redis)
    assert redis.hostname == "redis" and (redis.port or 6379) == 6379
    collector = load_yaml(DEPLOY / "otel-collector" / "config.yaml")
    receiver = collector["receivers"]["otlp"]["protocols"]["http"]["endpoint"]
    assert receiver == "0.0.0.0:4318"
    assert "otlp" in collector["service"]["pipelines"]["traces"]["receivers"]
    assert bind_mounts(services["otel-collector"]) == {
        "deploy/otel-collector/config.yaml": "/etc/otelcol-contrib/config.yaml"
    }
    telemetry = settings.telemetry
    assert telemetry.otlp_endpoint == "http://otel-collector:4318"
    assert telemetry.export is not None and telemetry.export.url.startswith(
        "http://otel-collector:4318/"
    )


def test_prometheus_scrapes_the_gateway_with_the_admin_key_secret():
    spec = compose()
    prometheus = spec["services"]["prometheus"]
    mounts = bind_mounts(prometheus)
    config_path = mounts["deploy/prometheus/prometheus.yml"]
    assert f"--config.file={config_path}" in prometheus["command"]
    config = load_yaml(DEPLOY / "prometheus" / "prometheus.yml")
    (job,) = [j for j in config["scrape_configs"] if j["job_name"] == "llm-gateway"]
    assert job["metrics_path"] == "/metrics"
    assert job["dns_sd_configs"] == [
        {"names": ["gateway"], "type": "A", "port": 8080, "refresh_interval": "30s"}
    ]
    # The bearer token file is the compose secret made from the variable [admin] names.
    auth = job["authorization"]
    assert auth["type"] == "Bearer"
    secret = auth["credentials_file"].removeprefix("/run/secrets/")
    assert secret in prometheus["secrets"]
    settings = load_settings(GATEWAY_TOML, env=compose_gateway_env())
    assert spec["secrets"][secret] == {"environment": settings.admin.key_env}


def test_grafana_provisioning_points_at_the_stack_and_the_dashboard():
    spec = compose()
    grafana = spec["services"]["grafana"]
    mounts = bind_mounts(grafana)
    assert mounts["deploy/grafana/provisioning"] == "/etc/grafana/provisioning"
    datasources = load_yaml(DEPLOY / "grafana/provisioning/datasources/datasources.yaml")
    by_uid = {d["uid"]: d for d in datasources["datasources"]}
    audit = by_uid["gateway-audit"]
    assert audit["type"] == "grafana-postgresql-datasource"
    assert audit["url"] == "postgres:5432"
    assert (
        audit["jsonData"]["database"] == spec["services"]["postgres"]["environment"]["POSTGRES_DB"]
    )
    # Grafana reads as the read-only role the postgres service's init script creates, with the
    # password both get from .env.
    init = DEPLOY / "postgres" / "10-grafana-reader.sh"
    assert bind_mounts(spec["services"]["postgres"])["deploy/postgres/10-grafana-reader.sh"] == (
        "/docker-entrypoint-initdb.d/10-grafana-reader.sh"
    )
    assert os.access(init, os.X_OK)
    assert f"CREATE ROLE {audit['user']} LOGIN" in init.read_text()
    assert audit["secureJsonData"]["password"] == "${GRAFANA_DB_PASSWORD}"
    assert "GRAFANA_DB_PASSWORD" in grafana["environment"]
    assert "GRAFANA_DB_PASSWORD" in spec["services"]["postgres"]["environment"]
    assert by_uid["prometheus"]["url"] == "http://prometheus:9090"
    providers = load_yaml(DEPLOY / "grafana/provisioning/dashboards/dashboards.yaml")
    (provider,) = providers["providers"]
    assert mounts["deploy/grafana/dashboards"] == provider["options"]["path"]
    # Every panel, query and the template variable use a provisioned data source.
    board = dashboard()
    refs = [board["templating"]["list"][0]["datasource"]]
    for panel in board["panels"]:
        refs += [panel["datasource"]] if "datasource" in panel else []
        refs += [t["datasource"] for t in panel.get("targets", [])]
    for ref in refs:
        assert by_uid[ref["uid"]]["type"] == ref["type"], ref
    assert grafana["environment"]["GF_DASHBOARDS_DEFAULT_HOME_DASHBOARD_PATH"] == (
        f"{provider['options']['path']}/{DASHBOARD.name}"
    )


# --- the Grafana dashboard's SQL, on a real PostgreSQL ----------------------------------------

T0 = 1_700_000_040.0  # a whole minute
FROM, TO = T0 - 3600, T0 + 3600
# Grafana's macros, as its PostgreSQL data source finds them (no ")" inside the arguments).
MACRO = re.compile(r"\$([_a-zA-Z0-9]+)\(([^\)]*)\)")
UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


def interval_seconds(text: str) -> int:
    match = re.fullmatch(r"(\d+)([smhdw])", text.strip().strip("'"))
    assert match, text
    return int(match.group(1)) * UNITS[match.group(2)]


def expand_macros(sql: str, start: float, end: float) -> str:
    """Grafana's PostgreSQL macro engine for the macros the dashboard uses; any other fails."""

    def one(match: re.Match[str]) -> str:
        name, args = match.group(1), [a.strip() for a in match.group(2).split(",")]
        if name == "__unixEpochFilter":
            return f"{args[0]} >= {int(start)} AND {args[0]} <= {int(end)}"
        if name in ("__unixEpochGroup", "__unixEpochGroupAlias"):
            step = interval_seconds(args[1])
            group = f"floor(({args[0]})/{step})*{step}"
            return group + (' AS "time"' if name.endswith("Alias") else "")
        raise AssertionError(f"macro ${name} is not one Grafana's PostgreSQL source knows")

    return MACRO.sub(one, sql)


def escape_regex(value: str) -> str:
    """Grafana's regex escaping of a variable's value (`${var:regex}`)."""
    return re.sub(r"[\\^$*+?.()|\[\]{}/]", lambda m: "\\" + m.group(0), value)


def render(sql: str, providers: list[str] | None = None, interval: str = "1m") -> str:
    """The query as Grafana sends it: the `provider` variable (None: All, whose value is the
    variable's allValue), `$__interval`, then the macros."""
    (variable,) = dashboard()["templating"]["list"]
    if providers is None:
        regex = variable["allValue"]
    else:
        escaped = [escape_regex(p) for p in providers]
        regex = escaped[0] if len(escaped) == 1 else f"({'|'.join(escaped)})"
    sql = sql.replace("${provider:regex}", regex).replace("$__interval", interval)
    sql = expand_macros(sql, FROM, TO)
    assert "$__" not in sql and "${" not in sql and "$provider" not in sql, sql
    return sql


def sql_targets() -> dict[str, dict[str, Any]]:
    """Every PostgreSQL query of the dashboard by `panel title/refId`."""
    targets: dict[str, dict[str, Any]] = {}
    for panel in dashboard()["panels"]:
        for target in panel.get("targets", []):
            if target["datasource"]["uid"] == "gateway-audit":
                targets[f"{panel['title']}/{target['refId']}"] = target
    return targets


def attempt(provider: str, model: str, outcome: str, status: int | None = None) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "provider": provider,
        "upstream_model": model,
        "outcome": outcome,
        "duration_ms": 5.0,
    }
    if status is not None:
        entry["status"] = status
    return entry


def rec(rid: str, t: float, provider: str | None, model: str, **fields: Any) -> AuditRecord:
    start = T0 + t
    ttfb = fields.pop("ttfb", 0.1 + (len(rid) % 7) / 10)
    # Distinct times per record, so the percentiles have something to pick from.
    total = fields.pop("total", (ttfb or 0) + 0.4 + (sum(map(ord, rid)) % 11) / 10)
    values: dict[str, Any] = {
        "id": rid,
        "started_at": start,
        "client_format": "openai",
        "stream": True,
        "model": model,
        "provider": provider,
        "upstream_model": model if provider else None,
        "first_byte_at": None if ttfb is None else start + ttfb,
        "ended_at": None if total is None else start + total,
        "http_status": 200,
        "stop_reason": "stop",
        "native_stop_reason": "stop",
        "input_tokens": 10,
        "output_tokens": 20,
        "attempts": [attempt(provider, model, "answered", 200)] if provider else [],
    }
    values.update(fields)
    return AuditRecord(**values)


def sample_records() -> list[AuditRecord]:
    """Every figure the dashboard shows, each in more than one way: retries with circuit-open
    skips, fallbacks (one with a single real try), a broken answer, no answer, an unknown stop
    reason, unknown costs, token counts and embeddings (cost only), a refused request without a
    provider, two cut answers at the same instant, and a record outside the time range."""
    weather = {"id": "call_1", "name": "get_weather"}
    clock = {"id": "call_2", "name": "get_time"}
    return [
        rec("o1", 0, "openai", "gpt-4o", cost_usd=0.01, cost_source="table"),
        rec(
            "o2",
            5,
            "openai",
            "gpt-4o",
            stop_reason="length",
            native_stop_reason="length",
            truncated=True,
            cut_reason="length",
            tool_calls=1,
            withheld_tool_calls=[weather],
            cost_usd=0.02,
            cost_source="table",
        ),
        rec(
            "o3",
            65,
            "openai",
            "gpt-4o",
            stop_reason="tool_calls",
            attempts=[
                attempt("openai", "gpt-4o", "error_status", 503),
                attempt("openai", "gpt-4o", "answered", 200),
            ],
        ),
        rec(
            "o4",
            70,
            "openai",
            "gpt-4o-mini",
            stop_reason="context_window",
            truncated=True,
            cut_reason="context_window",
            withheld_tool_calls=[clock, weather],
            cost_usd=0.005,
            parse_failures=[{"error_class": "JSONDecodeError", "offset": 3, "length": 9}],
        ),
        rec(
            "o5",
            80,
            "openai",
            "gpt-4o",
            stop_reason=None,
            native_stop_reason=None,
            http_status=504,
            error_class="UpstreamTimeout",
            ttfb=None,
            total=30.0,
            attempts=[
                attempt("openai", "gpt-4o", "timeout"),
                attempt("openai", "gpt-4o", "timeout"),
            ],
        ),
        rec(
            "a1",
            10,
            "anthropic",
            "claude-x",
            stop_reason="error",
            truncated=True,
            cut_reason="missing_terminator",
            error_class="stream_truncated",
            withheld_tool_calls=[weather],
            attempts=[
                attempt("openai", "gpt-4o", "circuit_open"),
                attempt("anthropic", "claude-x", "answered", 200),
            ],
        ),
        rec(
            "a2",
            130,
            "anthropic",
            "claude-x",
            cost_usd=0.03,
            cost_source="route",
            attempts=[
                attempt("anthropic", "claude-x", "timeout"),
                attempt("anthropic", "claude-x", "unreachable"),
                attempt("openai", "gpt-4o", "answered", 200),
            ],
        ),
        rec("a3", 131, "anthropic", "claude-x", stop_reason="mystery", native_stop_reason="x"),
        rec(
            "cut-b",
            140,
            "anthropic",
            "claude-x",
            stop_reason="length",
            truncated=True,
            cut_reason="length",
            withheld_tool_calls=[clock],
            cost_usd=0.001,
            attempts=[
                attempt("anthropic", "claude-x", "error_status", 429),
                attempt("openai", "gpt-4o", "circuit_open"),
                attempt("anthropic", "claude-x", "answered", 200),
            ],
        ),
        rec(
            "cut-a",
            140,
            "anthropic",
            "claude-y",
            stop_reason="length",
            truncated=True,
            cut_reason="length",
            ended_by="client",
            cost_usd=0.002,
        ),
        rec(
            "a6",
            75,
            "anthropic",
            "claude-y",
            stop_reason="error",
            truncated=True,
            cut_reason="upstream_error",
            error_class="stream_upstream_error",
            attempts=[
                attempt("openai", "gpt-4o", "error_status", 500),
                attempt("anthropic", "claude-y", "broken", 200),
            ],
        ),
        rec(
            "refused",
            20,
            None,
            "",
            stop_reason=None,
            native_stop_reason=None,
            http_status=404,
            error_class="ModelNotFound",
            ttfb=None,
            total=0.002,
        ),
        rec(
            "count",
            30,
            "anthropic",
            "claude-x",
            operation="count_tokens",
            stop_reason=None,
            native_stop_reason=None,
            output_tokens=None,
            cost_usd=0.004,
            cost_source="table",
        ),
        rec(
            "embed",
            40,
            "openai",
            "text-embedding-3-small",
            operation="embed",
            stop_reason=None,
            native_stop_reason=None,
            output_tokens=None,
            cost_usd=0.0005,
            cost_source="table",
        ),
        rec(
            "old",
            -3 * 86400,
            "openai",
            "gpt-4o",
            stop_reason="length",
            truncated=True,
            cut_reason="length",
            withheld_tool_calls=[weather],
            cost_usd=5.0,
        ),
    ]


def in_range(records: list[AuditRecord], providers: list[str] | None = None) -> list[AuditRecord]:
    return [
        r
        for r in records
        if int(FROM) <= r.started_at <= int(TO)
        and (providers is None or group_key(r, "provider") in providers)
    ]


def answers(records: list[AuditRecord]) -> list[AuditRecord]:
    return [r for r in records if r.operation == "generate"]


def close(a: Any, b: Any) -> bool:
    if a is None or b is None:
        return a is None and b is None
    return math.isclose(float(a), float(b), rel_tol=1e-9, abs_tol=1e-12)


class Panels:
    """Runs the dashboard's queries, rendered for a provider selection, on one connection."""

    def __init__(self, conn: asyncpg.Connection) -> None:
        self.conn = conn
        self.targets = sql_targets()
        self.ran: set[str] = set()

    async def rows(self, key: str, providers: list[str] | None = None) -> list[asyncpg.Record]:
        target = self.targets[key]
        rows = await self.conn.fetch(render(target["rawSql"], providers))
        self.ran.add(key)
        if target["format"] == "time_series":
            assert rows, key
            assert next(iter(rows[0].keys())) == "time", key
            times = [row["time"] for row in rows]
            assert times == sorted(times), key  # Grafana wants time series in time order
        return rows

    async def one(self, key: str, providers: list[str] | None = None) -> asyncpg.Record:
        (row,) = await self.rows(key, providers)
        return row


@pytest.fixture
async def audit_db(tmp_path) -> AsyncIterator[tuple[str, list[AuditRecord]]]:
    """A fresh PostgreSQL schema holding the sample records, written by PostgresStore."""
    records = sample_records()
    async with open_backend("postgresql", tmp_path) as backend:
        store = backend.store()
        await store.open()
        await store.write(records)
        await store.close()
        assert await backend.count() == len(records)
        yield backend.url, records


@pytest.fixture
async def panels(audit_db) -> AsyncIterator[Panels]:
    conn = await asyncpg.connect(audit_db[0])
    try:
        yield Panels(conn)
    finally:
        await conn.close()


def totals(records: list[AuditRecord]) -> dict[str, Any]:
    """The whole selection's figures, from `gateway audit`'s own summary per provider."""
    groups = summarize(records, by="provider")
    costs = [g.cost_usd for g in groups if g.cost_usd is not None]
    return {
        "requests": sum(g.requests for g in groups),
        "errors": sum(g.errors for g in groups),
        "truncated": sum(g.truncated for g in groups),
        "withheld": sum(g.withheld_tool_calls for g in groups),
        "retried": sum(g.retried for g in groups),
        "fallbacks": sum(g.fallbacks for g in groups),
        "cost": math.fsum(costs) if costs else 0.0,
        "cost_unknown": sum(g.cost_unknown for g in groups),
    }


@pytest.mark.parametrize(
    "providers", [None, ["openai"], ["anthropic", "-"], ["-"]], ids=["all", "one", "two", "none"]
)
async def test_dashboard_overview_equals_gateway_audit(panels, audit_db, providers):
    records = in_range(audit_db[1], providers)
    expected = totals(records)
    assert expected["requests"] > 0
    exchanges = await panels.one("Exchanges/A", providers)
    assert exchanges["exchanges"] == expected["requests"]
    rate = await panels.one("Truncation rate/A", providers)
    assert close(rate["truncation rate"], expected["truncated"] / expected["requests"])
    errors = await panels.one("Errors/A", providers)
    assert errors["errors"] == expected["errors"]
    withheld = await panels.one("Withheld tool calls/A", providers)
    assert withheld["withheld tool calls"] == expected["withheld"]
    resilience = await panels.one("Retried / fell back/A", providers)
    assert (resilience["retried"], resilience["fell back"]) == (
        expected["retried"],
        expected["fallbacks"],
    )
    cost = await panels.one("Cost (USD)/A", providers)
    assert close(cost["cost"], expected["cost"])
    assert cost["unknown cost"] == expected["cost_unknown"]


async def test_dashboard_figures_of_the_sample_are_the_ones_worked_out_by_hand(panels):
    """The same figures, written down: so a wrong report could not hide a wrong panel."""
    assert (await panels.one("Exchanges/A"))["exchanges"] == 12  # not count, embed, old
    assert close((await panels.one("Truncation rate/A"))["truncation rate"], 6 / 12)
    resilience = await panels.one("Retried / fell back/A")
    # retried: o3, o5, a2, cut-b, a6 (a1's circuit-open skip is no try);
    # fell back: a1 (skipped openai, answered by anthropic), a2, a6 (a broken answer)
    assert (resilience["retried"], resilience["fell back"]) == (5, 3)
    cost = await panels.one("Cost (USD)/A")
    assert close(cost["cost"], 0.01 + 0.02 + 0.005 + 0.03 + 0.001 + 0.002 + 0.004 + 0.0005)
    assert cost["unknown cost"] == 4  # o3, a1, a3, a6: answered, cost unknown
    assert (await panels.one("Exchanges/A", ["-"]))["exchanges"] == 1


async def test_dashboard_breakdowns_equal_gateway_audit(panels, audit_db):
    records = in_range(audit_db[1])
    generate = answers(records)
    # Stop reasons over time: per minute, the closed set plus none and unknown.
    stops: Counter[tuple[float, str]] = Counter()
    for r in generate:
        stops[(math.floor(r.started_at / 60) * 60, stop_reason_of(r))] += 1
    rows = await panels.rows("Stop reasons over time/A")
    assert {(float(r["time"]), r["metric"]): r["exchanges"] for r in rows} == dict(stops)
    assert {"unknown", "none", "length", "error"} <= {r["metric"] for r in rows}
    # The stop-reason mix per provider / model adds up to the report's stop reasons.
    mix = await panels.rows("Stop-reason mix by provider and model/A")
    for row in mix:
        provider, model = row["provider / model"].split(" / ")
        group = [
            r
            for r in generate
            if (group_key(r, "provider"), group_key(r, "model")) == (provider, model)
        ]
        (summary,) = summarize(group, by="model")
        assert {k: row[k] for k in summary.stop_reasons} == summary.stop_reasons, row
    assert len(mix) == len({(group_key(r, "provider"), group_key(r, "model")) for r in generate})
    # Truncation rate per provider / model and minute.
    buckets: dict[tuple[float, str], list[AuditRecord]] = defaultdict(list)
    for r in generate:
        key = f"{group_key(r, 'provider')} / {group_key(r, 'model')}"
        buckets[(math.floor(r.started_at / 60) * 60, key)].append(r)
    rows = await panels.rows("Truncation rate by provider and model/A")
    got = {(float(r["time"]), r["metric"]): float(r["truncation rate"]) for r in rows}
    want = {k: sum(r.truncated for r in v) / len(v) for k, v in buckets.items()}
    assert got.keys() == want.keys() and all(close(got[k], want[k]) for k in want)
    # Cut reasons and withheld tool calls by tool name.
    cut = Counter(r.cut_reason or "-" for r in generate if r.truncated)
    rows = await panels.rows("Cut reasons/A")
    assert {r["cut reason"]: r["cut answers"] for r in rows} == dict(cut)
    tools = Counter(call["name"] for r in generate for call in r.withheld_tool_calls)
    rows = await panels.rows("Withheld tool calls by tool/A")
    assert [(r["tool"], r["withheld calls"]) for r in rows] == sorted(
        tools.items(), key=lambda item: (-item[1], item[0])
    )
    assert dict(tools) == {"get_weather": 3, "get_time": 2}
    # Retries and fallbacks per minute.
    rows = await panels.rows("Retries and fallbacks/A")
    per_minute: dict[float, list[AuditRecord]] = defaultdict(list)
    for r in generate:
        per_minute[math.floor(r.started_at / 60) * 60].append(r)
    assert {float(r["time"]): (r["retried"], r["fell back"]) for r in rows} == {
        t: (s.retried, s.fallbacks) for t, group in per_minute.items() for s in [totals_of(group)]
    }
    # Cost per provider and minute, every operation.
    rows = await panels.rows("Cost by provider (USD)/A")
    costs: dict[tuple[float, str], float] = defaultdict(float)
    for r in records:
        if r.cost_usd is not None:
            costs[(math.floor(r.started_at / 60) * 60, group_key(r, "provider"))] += r.cost_usd
    got = {(float(r["time"]), r["metric"]): r["cost"] for r in rows}
    assert got.keys() == costs.keys() and all(close(got[k], costs[k]) for k in costs)


def totals_of(records: list[AuditRecord]) -> Any:
    (summary,) = summarize(records, by="client")  # every sample record is an OpenAI client's
    return summary


async def test_dashboard_latency_percentiles_are_nearest_rank(panels, audit_db):
    generate = answers(in_range(audit_db[1]))
    rows = await panels.rows("Latency percentiles by provider/A")
    rows += await panels.rows("Latency percentiles by provider/B")
    rows += await panels.rows("Latency percentiles by provider/C")
    want: dict[tuple[float, str], float | None] = {}
    groups: dict[tuple[float, str], list[AuditRecord]] = defaultdict(list)
    for r in generate:
        groups[(math.floor(r.started_at / 60) * 60, group_key(r, "provider"))].append(r)
    for (t, provider), group in groups.items():
        total = [ms for r in group if (ms := r.total_ms) is not None]
        ttfb = [ms for r in group if (ms := r.ttfb_ms) is not None]
        for name, values, p in (("total p50", total, 50), ("total p95", total, 95)):
            if values:
                want[(t, f"{provider} {name}")] = percentile(values, p)
        if ttfb:
            want[(t, f"{provider} first byte p95")] = percentile(ttfb, 95)
    got = {(float(r["time"]), r["metric"]): r["ms"] for r in rows}
    assert got.keys() == want.keys()
    assert all(close(got[k], want[k]) for k in want)


async def test_dashboard_table_by_provider_and_model_equals_gateway_audit(panels, audit_db):
    records = in_range(audit_db[1])
    rows = await panels.rows("By provider and model/A")
    seen = set()
    for row in rows:
        provider, model = row["provider"], row["model"]
        seen.add((provider, model))
        group = [
            r
            for r in records
            if (group_key(r, "provider"), group_key(r, "model")) == (provider, model)
        ]
        (s,) = summarize(group, by="model")
        assert row["exchanges"] == s.requests
        assert row["errors"] == s.errors
        assert row["truncated"] == s.truncated
        assert close(row["truncation rate"], s.truncated_rate)
        assert row["withheld tools"] == s.withheld_tool_calls
        assert row["arg parse failures"] == s.parse_failures
        assert row["missing terminators"] == s.missing_terminators
        assert (row["retried"], row["fell back"]) == (s.retried, s.fallbacks)
        assert close(row["ttfb p50"], s.ttfb_p50_ms) and close(row["ttfb p95"], s.ttfb_p95_ms)
        assert close(row["total p50"], s.total_p50_ms)
        assert close(row["total p95"], s.total_p95_ms)
        assert (row["input tokens"], row["output tokens"]) == (s.input_tokens, s.output_tokens)
        assert close(row["cost"], s.cost_usd)
        assert row["unknown cost"] == s.cost_unknown
        assert row["other operations"] == s.other_operations
    assert seen == {(group_key(r, "provider"), group_key(r, "model")) for r in records}


async def test_dashboard_latest_cut_exchanges_are_gateway_audits_without_content(panels, audit_db):
    records = in_range(audit_db[1])
    rows = await panels.rows("Latest cut exchanges/A")
    expected = truncated_list(records, limit=50)
    assert [r["id"] for r in rows] == [e.id for e in expected]
    assert [r["id"] for r in rows][:2] == ["cut-a", "cut-b"]  # same instant: by id
    for row, cut in zip(rows, expected, strict=True):
        assert row["time"].timestamp() == pytest.approx(
            datetime.fromisoformat(cut.time.replace("Z", "+00:00")).timestamp(), abs=1e-3
        )
        assert (row["provider"], row["model"], row["why"], row["ended by"]) == (
            cut.provider or "-",
            cut.model,
            cut.why,
            cut.ended_by,
        )
        assert (row["withheld tools"] or "") == ", ".join(cut.withheld_tools)
    assert set(rows[0].keys()) == {
        "time", "id", "provider", "model", "why", "withheld tools", "ended by"
    }  # fmt: skip


async def test_every_dashboard_query_and_the_provider_variable_run(panels, audit_db):
    for key in panels.targets:
        for providers in (None, ["anthropic"], ["openai", "-"]):
            await panels.rows(key, providers)
    assert panels.ran == set(panels.targets)
    (variable,) = dashboard()["templating"]["list"]
    rows = await panels.conn.fetch(render(variable["query"]))
    assert [r[0] for r in rows] == ["-", "anthropic", "openai"]


def test_dashboard_panels_cover_the_gateways_own_dashboard():
    board = dashboard()
    titles = {p["title"] for p in board["panels"]}
    for title in (
        "Truncation rate by provider and model",
        "Stop reasons over time",
        "Stop-reason mix by provider and model",
        "Cut reasons",
        "Withheld tool calls by tool",
        "Retries and fallbacks",
        "Latency percentiles by provider",
        "Cost by provider (USD)",
        "Latest cut exchanges",
        "Request rate by provider (Prometheus)",
    ):
        assert title in titles, title
    assert board["uid"] == "llm-gateway" and not board["editable"]
    ids = [p["id"] for p in board["panels"]]
    assert len(ids) == len(set(ids))
    # No panel ever reads message content or tool arguments.
    for target in sql_targets().values():
        assert not re.search(r"\b(content|arguments)\b", target["rawSql"]), target["rawSql"]


# --- Prometheus panels against a gateway running the compose config ---------------------------


def prometheus_exprs() -> list[str]:
    return [
        target["expr"]
        for panel in dashboard()["panels"]
        for target in panel.get("targets", [])
        if target["datasource"]["uid"] == "prometheus"
    ]


def compose_settings(store_url: str, otlp_endpoint: str | None = None) -> Settings:
    """deploy/gateway/gateway.toml with the stack's services swapped for this test's: the given
    audit store, limits counted in memory, spans to `otlp_endpoint` (None: no export)."""
    data = tomllib.loads(GATEWAY_TOML.read_text())
    data["audit"]["store"] = store_url
    del data["state"]
    if otlp_endpoint is None:
        del data["telemetry"]
    else:
        data["telemetry"] |= {"otlp_endpoint": otlp_endpoint, "export_timeout": "1s"}
    return parse_settings(data, str(GATEWAY_TOML), env=ENV)


async def exchange(session: aiohttp.ClientSession, base: str, model: str) -> dict[str, Any]:
    body = {"model": model, "messages": [{"role": "user", "content": "Weather in Paris?"}]}
    headers = {"Authorization": f"Bearer {ENV['GATEWAY_KEY']}"}
    async with session.post(f"{base}/v1/chat/completions", json=body, headers=headers) as reply:
        assert reply.status == 200, await reply.text()
        return await reply.json()


async def test_every_metric_a_prometheus_panel_uses_is_in_the_gateways_metrics(tmp_path, servers):
    """A gateway on the compose config serves the mock's answers (one cut with a withheld call)
    and exports spans to a collector that is down; /metrics, scraped with the admin key as
    Prometheus is configured to, names every metric and label the panels query. Without the
    admin key /metrics is refused, as Prometheus would be without its secret."""
    nowhere = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    app = build_app(compose_settings(f"sqlite:///{tmp_path / 'audit.db'}", nowhere), env=ENV)
    _, base = await servers.start(app)
    async with aiohttp.ClientSession() as session:
        for model in ("mock-text", "mock-tool-cut", "mock-length"):
            await exchange(session, base, model)
        await wait_idle(app)
        for headers in ({}, {"Authorization": f"Bearer {ENV['GATEWAY_KEY']}"}):
            async with session.get(f"{base}/metrics", headers=headers) as reply:
                assert reply.status == 401
        admin = {"Authorization": f"Bearer {ENV['GATEWAY_ADMIN_KEY']}"}
        text = ""
        for _ in range(100):  # counters move from the finished audit record
            async with session.get(f"{base}/metrics", headers=admin) as reply:
                assert reply.status == 200
                text = await reply.text()
            if 'cut_reason="length"' in text:
                break
            await asyncio.sleep(0.05)
    families = {f.name: f for f in text_string_to_metric_families(text)}
    samples = {s.name: set(s.labels) for f in families.values() for s in f.samples}

    def exists(name: str) -> bool:
        if name in samples:
            return True
        for suffix, kinds in (("_total", ("counter",)), ("_bucket", ("histogram",))):
            family = families.get(name.removesuffix(suffix))
            if name.endswith(suffix) and family is not None and family.type in kinds:
                return True
        family = families.get(name)
        return family is not None and family.type == "gauge"

    exprs = prometheus_exprs()
    assert exprs
    names = {n for expr in exprs for n in re.findall(r"\b(gateway_[a-z0-9_]+)\b", expr)}
    assert {
        "gateway_requests_total",
        "gateway_request_duration_seconds_bucket",
        "gateway_otel_export_failures_total",
    } <= names
    for name in names:
        assert exists(name), f"{name} is not in /metrics"
    # The labels the panels select and group by, on the metrics that have samples here.
    for expr in exprs:
        for name in re.findall(r"\b(gateway_[a-z0-9_]+)\b", expr):
            used = set(re.findall(r"(\w+)=~", expr)) | {
                label.strip()
                for group in re.findall(r"by \(([^)]*)\)", expr)
                for label in group.split(",")
            }
            if name in samples:
                assert used - {"le"} <= samples[name] | {"le"}, (name, used)


async def test_the_compose_config_records_to_postgresql_what_the_dashboard_shows(tmp_path, servers):
    """The compose config with the audit store on a real PostgreSQL: a cut exchange through the
    gateway is in the dashboard's latest cut exchanges, with its withheld tool's name."""
    async with open_backend("postgresql", tmp_path) as backend:
        app = build_app(compose_settings(backend.url), env=ENV)
        runner, base = await servers.start(app)
        async with aiohttp.ClientSession() as session:
            cut = await exchange(session, base, "mock-tool-cut")
            await exchange(session, base, "mock-text")
        await wait_idle(app)
        await servers.stop(runner)  # flushes the audit writer
        gateway = cut["gateway"]
        assert gateway["truncated"] and gateway["withheld_tool_calls"]
        now = datetime.now(UTC).timestamp()
        conn = await asyncpg.connect(backend.url)
        try:
            target = sql_targets()["Latest cut exchanges/A"]["rawSql"]
            sql = expand_macros(target.replace("${provider:regex}", ".*"), now - 3600, now + 3600)
            (row,) = await conn.fetch(sql)
            assert row["id"] == gateway["request_id"]
            assert row["withheld tools"] == ", ".join(
                call["name"] for call in gateway["withheld_tool_calls"]
            )
            rate = expand_macros(
                sql_targets()["Truncation rate/A"]["rawSql"].replace("${provider:regex}", "mock"),
                now - 3600,
                now + 3600,
            )
            assert float(await conn.fetchval(rate)) == 0.5
        finally:
            await conn.close()


# --- Kubernetes -----------------------------------------------------------------------------


def kubernetes_objects() -> Iterator[tuple[str, dict[str, Any]]]:
    for path in sorted(KUBERNETES.glob("*.yaml")):
        if path.name == "kustomization.yaml":
            continue
        for document in yaml.safe_load_all(path.read_text()):
            if document:
                yield path.name, document


def test_kubernetes_manifests_run_n_non_root_replicas_sharing_postgresql_and_redis():
    objects = list(kubernetes_objects())
    by_kind: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for _, obj in objects:
        assert obj["apiVersion"] and obj["metadata"]["name"]
        by_kind[obj["kind"]].append(obj)
    kustomization = load_yaml(KUBERNETES / "kustomization.yaml")
    files = {name for name, _ in objects}
    assert set(kustomization["resources"]) == files - {"secret.example.yaml"}
    (deployment,) = by_kind["Deployment"]
    (service,) = by_kind["Service"]
    (configmap,) = by_kind["ConfigMap"]
    (pdb,) = by_kind["PodDisruptionBudget"]
    spec = deployment["spec"]
    assert spec["replicas"] >= 2
    pod = spec["template"]["spec"]
    labels = spec["template"]["metadata"]["labels"]
    assert spec["selector"]["matchLabels"].items() <= labels.items()
    assert service["spec"]["selector"].items() <= labels.items()
    assert pdb["spec"]["selector"]["matchLabels"].items() <= labels.items()
    assert pdb["spec"]["maxUnavailable"] < spec["replicas"]
    # Non-root, read-only root filesystem, nothing extra; /tmp is an emptyDir.
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["runAsUser"] == int(
        instruction(dockerfile_stages()[-1], "USER")[0].split(":")[0]
    )
    (container,) = pod["containers"]
    security = container["securityContext"]
    assert security["readOnlyRootFilesystem"] is True
    assert security["allowPrivilegeEscalation"] is False
    assert security["capabilities"]["drop"] == ["ALL"]
    volumes = {v["name"]: v for v in pod["volumes"]}
    mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
    assert "emptyDir" in volumes[mounts["/tmp"]]
    # Probes on /healthz, at the port the gateway listens on.
    (port,) = container["ports"]
    assert service["spec"]["ports"][0]["targetPort"] in (port["name"], port["containerPort"])
    for probe in ("readinessProbe", "livenessProbe", "startupProbe"):
        check = container[probe]["httpGet"]
        assert check["path"] == "/healthz", probe
        assert check["port"] in (port["name"], port["containerPort"]), probe
    resources = container["resources"]
    assert {"cpu", "memory"} <= resources["requests"].keys()
    assert {"cpu", "memory"} <= resources["limits"].keys()
    # The ConfigMap's config loads, with the variables the Deployment sets from Secrets.
    env = {e["name"]: e for e in container["env"]}
    config_volume = volumes[mounts[env["GATEWAY_CONFIG"]["value"].rsplit("/", 1)[0]]]
    assert config_volume["configMap"]["name"] == configmap["metadata"]["name"]
    config_file = env["GATEWAY_CONFIG"]["value"].rsplit("/", 1)[1]
    secret_env = {name: f"test-{name.lower()}" for name, e in env.items() if "valueFrom" in e}
    for name, e in env.items():
        if "valueFrom" in e:
            assert "secretKeyRef" in e["valueFrom"], name
    settings = parse_settings(
        tomllib.loads(configmap["data"][config_file]), "configmap.yaml", env=secret_env
    )
    named = {p.api_key_env for p in settings.providers.values() if p.api_key_env}
    named |= {k.key_env for k in settings.keys if k.key_env} | {settings.admin.key_env}
    assert named <= secret_env.keys()
    # One PostgreSQL for every replica, its connection from a Secret (libpq's PG* variables);
    # one Redis by URL.
    assert settings.audit.store == "postgresql://"
    (postgres_secret,) = [e["secretRef"]["name"] for e in container["envFrom"]]
    secrets = {obj["metadata"]["name"]: obj for obj in by_kind["Secret"]}
    assert {"PGHOST", "PGUSER", "PGPASSWORD", "PGDATABASE"} <= set(
        secrets[postgres_secret]["stringData"]
    )
    for e in env.values():
        if "valueFrom" in e:
            ref = e["valueFrom"]["secretKeyRef"]
            assert ref["key"] in secrets[ref["name"]]["stringData"], ref
    assert settings.state.redis is not None and settings.state.redis.startswith("redis://")
    assert settings.server.workers is not None
    assert settings.server.workers <= int(resources["limits"]["cpu"])
    # The image's default command serves on all interfaces at the container port.
    assert container["args"] == ["serve", "--host", "0.0.0.0", "--port", str(port["containerPort"])]
    assert pod["terminationGracePeriodSeconds"] > settings.server.shutdown_grace


def test_the_compose_load_balancer_config_is_valid_haproxy():
    """deploy/haproxy/haproxy.cfg, checked by the HAProxy of Debian's package (.ci/haproxy.sh)
    the scale-out tests run: the image's 2.6 line."""
    haproxy = os.environ.get("GATEWAY_TEST_HAPROXY") or shutil.which("haproxy")
    if haproxy is None:
        pytest.skip("needs haproxy: run `source .ci/haproxy.sh` as root, as .ci/run does")
    config = DEPLOY / "haproxy" / "haproxy.cfg"
    done = subprocess.run([haproxy, "-c", "-f", str(config)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "server-template gateway 3 gateway:8080 check" in config.read_text()
