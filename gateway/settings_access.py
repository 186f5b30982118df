"""Settings of who may use the gateway and how much: `[[keys]]`, `[admin]`, `[limits]` and
`[state]` (gateway.access and gateway.state read them)."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping, Sequence
from fnmatch import fnmatchcase
from typing import Annotated, Any, Final, Protocol
from urllib.parse import urlsplit

from pydantic import Field, field_validator, model_validator

from gateway.settings_fields import Frozen, NonEmptyStr, Seconds
from gateway.settings_fields import parse_duration as _duration
from gateway.settings_fields import parse_size as _size


class NamedRoute(Protocol):
    """What a key's `routes` globs are matched against: a route's `match` (gateway.settings'
    RouteSettings, which imports this module)."""

    @property
    def match(self) -> str: ...


_SHA256_HEX: Final = re.compile(r"[0-9a-f]{64}")


def _sha256(value: Any) -> Any:
    if isinstance(value, str):
        digest = value.strip().lower()
        if _SHA256_HEX.fullmatch(digest) is None:
            # Never echoed: someone may have pasted the key itself here.
            raise ValueError(
                "must be the key's SHA-256 as 64 hex digits (from `gateway keys hash`), "
                "never the key itself"
            )
        return digest
    return value


class HashedKey(Frozen):
    """A secret given by its SHA-256 (`sha256`) or by the environment variable holding it
    (`key_env`, hashed by parse_settings at load; the key itself is never kept)."""

    sha256: str | None = None
    key_env: NonEmptyStr | None = None

    _digest = field_validator("sha256", mode="before")(classmethod(lambda cls, v: _sha256(v)))

    @model_validator(mode="after")
    def _one_source(self) -> HashedKey:
        if (self.sha256 is None) == (self.key_env is None):
            raise ValueError("give sha256 or key_env (exactly one)")
        return self


class KeySettings(HashedKey):
    """One `[[keys]]` table: a gateway key that clients present, its routes and its limits."""

    name: NonEmptyStr
    routes: Annotated[tuple[NonEmptyStr, ...], Field(strict=False, min_length=1)] = ("*",)
    requests_per_window: Annotated[int, Field(ge=1)] | None = None
    tokens_per_window: Annotated[int, Field(ge=1)] | None = None
    window: Seconds = 60.0

    _window = field_validator("window", mode="before")(classmethod(lambda cls, v: _duration(v)))

    def allows(self, route: NamedRoute, model: str) -> bool:
        """Whether a glob of `routes` matches the route's `match` or the client's model name."""
        return any(fnmatchcase(route.match, g) or fnmatchcase(model, g) for g in self.routes)


class AdminSettings(Frozen):
    """`[admin]`: the key `/metrics` asks for once gateway keys are on."""

    sha256: str | None = None
    key_env: NonEmptyStr | None = None

    _digest = field_validator("sha256", mode="before")(classmethod(lambda cls, v: _sha256(v)))

    @model_validator(mode="after")
    def _at_most_one_source(self) -> AdminSettings:
        if self.sha256 is not None and self.key_env is not None:
            raise ValueError("give sha256 or key_env, not both")
        return self

    @property
    def configured(self) -> bool:
        return self.sha256 is not None or self.key_env is not None


class LimitsSettings(Frozen):
    max_concurrent: Annotated[int, Field(ge=0)] = 0  # exchanges at once, this replica; 0: none
    max_concurrent_per_key: Annotated[int, Field(ge=0)] = 0  # per gateway key; 0: no limit
    max_body_bytes: Annotated[int, Field(ge=1)] = 64 * 1024**2
    max_header_bytes: Annotated[int, Field(ge=1024, le=16384)] = 8190  # a header line, the URL
    max_headers: Annotated[int, Field(ge=16)] = 128
    metric_models: Annotated[int, Field(ge=1)] = 100  # distinct `model` labels on /metrics

    _bytes = field_validator("max_body_bytes", mode="before")(classmethod(lambda cls, v: _size(v)))


class StateSettings(Frozen):
    """`[state]`: where rate limits, token budgets and per-key concurrency are counted."""

    redis: NonEmptyStr | None = None  # redis://[:password@]host:port/db; None: in memory
    prefix: NonEmptyStr = "llm-gateway:"  # of every Redis key the gateway writes
    timeout: Seconds = 0.5  # per Redis operation, before the limits fail open

    _timeout = field_validator("timeout", mode="before")(classmethod(lambda cls, v: _duration(v)))

    @field_validator("redis")
    @classmethod
    def _redis_url(cls, url: str | None) -> str | None:
        if url is not None and urlsplit(url).scheme not in ("redis", "rediss", "unix"):
            raise ValueError("must be a redis://, rediss:// or unix:// URL")
        return url


def _duplicate_keys(keys: Sequence[KeySettings]) -> list[tuple[str | None, str]]:
    """Two keys of one name, or of one hash (then no one could tell them apart)."""
    problems: list[tuple[str | None, str]] = []
    names: dict[str, int] = {}
    digests: dict[str, int] = {}
    for i, key in enumerate(keys):
        if key.name in names:
            problems.append((f"keys[{i}].name", f"keys[{names[key.name]}] has this name"))
        names.setdefault(key.name, i)
        if key.sha256 is not None:
            if key.sha256 in digests:
                problems.append((f"keys[{i}]", f"the same key as keys[{digests[key.sha256]}]"))
            digests.setdefault(key.sha256, i)
    return problems


def hash_key(key: str) -> str:
    """The hex SHA-256 of a key, as `[[keys]] sha256` holds it (surrounding whitespace, such as
    the newline of `echo KEY | gateway keys hash`, is not part of the key)."""
    return hashlib.sha256(key.strip().encode()).hexdigest()


def hash_key_envs(
    keys: Sequence[KeySettings], admin: AdminSettings, env: Mapping[str, str]
) -> tuple[tuple[KeySettings, ...], AdminSettings, list[tuple[str | None, str]]]:
    """Each `key_env` read from `env` and replaced by its SHA-256 (the variable's name stays, for
    the startup report); the key itself is not kept. Problems name a variable that is unset."""
    problems: list[tuple[str | None, str]] = []

    def hashed(item: Any, where: str) -> Any:
        var = item.key_env
        if var is None or item.sha256 is not None:
            return item
        secret = env.get(var)
        if not secret:
            problems.append(
                (f"{where}.key_env", f"${var} is {'empty' if var in env else 'not set'}")
            )
            return item
        return item.model_copy(update={"sha256": hash_key(secret)})

    hashed_keys = tuple(hashed(key, f"keys[{i}]") for i, key in enumerate(keys))
    return hashed_keys, hashed(admin, "admin"), problems
