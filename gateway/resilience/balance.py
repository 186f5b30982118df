"""The order in which an exchange tries its route's targets.

The first target is drawn by weight (`balance = "weighted"`) or is the one with the fewest
exchanges in flight (`"least_in_flight"`, ties to the earlier); the others follow in the
configured order, targets of weight 0 (fallbacks only) last. A one-target route costs nothing.
"""

from __future__ import annotations

import random
from collections.abc import Sequence

from gateway.settings import ResolvedRoute, ResolvedTarget


class Balancer:
    def __init__(self, rng: random.Random | None = None) -> None:
        self.in_flight: dict[str, int] = {}  # target key -> attempts under way
        self._random = rng or random.Random()

    def order(self, route: ResolvedRoute) -> Sequence[ResolvedTarget]:
        targets = route.targets
        if len(targets) == 1:
            return targets
        live = [t for t in targets if t.weight > 0]
        if route.route.balance == "least_in_flight":
            first = min(live, key=lambda t: self.in_flight.get(t.key, 0))
        else:
            first = self._random.choices(live, weights=[t.weight for t in live])[0]
        rest = [t for t in live if t is not first] + [t for t in targets if t.weight == 0]
        return [first, *rest]

    def started(self, key: str) -> None:
        self.in_flight[key] = self.in_flight.get(key, 0) + 1

    def ended(self, key: str) -> None:
        left = self.in_flight.get(key, 1) - 1
        if left:
            self.in_flight[key] = left
        else:
            self.in_flight.pop(key, None)
