"""genai-prices' table and types, imported without the package's `__init__`; the table itself
only when asked for, whole or cut to some of its providers.

    from gateway.price_table import ModelInfo, Usage, table_of, whole_table
    table = whole_table()                        # every provider: genai-prices' get_snapshot()
    table = table_of([openai, anthropic])        # a table of these providers only

`genai_prices/__init__.py` imports the package's price-update client (`update_prices`, and with
it httpx2: about 1.3 MiB resident), which the gateway never runs: it prices from the bundled
table. None of the other submodules needs the `__init__`, so they are imported under a bare
package module (the package's own spec, not executed) that is then taken out of `sys.modules`
again. A later `import genai_prices` (a user's, a test's) runs the `__init__` as usual and finds
these same submodules there: one table and one set of types, whichever import came first.

Every submodule but the update client, the command line and the table is imported now, before
the server runs: genai-prices imports some of them inside its functions, which must not read
files inside the event loop. Should a version's submodule need the `__init__` after all, the
whole package is imported the usual way instead: the same table, only without the saving.

The table (`genai_prices.data`) is a 1.6 MB module that builds every provider's models, about
3.8 MB resident once imported, and what is freed of it afterwards stays with the process
(pymalloc's arenas keep the survivors' neighbours). `whole_table()` imports it; a serving
process that prices with a few providers gets only those from gateway.price_subset, which
imports it in a child process.
"""

from __future__ import annotations

import importlib
import importlib.util
import pkgutil
import sys
from collections.abc import Iterable
from typing import Final

PACKAGE: Final = "genai_prices"
# Its price-update client (httpx2) and its command line: never run by the gateway.
SKIPPED: Final = frozenset({"update_prices", "_cli", "__main__"})
TABLE: Final = "data"  # the bundled table: imported by whole_table()


def import_submodules(
    package: str, skipped: frozenset[str] = frozenset(), only: frozenset[str] | None = None
) -> None:
    """Imports `package`'s submodules but `skipped` (of `only`, when given), without running its
    `__init__` when it was not imported yet (and the usual way when one of them needs it)."""
    if only is not None:
        skipped = skipped | frozenset(name for name in _names(package) if name not in only)
    if package in sys.modules:  # imported already: nothing left to save
        _import_each(package, sys.modules[package].__path__, skipped)
        return
    spec = importlib.util.find_spec(package)
    if spec is None or spec.submodule_search_locations is None:
        importlib.import_module(package)  # raises the usual ModuleNotFoundError
        return
    bare = importlib.util.module_from_spec(spec)
    sys.modules[package] = bare
    try:
        _import_each(package, spec.submodule_search_locations, skipped)
    except (ImportError, AttributeError):  # a submodule reads what the `__init__` defines
        for name in [n for n in sys.modules if n == package or n.startswith(package + ".")]:
            del sys.modules[name]
        _import_each(package, importlib.import_module(package).__path__, skipped)
    finally:
        if sys.modules.get(package) is bare:
            del sys.modules[package]


def _names(package: str) -> list[str]:
    spec = importlib.util.find_spec(package)
    locations = spec.submodule_search_locations if spec is not None else None
    return [info.name for info in pkgutil.iter_modules(locations or [])]


def _import_each(package: str, path: Iterable[str], skipped: frozenset[str]) -> None:
    for info in pkgutil.iter_modules(path):
        if info.name not in skipped:
            importlib.import_module(f"{package}.{info.name}")


import_submodules(PACKAGE, SKIPPED | {TABLE})

# After the loading above, on purpose: these find the submodules in sys.modules.
from genai_prices.data_snapshot import DataSnapshot, get_snapshot  # noqa: E402
from genai_prices.types import ModelInfo, ModelPrice, Provider, TieredPrices, Usage  # noqa: E402


def whole_table() -> DataSnapshot:
    """Every provider of genai-prices' bundled table, imported by the first call (so not inside
    the event loop: a pricer takes its table when it is built)."""
    if f"{PACKAGE}.{TABLE}" not in sys.modules:
        import_submodules(PACKAGE, only=frozenset({TABLE}))
    return get_snapshot()


def table_of(providers: list[Provider]) -> DataSnapshot:
    """A table of `providers` only: genai-prices' lookups over it find what the whole table's
    find for them, as long as each one's `fallback_model_providers` are among them."""
    return DataSnapshot(providers=providers, from_auto_update=False)


def table_provider(table: DataSnapshot, base_url: str | None, hint: str | None) -> str | None:
    """The table's provider for a configured provider: the one its `base_url` belongs to when the
    table knows the URL (an OpenAI-compatible kind pointed at Groq, DeepSeek, OpenRouter,
    Azure...), else its kind's `hint` (a loopback or self-hosted server), else None (priced by
    the model name)."""
    if base_url is not None:
        try:
            return table.find_provider(None, None, base_url).id
        except LookupError:
            pass
    return hint


__all__ = (
    "DataSnapshot",
    "ModelInfo",
    "ModelPrice",
    "Provider",
    "TieredPrices",
    "Usage",
    "table_of",
    "table_provider",
    "whole_table",
)
