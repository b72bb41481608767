"""lakeflow's module layout (fast, reads source only): the layers, each importing only its own and
those below it — ``cli`` (the only code parsing arguments) → the domain (catalog, ingest, compaction,
lineage, query, stack, aws_profile, demo) → the shared leaves (settings, credentials, auth, http,
secret, uris, readings, schema) → the runtime layer (``lakeflow.runtime``: where Flink and Spark are, jars,
processes, memory, the class archive, the cluster managers, ports, private files), a leaf that imports
no other lakeflow module but the exception hierarchy (``lakeflow.errors``, itself a leaf); no import cycle; and pyspark imported only by the Spark engine's modules, so
an arrow compaction run never loads it. Imports inside functions count everywhere.

A module's *module-level* imports are those its body runs on import: not those inside functions,
nor those under ``if TYPE_CHECKING:``. Importing ``a.b.c`` also runs ``a`` and ``a.b``. Its
*imports* are all of them, inside functions included (a lazy import still ties two modules).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "lakeflow"
# Each top-level part of lakeflow → its layer; a module imports its own layer and those below only.
LAYERS = {
    "cli": 3,  # parses arguments, prints for people
    **dict.fromkeys(("catalog", "ingest", "compaction", "dead_letters", "lineage", "query", "stack", "aws_profile", "demo"), 2),
    **dict.fromkeys(("settings", "credentials", "auth", "http", "secret", "uris", "readings", "schema", "streams"), 1),
    "runtime": 0,  # a leaf: imports no other lakeflow module but the exception hierarchy
    "errors": 0,  # the exception hierarchy: a leaf every layer may raise from
    "__init__": 0,  # the version
    "prereqs": 0,  # run before the virtualenv exists: the standard library only
}


def _modules() -> dict[str, Path]:
    """Every module of the package by dotted name (a package by its ``__init__.py``)."""
    out = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return out


def _is_type_checking(test: ast.expr) -> bool:
    return isinstance(test, (ast.Name, ast.Attribute)) and ast.unparse(test).endswith("TYPE_CHECKING")


def module_imports(name: str, path: Path, *, inside_functions: bool = False) -> set[str]:
    """The dotted names ``name``'s module-level statements import (for ``from m import x``: ``m`` and
    ``m.x``); with ``inside_functions``, also those of its functions and methods."""
    is_package = path.name == "__init__.py"
    found: set[str] = set()

    def visit(body: list[ast.stmt]) -> None:
        for node in body:
            if isinstance(node, ast.Import):
                found.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:  # relative: from the package ``level`` steps up
                    package = name.split(".") if is_package else name.split(".")[:-1]
                    base = ".".join([*package[:len(package) - node.level + 1], *([base] if base else [])])
                found.add(base)
                found.update(f"{base}.{alias.name}" for alias in node.names)
            elif isinstance(node, ast.If):
                visit(node.orelse if _is_type_checking(node.test) else [*node.body, *node.orelse])
            elif isinstance(node, ast.Try):
                visit([*node.body, *(s for h in node.handlers for s in h.body), *node.orelse, *node.finalbody])
            elif isinstance(node, ast.With):
                visit(node.body)
            elif inside_functions and isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                visit(node.body)
            elif inside_functions and isinstance(node, (ast.For, ast.While)):
                visit([*node.body, *node.orelse])

    visit(ast.parse(path.read_text(), str(path)).body)
    return found


def import_graph(*, inside_functions: bool = False) -> dict[str, set[str]]:
    """lakeflow module → the lakeflow modules importing it runs (its own enclosing packages aside,
    which Python has started importing before it); with ``inside_functions``, those its functions
    import too."""
    modules = _modules()
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        deps: set[str] = set()
        for imported in module_imports(name, path, inside_functions=inside_functions):
            parts = imported.split(".")
            for n in range(1, len(parts) + 1):
                dep = ".".join(parts[:n])
                if dep in modules and dep != name and not (n < len(parts) and name.startswith(dep + ".")):
                    deps.add(dep)
        graph[name] = deps
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def connect(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                connect(w)
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
            if len(component) > 1 or v in graph[v]:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            connect(v)
    return found


def test_the_graph_sees_what_python_runs() -> None:
    """The graph holds the imports a module runs, and only those (so the cycle check can fail)."""
    graph = import_graph()
    assert "lakeflow.compaction.engine" in graph["lakeflow.compaction.arrow.engine"]
    assert "lakeflow.readings" in graph["lakeflow.ingest.sink"]
    assert "lakeflow.compaction.files" not in graph["lakeflow.compaction.engine"]  # under TYPE_CHECKING
    assert "lakeflow.compaction.spark.engine" not in graph["lakeflow.compaction.run"]  # inside a function
    assert "lakeflow.compaction.spark.engine" in import_graph(inside_functions=True)["lakeflow.compaction.run"]
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_no_import_cycle_even_inside_functions() -> None:
    found = cycles(import_graph(inside_functions=True))
    assert not found, "import cycles in lakeflow/: " + "; ".join(" ↔ ".join(c) for c in found)


def test_the_runtime_layer_imports_no_other_lakeflow_module() -> None:
    graph = import_graph(inside_functions=True)
    runtime = {n for n in graph if n.startswith("lakeflow.runtime")}
    assert runtime >= {"lakeflow.runtime.homes", "lakeflow.runtime.jars", "lakeflow.runtime.processes",
                       "lakeflow.runtime.flink_cluster", "lakeflow.runtime.spark_cluster"}
    upward = {n: sorted(d) for n in runtime if (d := graph[n] - runtime - {"lakeflow", "lakeflow.errors"})}
    assert not upward, f"lakeflow.runtime modules importing the layers above: {upward}"


def test_the_exception_hierarchy_is_a_leaf() -> None:
    """``lakeflow.errors`` imports no lakeflow module, so every layer (runtime included) may raise its errors."""
    assert import_graph(inside_functions=True)["lakeflow.errors"] <= {"lakeflow"}


def _part(module: str) -> str:
    """The top-level part of lakeflow a module belongs to (``__init__`` for the package itself)."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def test_every_part_has_a_layer() -> None:
    assert {_part(n) for n in _modules()} == set(LAYERS)


