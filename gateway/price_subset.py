"""A serving process's price table cut to the providers its configuration prices with, read from
genai-prices' whole table in a child process.

    pending = PendingPrices.start(settings)      # before the app's imports: the two overlap
    build_app(settings, prices=await pending.result())

genai-prices' table builds the models of all of its 47 providers, about 3.8 MB resident, and
dropping the ones not needed afterwards gives nothing back (pymalloc's arenas stay with the
process while any object in them lives). A gateway pricing with OpenAI and Anthropic needs two
of them, and their `fallback_model_providers` (Azure's lookups fall back to OpenAI's models...),
for every lookup to find what the whole table finds. So the child imports the whole table,
finds each configured provider's table provider (`gateway.price_table.table_provider`) and sends
those providers back pickled: the serving process builds only them.

When a provider is priced by the model name (no base URL the table knows and no kind hint: the
mock, a self-hosted server of a kind without one), any provider may be the one, and the process
prices with the whole table, as it does when the child fails (logged, with its exit status).
Nothing goes to the child but base URLs and kind hints, and it reads no configuration.

`gateway serve` starts the child first of all, before it reads its configuration (`begin`): the
child reads the table while the gateway imports and validates, and waits for the hints on its
stdin (`ask`), so the table is ready long before the app. Its answers are kept on disk
(gateway.price_cache): when one of the installed table is kept, `begin` starts no child, and
`ask` reads the answer for the configuration's hints, starting the child only if there is none.
With several workers, the supervisor runs the one child and hands each worker its answer as it
came (`answer`, `GivenPrices`): one table read for the whole gateway, and no worker process
waits for a child of its own.
"""

from __future__ import annotations

import contextlib
import io
import logging
import os
import pickle
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

import orjson

if TYPE_CHECKING:  # the child imports none of them: it starts sooner
    from gateway.cost import Prices
    from gateway.price_cache import PriceCache
    from gateway.price_table import DataSnapshot, Provider
    from gateway.settings import Settings

log = logging.getLogger("gateway.prices")

TIMEOUT_S: Final = 60.0
CHILD: Final = ("-P", "-m", "gateway.price_subset")  # -P: this module, not one in the cwd
Hints = Mapping[str, tuple[str | None, str | None]]  # provider name: (base URL, kind's hint)
# (the same shape as gateway.price_cache.Hints)


def hints_of(settings: Settings) -> Hints | None:
    """What the child needs to know of each configured provider; None when one is priced by the
    model name whatever its base URL (no hint, no URL), so the whole table is needed anyway."""
    from providers.registry import KINDS

    hints = {
        name: (p.base_url, KINDS[p.kind].price_provider) for name, p in settings.providers.items()
    }
    if any(base_url is None and hint is None for base_url, hint in hints.values()):
        return None
    return hints


def needed(table: DataSnapshot, ids: set[str]) -> list[Provider]:
    """The table's providers of `ids` and their fallbacks, in the table's order (genai-prices
    follows a fallback one step only, so the fallbacks' own are not needed)."""
    wanted = set(ids)
    for provider in table.providers:
        if provider.id in ids:
            wanted.update(provider.fallback_model_providers or ())
    return [provider for provider in table.providers if provider.id in wanted]


def cut(hints: Hints) -> tuple[dict[str, str | None], list[Provider] | None]:
    """In the child: each provider's table provider, and the providers to keep (None: every
    one, some provider being priced by the model name)."""
    from gateway.price_table import table_provider, whole_table

    table = whole_table()
    providers = {name: table_provider(table, url, hint) for name, (url, hint) in hints.items()}
    ids = set(providers.values())
    if None in ids:
        return providers, None
    return providers, needed(table, {i for i in ids if i is not None})


class TableUnpickler(pickle.Unpickler):
    """Finds genai-prices' classes in the submodules gateway.price_table imported: unpickling
    would import them the usual way, with the package's `__init__` (its update client)."""

    def find_class(self, module: str, name: str) -> Any:
        if module.startswith("genai_prices.") and module in sys.modules:
            return getattr(sys.modules[module], name)
        return super().find_class(module, name)


