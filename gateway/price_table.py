"""genai-prices' table and types, imported without the package's `__init__`.

    from gateway.price_table import ModelInfo, Usage, get_snapshot

`genai_prices/__init__.py` imports the package's price-update client (`update_prices`, and with
it httpx2: about 1.3 MiB resident), which the gateway never runs: it prices from the bundled
table. None of the other submodules needs the `__init__`, so they are imported under a bare
package module (the package's own spec, not executed) that is then taken out of `sys.modules`
again. A later `import genai_prices` (a user's, a test's) runs the `__init__` as usual and finds
these same submodules there: one table and one set of types, whichever import came first.

Every submodule but the update client and the command line is imported now, before the server
runs: genai-prices imports some of them inside its functions, which must not read files inside
the event loop. Should a version's submodule need the `__init__` after all, the whole package is
imported the usual way instead: the same table, only without the saving.
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


def import_submodules(package: str, skipped: frozenset[str] = frozenset()) -> None:
    """Imports `package`'s submodules but `skipped`, without running its `__init__` when it was
    not imported yet (and the usual way when one of them needs it)."""
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


def _import_each(package: str, path: Iterable[str], skipped: frozenset[str]) -> None:
    for info in pkgutil.iter_modules(path):
        if info.name not in skipped:
            importlib.import_module(f"{package}.{info.name}")


import_submodules(PACKAGE, SKIPPED)

# After the loading above, on purpose: these find the submodules in sys.modules.
from genai_prices.data_snapshot import get_snapshot  # noqa: E402
from genai_prices.types import ModelInfo, ModelPrice, Provider, TieredPrices, Usage  # noqa: E402

__all__ = ("ModelInfo", "ModelPrice", "Provider", "TieredPrices", "Usage", "get_snapshot")
