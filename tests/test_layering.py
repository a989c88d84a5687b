"""The package's layering, from the imports of every module (read with ``ast``, nothing
imported): the data flow of docs/architecture.md, held.

Layers, lowest first: the shared helpers at the top of the package (``BASE``), then
``read`` < ``model`` < ``explain`` < ``gate`` < ``measure`` < ``render`` < ``sweep`` < the
front ends (``FRONT``). The gate judges the model's numbers with the explanation's words;
``measure`` (the GPU, ncu, nvcc) writes runs ``read`` reads and makes the static gate's
baselines, so it sits above the gate; ``render`` shows the gate's verdicts and the
sweep's ``render.sweep`` is what ``sweep`` writes. A module may import its own layer and
any below it, never one above (``ALLOWED`` would name an exception; there is none).
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "paprof"

BASE = ("paprof._version", "paprof.errors", "paprof.names", "paprof.jsonsafe", "paprof.safetext",
        "paprof.outputs", "paprof.parallel", "paprof.progress", "paprof.interrupts",
        "paprof.family", "paprof.registry", "paprof.phases")
FRONT = ("paprof", "paprof.__main__", "paprof.api", "paprof.compare_flow", "paprof.cli", "paprof.entry",
         "paprof.commands", "paprof.notebook", "paprof.profile_api", "paprof.callable_family",
         "paprof.agent")
LAYERS = (("base", BASE), ("read", ("paprof.read",)), ("model", ("paprof.model",)),
          ("explain", ("paprof.explain",)), ("gate", ("paprof.gate",)),
          ("measure", ("paprof.measure",)), ("render", ("paprof.render",)),
          ("sweep", ("paprof.sweep",)), ("front ends", FRONT))

ALLOWED: set[tuple[str, str]] = set()
"""Imports allowed to run upward: none. (``explain.finish`` asked ``measure.source_text``
for the hot spots' source lines until the front end handed the model a function that
reads them, ``paprof.compare_flow``.)"""


MAX_LAZY = 40
"""Imports of paprof modules inside functions, outside the front ends (which stay lazy
for the command line's start-up): each one hides an edge of the layering."""


def _name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def layer(module: str) -> int:
    """The index in ``LAYERS`` of ``module``'s layer (the longest prefix that names it)."""
    best, length = None, -1
    for i, (_, prefixes) in enumerate(LAYERS):
        for p in prefixes:
            if (module == p or module.startswith(p + ".")) and len(p) > length:
                best, length = i, len(p)
    assert best is not None, f"{module}: in no layer (add it to LAYERS)"
    return best


def _targets(module: str, node: ast.AST) -> list[tuple[str, str | None]]:
    """(imported paprof module, imported name or None) of one import statement."""
    if isinstance(node, ast.Import):
        return [(a.name, None) for a in node.names if a.name.split(".")[0] == "paprof"]
    base = node.module or ""
    if node.level:
        package = module.split(".")
        if MODULES[module].name != "__init__.py":
            package = package[:-1]
        package = package[:len(package) - node.level + 1]
        base = ".".join(package + ([base] if base else []))
    if base.split(".")[0] != "paprof":
        return []
    return [(f"{base}.{a.name}", None) if f"{base}.{a.name}" in MODULES else (base, a.name)
            for a in node.names]


def imports() -> list[tuple[str, str, bool, str | None, int]]:
    """Every import of a paprof module: (importer, imported, inside a function, name, line)."""
    found = []
    for module, path in MODULES.items():
        def walk(node, in_function):
            for child in ast.iter_child_nodes(node):
                inside = in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef,
                                                           ast.Lambda))
                if isinstance(child, (ast.Import, ast.ImportFrom)):
                    found.extend((module, target, inside, name, child.lineno)
                                 for target, name in _targets(module, child))
                walk(child, inside)
        walk(ast.parse(path.read_text()), False)
    return found


IMPORTS = imports()


def upward() -> list[str]:
    return sorted({f"{a} ({LAYERS[layer(a)][0]}) -> {b} ({LAYERS[layer(b)][0]})"
                   for a, b, *_ in IMPORTS if layer(b) > layer(a) and (a, b) not in ALLOWED})


def lazy() -> list[str]:
    front = len(LAYERS) - 1
    return [f"{a}:{line} -> {b}" for a, b, inside, _, line in IMPORTS
            if inside and layer(a) != front]


def private() -> list[str]:
    return sorted(f"{a}:{line} imports {b}.{name}" for a, b, _, name, line in IMPORTS
                  if name and name.startswith("_") and not name.startswith("__") and a != b)


def cycles() -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    graph = defaultdict(set)
    for a, b, *_ in IMPORTS:
        if a != b:
            graph[a].add(b)
    index, low, stack, on, found, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_no_import_runs_from_a_lower_layer_to_a_higher_one():
    assert upward() == []


def test_no_import_cycle():
    assert cycles() == []


def test_no_private_name_is_imported_from_another_module():
    assert private() == []


def test_the_front_ends_take_what_they_need_from_below_through_the_api():
    """The CLI's commands, the notebook and the MCP tools import the layers below only
    through ``paprof.api`` (the shared helpers of ``BASE`` aside)."""
    front = len(LAYERS) - 1
    around = sorted(f"{a}:{line} -> {b}" for a, b, _, _, line in IMPORTS
                    if layer(a) == front and layer(b) != front and b not in BASE)
    assert around == []


def test_few_imports_hide_inside_functions_below_the_front_ends():
    assert len(lazy()) <= MAX_LAZY, "\n".join(lazy())


def test_the_checks_can_fail():
    """The walk sees what it must: today's lazy imports, and an upward import when one
    is made up."""
    assert lazy(), "no import inside a function found: the walk is blind"
    assert layer("paprof.read.store") < layer("paprof.model.load") < layer("paprof.explain.fmt")
    assert layer("paprof.explain.fmt") < layer("paprof.render.html") < layer("paprof.cli")
    assert _targets("paprof.read.store", ast.parse("from paprof.explain import fmt").body[0]) == [
        ("paprof.explain.fmt", None)]
