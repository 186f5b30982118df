"""What one exchange cost in USD: the route's negotiated price, else the genai-prices table.

    pricer = Pricer.for_settings(settings)
    cost = pricer.cost(Tokens.of(record), record.provider, "gpt-4o", target.price)
    if cost is not None: record.cost_usd, record.cost_source = cost.usd, cost.source

How the counts are read (the normalized `gateway.events.Usage`, whatever the wire):
- `input` counts every input token, cache reads and cache writes included. The Anthropic decoder
  adds Anthropic's `cache_read_input_tokens` and `cache_creation_input_tokens` to its
  `input_tokens` (which excludes them); OpenAI's `prompt_tokens` (and Responses' `input_tokens`)
  already include `cached_tokens`. genai-prices reads `input_tokens` the same way (it bills
  `input - cache_read - cache_write` at the input rate), so the counts go to it as they are, and
  a route's price makes the same subtraction.
- `output` includes reasoning (OpenAI) and thinking (Anthropic) tokens: both bill them as output.
- Anthropic's one-hour cache writes are not told apart from the five-minute ones in the record:
  both are priced at the table's `cache_write` rate.

A cost nobody can know is None, never 0: no usage came (or no input or output count), the price
table has no such model, or the counts contradict each other (more cached tokens than input).

The table's provider is the one the configured `base_url` belongs to when the table knows the
URL, else the provider kind's `price_provider` hint, else none (matched by the model name).

The table lookup (provider, model) is cached per `Pricer`, misses included (genai-prices caches
only hits, and a miss scans every model of the provider: about 0.2 ms). genai-prices' own
calculation costs 0.1 to 0.3 ms of CPU (it resolves its units and prices in Decimal each time),
more than the rest of an exchange; so a model whose price is one plain price per token kind (no
tiers by prompt size, no prices by date or time of day: most models) is priced by `Linear`,
its four per-token rates read once from genai-prices' own calculation, in about 1 µs. The others
go through genai-prices each time. Either way it runs once per exchange, never per chunk.
A pricer holds its table from the start, so that no file is read inside the event loop: the whole
of genai-prices' table (`Pricer.for_settings`, imported then), or only the providers a
configuration prices with (`Pricer.of`, from gateway.price_subset: what `gateway serve` does).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from typing import TYPE_CHECKING, Final, Literal

from gateway.price_table import (
    DataSnapshot,
    ModelInfo,
    ModelPrice,
    Provider,
    TieredPrices,
    Usage,
    table_provider,
    whole_table,
)
from gateway.settings_price import PriceSettings
from providers.registry import KINDS

if TYPE_CHECKING:
    from gateway.audit.record import AuditRecord
    from gateway.settings import ProviderSettings, Settings

CostSource = Literal["table", "route"]
MAX_CACHED: Final = 1024  # (provider, model) pairs kept; past it, lookups are not cached
_MILLION: Final = Decimal(1_000_000)


@dataclass(frozen=True, slots=True)
class Cost:
    usd: float
    source: CostSource  # "table": genai-prices; "route": the route's (or target's) `price`


@dataclass(frozen=True, slots=True)
class Tokens:
    """An exchange's usage as the record holds it (see the module docstring for the rule)."""

    input: int | None
    output: int | None
    cache_read: int | None = None
    cache_write: int | None = None

    @classmethod
    def of(cls, record: AuditRecord) -> Tokens:
        return cls(
            record.input_tokens,
            record.output_tokens,
            record.cache_read_tokens,
            record.cache_creation_tokens,
        )


# The probes' token count: below every tier's threshold (the smallest is 128k).
PROBE_TOKENS: Final = 1000
_PROBE: Final = Decimal(PROBE_TOKENS)


@dataclass(frozen=True, slots=True)
class Linear:
    """A plain price's rates in USD per token (fresh input, output, cache read, cache write),
    good for requests of at most `limit` input tokens (the first tier of a tiered price)."""

    input: Decimal
    output: Decimal
    cache_read: Decimal
    cache_write: Decimal
    limit: float = math.inf

    @classmethod
    def of(cls, info: ModelInfo, provider: Provider) -> Linear | None:
        """The rates, read from genai-prices' own calculation of four probes; None when the
        price changes by date or time (then genai-prices is asked each time). Price variants
        (batch, flex) apply only to requests that name them, which the gateway never does."""
        prices = info.prices
        if not isinstance(prices, ModelPrice):
            return None
        tiers = [v for v in prices.__dict__.values() if isinstance(v, TieredPrices)]
        limit = min((t.start for v in tiers for t in v.tiers), default=math.inf)
        try:
            rates = [
                info.calc_price(Usage(**probe), provider).total_price / _PROBE
                for probe in (
                    {"input_tokens": PROBE_TOKENS},
                    {"output_tokens": PROBE_TOKENS},
                    {"input_tokens": PROBE_TOKENS, "cache_read_tokens": PROBE_TOKENS},
                    {"input_tokens": PROBE_TOKENS, "cache_write_tokens": PROBE_TOKENS},
                )
            ]
        except (ValueError, ArithmeticError):  # a unit the probes cannot price alone
            return None
        fresh, output, read, write = rates
        return cls(fresh, output, read, write, float(limit))

    def cost(self, tokens: Tokens) -> float | None:
        """The cost; None when the counts contradict each other. Only for `tokens.input` up
        to `limit`."""
        assert tokens.input is not None and tokens.output is not None
        read = tokens.cache_read or 0
        write = tokens.cache_write or 0
        fresh = tokens.input - read - write
        if fresh < 0:  # counts that contradict each other
            return None
        # In Decimal, as genai-prices computes: the same figure to the last digit.
        return float(
            self.input * fresh
            + self.cache_read * read
            + self.cache_write * write
            + self.output * tokens.output
        )


