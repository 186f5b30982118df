"""Where the load goes: the fake upstream directly, the gateway, or another gateway to compare.

Every target is on the loopback interface: the bench generates load as fast as a closed loop
can, which must never leave the machine (a URL whose host resolves anywhere else is refused, as
the shared loadgen does). A target's key travels in its headers and nowhere else: `public()`,
what reports and JSON show, leaves the headers out.

    target = Target.from_url("compare", "litellm", "http://127.0.0.1:4000", pids=(1234,),
                             model_template="openai/{model}", key="sk-...")
    target.model("bench-c20")        # "openai/bench-c20"
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal
from urllib.parse import urlsplit

Role = Literal["direct", "gateway", "compare"]


def require_loopback_host(host: str) -> None:
    """ValueError unless every address `host` resolves to is a loopback address."""
    try:
        addresses = {info[4][0] for info in socket.getaddrinfo(host, None)}
    except socket.gaierror as exc:
        raise ValueError(f"cannot resolve {host!r} ({exc.strerror})") from None
    for address in addresses:
        if not ipaddress.ip_address(str(address).partition("%")[0]).is_loopback:
            raise ValueError(
                f"refusing to generate load against {host!r}: {address} is not a loopback address"
            )


def split_url(url: str) -> tuple[str, int, str]:
    """(host, port, root path) of an http:// URL on the loopback interface. The root is what
    comes before `/v1/...` (a trailing `/v1` is dropped: both spellings of a base URL work)."""
    parts = urlsplit(url)
    if parts.scheme != "http" or not parts.hostname:
        raise ValueError(f"not an http:// URL: {url!r}")
    require_loopback_host(parts.hostname)
    port = parts.port or 80
    root = parts.path.rstrip("/").removesuffix("/v1")
    return parts.hostname, port, root


@dataclass(frozen=True, slots=True)
class Target:
    name: str  # as shown in tables: "direct", "gateway", or --compare-name
    role: Role
    host: str
    port: int
    root: str = ""
    pids: tuple[int, ...] = ()  # roots of its process tree; empty: CPU and RSS not measured
    model_template: str = "{model}"  # "{model}" is replaced by the scenario's model name
    headers: Mapping[str, str] = field(default_factory=dict, repr=False)  # may hold a key

    @classmethod
    def from_url(
        cls,
        role: Role,
        name: str,
        url: str,
        pids: tuple[int, ...] = (),
        model_template: str = "{model}",
        key: str | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> Target:
        """`headers`: sent on every request besides the key's (`--compare-header`)."""
        host, port, root = split_url(url)
        sent = {"authorization": f"Bearer {key}", "x-api-key": key} if key else {}
        return cls(name, role, host, port, root, pids, model_template, {**(headers or {}), **sent})

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}{self.root}"

    @property
    def follows_scenarios(self) -> bool:
        """Whether the scenario's model name reaches the upstream (chunks, pacing, holding)."""
        return "{model}" in self.model_template

    def model(self, scenario_model: str) -> str:
        return self.model_template.replace("{model}", scenario_model)

    def public(self) -> dict[str, Any]:
        """What may be shown: never the headers (a key)."""
        return {
            "name": self.name,
            "role": self.role,
            "url": self.url,
            "pids": list(self.pids),
            "model_template": self.model_template,
            "sends_key": bool(self.headers),
        }
