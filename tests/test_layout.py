"""The package's shape (issue 18): no import cycles between WebRACE's modules, no import of a
WebRACE module inside a function (the usual way to dodge a cycle), and the mode chosen in
one place (``REDIS_URL`` read only by the factory and the settings)."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest
from scrapy.settings import Settings

from webrace.spiders.dynabot import DynaBotSpider
from webrace.spiders.urd import UrdSpider

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "webrace"


def _module(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _resolve(node: ast.ImportFrom, module: str, is_package: bool) -> str:
    if not node.level:
        return node.module or ""
    base = module.split(".")
    base = base if is_package else base[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def _imports(path: Path) -> tuple[set[str], list[tuple[int, str]]]:
    """(modules imported at module level, (line, module) imported inside functions)."""
    module = _module(path)
    tree = ast.parse(path.read_text(encoding="utf-8"))
    top: set[str] = set()
    nested: list[tuple[int, str]] = []

    def names(node: ast.AST) -> list[str]:
        if isinstance(node, ast.Import):
            return [a.name for a in node.names]
        base = _resolve(node, module, path.name == "__init__.py")
        return [base] + [f"{base}.{a.name}" for a in node.names]

    def visit(node: ast.AST, in_function: bool, type_checking: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.Import, ast.ImportFrom)):
                found = [n for n in names(child) if n.split(".")[0] == "webrace"]
                if in_function:
                    nested.extend((child.lineno, n) for n in found)
                elif not type_checking:
                    top.update(found)
            elif isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                visit(child, True, type_checking)
            elif isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test):
                visit(child, in_function, True)
            else:
                visit(child, in_function, type_checking)

    visit(tree, False, False)
    return top, nested


def _graph(with_nested: bool) -> dict[str, set[str]]:
    modules = {_module(p): p for p in PACKAGE.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        top, nested = _imports(path)
        if with_nested:
            top |= {m for _, m in nested}
        # importing a.b.c runs a/__init__ and a/b/__init__ first: those are imported too
        parents = {".".join(m.split(".")[:i]) for m in top for i in range(2, m.count(".") + 1)}
        graph[name] = {m for m in top | parents if m in modules and m != name and not name.startswith(m + ".")}
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    # Tarjan's strongly connected components: a component of more than one module is a cycle.
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []

    def strong(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    sys.setrecursionlimit(10_000)
    for v in graph:
        if v not in index:
            strong(v)
    return cycles


def test_no_import_cycles_between_webrace_modules():
    assert _cycles(_graph(with_nested=False)) == []


def test_no_import_cycles_between_webrace_packages():
    """Layers, not a tangle: record types (``webrace.records``) below the stores
    (``webrace.backends``) below the engines and crawl components below the commands."""
    modules = _graph(with_nested=True)
    packages: dict[str, set[str]] = {}
    for module, imported in modules.items():
        top = ".".join(module.split(".")[:2])
        packages.setdefault(top, set()).update(".".join(m.split(".")[:2]) for m in imported)
    for top, imported in packages.items():
        imported.discard(top)
        for name in imported:
            packages.setdefault(name, set())
    assert _cycles(packages) == []


def test_no_import_inside_a_function_dodges_a_cycle():
    """Imports inside functions may defer a heavy or optional module; moved to the top of
    their modules, they must still make no cycle."""
    assert _cycles(_graph(with_nested=True)) == []


@pytest.mark.parametrize("name", ["REDIS_URL"])
def test_the_mode_is_read_only_by_the_factory_and_the_settings(name):
    allowed = {PACKAGE / "settings.py", PACKAGE / "backends" / "__init__.py"}
    readers = [str(p.relative_to(ROOT)) for p in PACKAGE.rglob("*.py")
               if p not in allowed and f'"{name}"' in p.read_text(encoding="utf-8")]
    assert readers == []


def test_the_lease_scheduler_is_configured_only_in_distributed_mode():
    def scheduler(spider, **values):
        settings = Settings({"SCHEDULER": "scrapy.core.scheduler.Scheduler", **values})
        spider.update_settings(settings)
        return settings["SCHEDULER"]

    assert scheduler(UrdSpider) == "scrapy.core.scheduler.Scheduler"
    assert scheduler(UrdSpider, REDIS_URL="redis://127.0.0.1:1/0") == "webrace.distributed.scheduler.LeaseScheduler"
    assert scheduler(DynaBotSpider, REDIS_URL="redis://127.0.0.1:1/0") == "scrapy.core.scheduler.Scheduler"


def test_the_round_engine_imports_neither_scrapy_nor_twisted():
    """``webrace.rounds`` and every WebRACE module it imports, at module level."""
    modules = {_module(p): p for p in PACKAGE.rglob("*.py")}
    graph = _graph(with_nested=False)
    seen, todo = set(), [m for m in modules if m.startswith("webrace.rounds")]
    while todo:
        name = todo.pop()
        if name not in seen:
            seen.add(name)
            todo += graph[name]
    offenders = []
    for name in sorted(seen):
        tree = ast.parse(modules[name].read_text(encoding="utf-8"))
        for node in tree.body:  # module level (a TYPE_CHECKING block is not run)
            if isinstance(node, ast.Import):
                roots = [a.name.split(".")[0] for a in node.names]
            elif isinstance(node, ast.ImportFrom) and not node.level:
                roots = [(node.module or "").split(".")[0]]
            else:
                continue
            offenders += [f"{name}: {r}" for r in roots if r in ("scrapy", "twisted")]
    assert "webrace.rounds.engine" in seen and offenders == []