@dataclass(frozen=True, slots=True)
class Prices:
    """What a configuration prices with: each configured provider's table provider (None:
    matched by the model name) and a table holding at least those providers and their
    fallbacks (the whole table when a provider is matched by the model name)."""

    providers: Mapping[str, str | None]
    table: DataSnapshot = field(repr=False)  # thousands of models: never in a repr

    @classmethod
    def whole(cls, settings: Settings) -> Prices:
        """`settings`' providers over genai-prices' whole table."""
        table = whole_table()
        return cls(
            {name: price_provider(p, table) for name, p in settings.providers.items()}, table
        )


class Pricer:
    """Prices exchanges for one app; `price_providers` maps a configured provider's name to its
    genai-prices provider id (`price_provider`; None: matched by the model name); `table`: the
    price table (None: genai-prices' whole table)."""

    def __init__(
        self,
        price_providers: Mapping[str, str | None],
        max_cached: int = MAX_CACHED,
        table: DataSnapshot | None = None,
    ) -> None:
        self._price_providers = dict(price_providers)
        self._max_cached = max_cached
        self._table = whole_table() if table is None else table
        self._models: dict[tuple[str | None, str], tuple[Provider, ModelInfo] | None] = {}
        self._linear: dict[tuple[str | None, str], Linear | None] = {}

    @classmethod
    def for_settings(cls, settings: Settings) -> Pricer:
        """Over the whole table."""
        return cls.of(Prices.whole(settings))

    @classmethod
    def of(cls, prices: Prices) -> Pricer:
        return cls(prices.providers, table=prices.table)

    def table_providers(self) -> list[str]:
        """The ids of the providers its table holds."""
        return [provider.id for provider in self._table.providers]

    def cost(
        self,
        tokens: Tokens,
        provider: str | None,
        model: str | None,
        price: PriceSettings | None = None,
    ) -> Cost | None:
        """The exchange's cost, or None when it cannot be known."""
        if tokens.input is None or tokens.output is None:
            return None
        if price is not None:
            usd = route_cost(tokens, price)
            return None if usd is None else Cost(usd, "route")
        if provider is None or not model or provider not in self._price_providers:
            return None
        key = (self._price_providers[provider], model)
        found = self._lookup(*key)
        if found is None:
            return None
        table_provider, info = found
        if key not in self._linear and len(self._linear) < self._max_cached:
            self._linear[key] = Linear.of(info, table_provider)
        linear = self._linear.get(key)
        if linear is not None and tokens.input <= linear.limit:
            usd = linear.cost(tokens)
            return None if usd is None else Cost(usd, "table")
        usage = Usage(
            input_tokens=tokens.input,
            output_tokens=tokens.output,
            cache_read_tokens=tokens.cache_read,
            cache_write_tokens=tokens.cache_write,
        )
        try:
            total = info.calc_price(usage, table_provider).total_price
        except (ValueError, ArithmeticError):  # counts that contradict each other
            return None
        return Cost(float(total), "table")

    def _lookup(self, price_provider: str | None, model: str) -> tuple[Provider, ModelInfo] | None:
        key = (price_provider, model)
        if key in self._models:
            return self._models[key]
        try:
            found: tuple[Provider, ModelInfo] | None = self._table.find_provider_model(
                model, None, price_provider, None
            )
        except LookupError:
            found = None
        if len(self._models) < self._max_cached:  # a client choosing model names cannot grow it
            self._models[key] = found
        return found


def price_provider(options: ProviderSettings, table: DataSnapshot) -> str | None:
    """The price table's provider for a configured provider (`table_provider`: its base URL's,
    else its kind's hint, else None)."""
    return table_provider(table, options.base_url, KINDS[options.kind].price_provider)


def route_cost(tokens: Tokens, price: PriceSettings) -> float | None:
    """`tokens` at `price` (USD per million), exactly in decimal, then as a float; None when the
    cached counts exceed the input count."""
    assert tokens.input is not None and tokens.output is not None
    read = tokens.cache_read or 0
    write = tokens.cache_write or 0
    fresh = tokens.input - read - write
    if fresh < 0:
        return None
    rate = _rate(price.input)
    read_rate = rate if price.cache_read is None else _rate(price.cache_read)
    write_rate = rate if price.cache_write is None else _rate(price.cache_write)
    micro = (
        rate * fresh + read_rate * read + write_rate * write + _rate(price.output) * tokens.output
    )
    return float(micro / _MILLION)


def _rate(usd_per_million: float) -> Decimal:
    return Decimal(repr(usd_per_million))  # 2.5 -> Decimal("2.5"), not its binary expansion