@dataclass(slots=True)
class PendingPrices:
    settings: Settings | None
    process: subprocess.Popen[bytes] | None
    _ask: io.RawIOBase | None = None  # the child's stdin, until the hints are written
    cache: PriceCache | None = None
    hints: Hints | None = None
    cached: bytes | None = None  # the answer read from the cache: no child

    @classmethod
    def start(cls, settings: Settings, cache: PriceCache | None = None) -> PendingPrices:
        """Begun and asked at once; `cache` as `begin`'s (reading files: never in a loop)."""
        if hints_of(settings) is None:
            return cls(settings, None)
        pending = cls.begin(cache)
        pending.ask(settings)
        return pending

    @classmethod
    def begin(cls, cache: PriceCache | None = None) -> PendingPrices:
        """The child, started before the settings are known: it reads the table, then waits
        for `ask`. With a `cache` that keeps an answer of this table, no child yet: `ask`
        reads the answer, and starts the child only when there is none for its providers."""
        if cache is not None and cache.has_stamp():
            return cls(None, None, cache=cache)
        pending = cls.spawn()
        pending.cache = cache
        return pending

    @classmethod
    def spawn(cls) -> PendingPrices:
        ask = None
        try:
            asked, ask = os.pipe()
            with open(asked, "rb") as stdin:
                process = subprocess.Popen(
                    [sys.executable, *CHILD],
                    stdin=stdin,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.DEVNULL,
                )
        except OSError as exc:
            if ask is not None:
                os.close(ask)
            log.warning("price table: no child process (%s); the whole table", type(exc).__name__)
            return cls(None, None)
        return cls(None, process, open(ask, "wb", buffering=0))

    def ask(self, settings: Settings) -> None:
        """Send the child `settings`' hints; none (the child ends) when a provider is priced by
        the model name: then it is the whole table."""
        self.settings = settings
        hints = self.hints = hints_of(settings)
        if hints is not None and self.process is None and self._ask is None and self.cache:
            self.cached = self.cache.read(hints)
            if self.cached is not None:
                return
            spawned = self.spawn()  # none kept for these providers: the child now
            self.process, self._ask = spawned.process, spawned._ask
        pipe, self._ask = self._ask, None
        if pipe is None:
            return
        with pipe:
            if hints is None:
                self._end()
                return
            with contextlib.suppress(OSError):  # the child is gone: `answer` says how it ended
                pipe.write(orjson.dumps(hints))  # a few hundred bytes: the pipe holds them

    def abandon(self) -> None:
        """The gateway does not start: the child ends without an answer."""
        if self._ask is not None:
            self._ask.close()
            self._ask = None
        self._end()

    def _end(self) -> None:
        process, self.process = self.process, None
        if process is not None:
            process.kill()
            process.wait()
            if process.stdout is not None:
                process.stdout.close()

    async def result(self) -> Prices:
        """The configuration's prices: the cut table, else the whole one (read in a thread, like
        the child's answer: the event loop reads no file)."""
        import asyncio  # here: the child, which imports this module too, needs none of it

        return await asyncio.to_thread(self._prices)

    def _prices(self) -> Prices:
        from gateway.cost import Prices

        assert self.settings is not None, "ask() first"
        answer = self.answer()
        if answer is not None and (prices := prices_of(answer)) is not None:
            return prices
        if self.cached is not None and self.cache is not None and self.hints is not None:
            self.cache.forget(self.hints)  # it did not read: the next start asks the child
        return Prices.whole(self.settings)

    def answer(self) -> bytes | None:
        """The child's answer as it came (a supervisor hands it to its workers); None when there
        is none: the whole table then. Blocking: a thread's, or before the event loop."""
        if self.cached is not None:
            return self.cached
        process = self.process
        if process is None:
            return None
        try:
            out, _ = process.communicate(timeout=TIMEOUT_S)
        except subprocess.TimeoutExpired:
            process.kill()
            process.communicate()
            log.warning("price table: the child process timed out; the whole table")
            return None
        if process.returncode != 0:
            log.warning(
                "price table: the child process failed (exit %s); the whole table",
                process.returncode,
            )
            return None
        if self.cache is not None and self.hints is not None and out:
            self.cache.write(self.hints, out)
        return out


def prices_of(answer: bytes) -> Prices | None:
    """The prices in the child's answer; None (logged) when it does not read, or is the whole
    table's (then the process reads the whole table itself)."""
    from gateway.cost import Prices
    from gateway.price_table import table_of

    try:
        providers, chosen = TableUnpickler(io.BytesIO(answer)).load()  # our own child's
    except Exception as exc:  # whatever it is, the whole table still prices right
        log.warning("price table: the child's answer (%s); the whole table", type(exc).__name__)
        return None
    return None if chosen is None else Prices(providers, table_of(chosen))


@dataclass(frozen=True, slots=True)
class GivenPrices:
    """A worker's prices: its supervisor's child's answer (None: the whole table)."""

    settings: Settings
    answer: bytes | None

    async def result(self) -> Prices:
        import asyncio

        return await asyncio.to_thread(self._prices)

    def _prices(self) -> Prices:
        from gateway.cost import Prices

        prices = None if self.answer is None else prices_of(self.answer)
        return Prices.whole(self.settings) if prices is None else prices


def main() -> None:
    from gateway.price_table import whole_table

    whole_table()  # first: the gateway is still starting, and sends the hints when it can
    sent = sys.stdin.buffer.read()
    if not sent:  # the gateway did not start, or prices with the whole table: no answer
        return
    asked = orjson.loads(sent)
    hints = {name: (url, hint) for name, (url, hint) in asked.items()}
    pickle.dump(cut(hints), sys.stdout.buffer, protocol=pickle.HIGHEST_PROTOCOL)


if __name__ == "__main__":
    main()