def upward_imports(graph: dict[str, set[str]]) -> list[str]:
    """``module → dependency`` for every import into a higher layer."""
    return sorted(f"{n} → {d}" for n, deps in graph.items() for d in deps if LAYERS[_part(d)] > LAYERS[_part(n)])


def test_each_layer_imports_only_its_own_and_those_below_even_inside_functions() -> None:
    upward = upward_imports(import_graph(inside_functions=True))
    assert not upward, "imports into a higher layer: " + "; ".join(upward)


def test_the_layer_check_can_fail() -> None:
    """A domain module importing the CLI, or a leaf the domain, is caught; downward imports are not."""
    graph = {
        "lakeflow.compaction.report": {"lakeflow.cli.output", "lakeflow.settings"},
        "lakeflow.settings.env": {"lakeflow.stack", "lakeflow.runtime.files"},
        "lakeflow.cli.main": {"lakeflow.compaction.lease", "lakeflow.runtime.ports", "lakeflow"},
    }
    assert upward_imports(graph) == ["lakeflow.compaction.report → lakeflow.cli.output",
                                     "lakeflow.settings.env → lakeflow.stack"]


def test_only_the_cli_parses_arguments() -> None:
    """argparse is imported by ``lakeflow.cli`` alone (inside functions too); the jobs' entry points
    parse their command lines through it."""
    modules = _modules() | {f"jobs.{path.stem}": path for path in (PACKAGE.parent / "jobs").glob("*.py")}
    parsing = sorted(n for n, path in modules.items() if "argparse" in module_imports(n, path, inside_functions=True))
    assert parsing and all(n.startswith("lakeflow.cli.") for n in parsing), parsing


@pytest.mark.parametrize("leaf", ["lakeflow.readings", "lakeflow.uris", "lakeflow.compaction.engine"])
def test_contracts_are_leaves(leaf: str) -> None:
    """The ingest↔compaction contract, the URI schemes and the engine contract import no lakeflow module."""
    assert import_graph()[leaf] <= {"lakeflow", "lakeflow.compaction"}


def test_only_the_spark_engine_imports_pyspark() -> None:
    modules = _modules()
    spark = {n for n in modules if n.startswith("lakeflow.compaction.spark")}
    importers = {n for n, path in modules.items() if n.startswith("lakeflow.compaction")
                 and any(i.split(".")[0] == "pyspark" for i in module_imports(n, path))}
    assert importers and importers <= spark, sorted(importers - spark)
