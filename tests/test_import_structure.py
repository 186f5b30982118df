"""The house's import structure: no import cycle anywhere in gateway/, providers/ and gateway_bench/
(type-checking and function-level imports included: a cycle hidden in a function is still one
concept leaning on another that leans back), and the layer contracts of pyproject.toml's
[tool.importlinter] (DESIGN.md §2's dependency direction), checked by import-linter."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import grimp
import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("gateway", "providers", "gateway_bench")


def import_cycles(graph: grimp.ImportGraph) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's, iteratively)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    found: list[list[str]] = []
    for root in sorted(graph.modules):
        if root in index:
            continue
        work = [(root, iter(sorted(graph.find_modules_directly_imported_by(root))))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, edges = work[-1]
            for nxt in edges:
                if nxt not in index:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(graph.find_modules_directly_imported_by(nxt)))))
                    break
                if nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        found.append(sorted(component))
    return found


def cycle_lines(graph: grimp.ImportGraph, component: list[str]) -> list[str]:
    members = set(component)
    lines = []
    for importer in component:
        for imported in sorted(graph.find_modules_directly_imported_by(importer) & members):
            for detail in graph.get_import_details(importer=importer, imported=imported):
                lines.append(f"{importer}:{detail['line_number']} {detail['line_contents']}")
    return lines


def test_no_import_cycle():
    graph = grimp.build_graph(
        *PACKAGES, include_external_packages=False, exclude_type_checking_imports=False
    )
    cycles = import_cycles(graph)
    assert not cycles, "import cycles:\n" + "\n\n".join(
        "\n".join(cycle_lines(graph, component)) for component in cycles
    )


def test_the_cycle_check_finds_a_cycle(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """The check itself can fail: two modules that import each other, one only when type
    checking, are one cycle."""
    package = tmp_path / "circle_pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "a.py").write_text("from circle_pkg import b\n")
    (package / "b.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from circle_pkg import a\n"
    )
    (package / "c.py").write_text("from circle_pkg import a\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    graph = grimp.build_graph(
        "circle_pkg", include_external_packages=False, exclude_type_checking_imports=False
    )
    assert import_cycles(graph) == [["circle_pkg.a", "circle_pkg.b"]]


def test_layer_contracts_are_kept():
    lint = Path(sys.executable).with_name("lint-imports")
    result = subprocess.run(
        [str(lint), "--no-cache"], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    assert "0 broken" in result.stdout
