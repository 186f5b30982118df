"""A negotiated price for a route or a target, in USD per million tokens (gateway.cost reads it).

    [[routes]]
    match = "gpt-4o*"
    provider = "openai"
    price = { input = 2.5, output = 10, cache_read = 1.25 }

It wins over the maintained price table (genai-prices) for every exchange its route or target
answers. `input` prices the input tokens read neither from nor into a cache; `cache_read` and
`cache_write` default to `input` (a provider that gives no cache discount bills them as input).
"""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from gateway.settings_fields import Frozen

UsdPerMillion = Annotated[float, Field(ge=0, allow_inf_nan=False)]


class PriceSettings(Frozen):
    input: UsdPerMillion
    output: UsdPerMillion
    cache_read: UsdPerMillion | None = None  # None: priced as `input`
    cache_write: UsdPerMillion | None = None  # None: priced as `input`
