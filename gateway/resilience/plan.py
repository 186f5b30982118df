"""The resilience state one gateway process keeps: target balance, circuits, retry policies and
the routes' recovery of cut streams."""

from __future__ import annotations

from collections.abc import Callable

from gateway.resilience.balance import Balancer
from gateway.resilience.circuit import Circuits
from gateway.resilience.retry import RetryPolicy
from gateway.settings import RecoverySettings, ResolvedRoute, Settings


class Resilience:
    def __init__(
        self, settings: Settings, on_circuit: Callable[[str, str], None] | None = None
    ) -> None:
        self.settings = settings
        self.balancer = Balancer()
        circuit = settings.circuit
        self.circuits = Circuits(circuit.failures, circuit.cooldown, on_state=on_circuit)
        self._policies: dict[int, RetryPolicy] = {}  # by route index: its table never changes
        self._recovery: dict[int, RecoverySettings | None] = {}

    def policy(self, route: ResolvedRoute) -> RetryPolicy:
        policy = self._policies.get(route.route_index)
        if policy is None:
            policy = RetryPolicy(self.settings.retry_for(route))
            self._policies[route.route_index] = policy
        return policy

    def recovery(self, route: ResolvedRoute) -> RecoverySettings | None:
        """The route's [recovery] over the top-level table's, merged once per route; None when
        it continues nothing (the default), so an exchange looks no further."""
        try:
            return self._recovery[route.route_index]
        except KeyError:
            settings = self.settings.recovery_for(route)
            found = self._recovery[route.route_index] = settings if settings.enabled else None
            return found
