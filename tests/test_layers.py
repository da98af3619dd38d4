"""The package is built in layers — traces, readers, states, chain, statistics, analysis, report, CLI, from the bottom
up — and no module imports from a package ranked above its own.

Every import of ``tracetochain`` code counts: at module level, inside functions (a lazy import still makes the lower
layer depend on the upper one), under ``TYPE_CHECKING``, relative, and ``importlib.import_module("tracetochain…")``
with a literal name. The one exception is a lazy re-export: a package's ``__init__.__getattr__`` that hands out an
entry point defined higher up, so that users keep importing it from where they always did. Those are listed in
:data:`REEXPORTS`, and the list must match the code exactly.
"""

from __future__ import annotations

import ast
import functools
import re
from pathlib import Path

import tracetochain

PACKAGE = Path(tracetochain.__file__).resolve().parent

#: The layers, lowest first: (top-level modules and subpackages of tracetochain, why they sit there). A module may
#: import from its own layer and the layers before it, never from a later one.
LAYERS: tuple[tuple[tuple[str, ...], str], ...] = (
    (("_compat", "_config_files", "_display", "_files", "_lazy", "_limits", "_optional", "_outcome", "_parallel",
      "_progress", "_text", "_version", "exceptions", "numerics"),
     "foundation: errors, display, file and resource guards, moved names, worker processes, absorbing-chain numerics "
     "on plain arrays"),
    (("traces",), "the canonical trace table: schema, validation, canonical files (JSONL, CSV, Parquet)"),
    (("featurize", "readers"), "other sources' formats → traces; step features for state discovery"),
    (("states",), "state discovery and labelling of traces"),
    (("chain",), "counts, prior and estimator → AbsorbingChain, with the per-state cost model it carries"),
    # datasets simulate traces from chains (notation_chain, simulate_traces), so they sit above chain; nothing in
    # the library below the entry points uses them — they serve examples, tests and studies.
    (("datasets", "pipeline"), "one step above the chain: traces simulated from it; states → chain in one call"),
    (("audit", "costs", "families", "metrics", "models", "paths", "quantities", "uncertainty", "whatif"),
     "statistics of a fitted chain and of its sufficient statistics (paths: of the traces' state paths; quantities: "
     "the registry of every reported number)"),
    (("partitioned",), "a corpus larger than memory: planning, reading and counting partitions"),
    (("engines",), "where partitions are processed (local, Dask)"),
    (("analysis",), "analyze(): traces → states → chain → certificate → intervals, and entry points that run it"),
    (("compare", "monitor"), "built on the analysis: two corpora side by side, drift over time"),
    (("instrument", "report", "serve"), "render results, record traces from live agents, the live service"),
    (("cli",), "the command line: parses arguments, calls the library once, renders"),
    (("__init__", "__main__"), "the public facade (lazy names) and python -m tracetochain"),
)
RANK = {name: rank for rank, (names, _) in enumerate(LAYERS) for name in names}

#: Lazy re-exports allowed to point up: (package, module it re-exports from) → why users import the names there.
REEXPORTS: dict[tuple[str, str], str] = {
    ("audit", "tracetochain.analysis._entry_points"):
        "audit() and homogeneity_test() run the analysis; users import them from tracetochain.audit",
    ("partitioned", "tracetochain.analysis._partitioned"):
        "audit_partitioned, fit_partitioned & co. run the analysis; users import them from tracetochain.partitioned",
}


def top_level(module: str) -> str | None:
    """The layer name of an absolute module path inside tracetochain (``__init__`` for the package itself)."""
    parts = module.split(".")
    if parts[0] != "tracetochain":
        return None
    return parts[1] if len(parts) > 1 else "__init__"


def resolve(node: ast.ImportFrom, module_parts: tuple[str, ...], is_package: bool) -> str:
    """The absolute module of a (possibly relative) ``from … import``."""
    if node.level == 0:
        return node.module or ""
    package = module_parts if is_package else module_parts[:-1]
    base = package[: len(package) - node.level + 1]
    return ".".join((*base, *([node.module] if node.module else [])))


def imported_modules(node: ast.AST, module_parts: tuple[str, ...], is_package: bool) -> list[str]:
    """The tracetochain modules one import node (or importlib.import_module call) brings in."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if isinstance(node, ast.ImportFrom):
        base = resolve(node, module_parts, is_package)
        if base == "tracetochain":  # ``from tracetochain import numerics`` names a layer; other names the facade
            return [f"tracetochain.{a.name}" if a.name in RANK else "tracetochain" for a in node.names]
        return [base]
    if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "import_module"
            and node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)):
        return [node.args[0].value]
    return []


def reexport_nodes(tree: ast.Module) -> set[int]:
    """ids of the nodes inside a module-level ``def __getattr__`` (PEP 562): where lazy re-exports live."""
    return {id(inner) for fn in tree.body if isinstance(fn, ast.FunctionDef) and fn.name == "__getattr__"
            for inner in ast.walk(fn)}


#: Text that every import able to reach up must contain: ``tracetochain.<layer>`` (also in ``import_module``),
#: ``from tracetochain import``, a bare ``import tracetochain``, or a relative import.
MENTION = re.compile(r"\btracetochain\.(\w+)|\bfrom\s+tracetochain\s+import\b|^\s*import\s+tracetochain\b"
                     r"|^\s*from\s+\.", re.MULTILINE)


def may_reach_up(text: str, layer: str) -> bool:
    """Whether the source mentions a higher layer in a way an import could (a cheap superset of the parse below, which
    keeps the test fast: only these files are parsed)."""
    for match in MENTION.finditer(text):
        target = match.group(1)
        if target is None or (target in RANK and RANK[target] > RANK[layer]):
            return True
    return False


@functools.cache
def scan() -> tuple[list[str], set[tuple[str, str]], list[str]]:
    """(upward imports as "file:line …", lazy re-exports found, modules missing from LAYERS)."""
    upward: list[str] = []
    reexports: set[tuple[str, str]] = set()
    unranked: list[str] = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE)
        layer = rel.parts[0].removesuffix(".py")
        if layer not in RANK:
            unranked.append(str(rel))
            continue
        is_package = rel.name == "__init__.py"
        module_parts = ("tracetochain", *rel.with_suffix("").parts[:-1]) if is_package else \
            ("tracetochain", *rel.with_suffix("").parts)
        text = path.read_text(encoding="utf-8")
        if not may_reach_up(text, layer):
            continue
        tree = ast.parse(text, filename=str(path))
        lazy = reexport_nodes(tree) if is_package and len(rel.parts) == 2 else set()
        for node in ast.walk(tree):
            for module in dict.fromkeys(imported_modules(node, module_parts, is_package)):
                target = top_level(module)
                if target is None or target == layer or target not in RANK or RANK[target] <= RANK[layer]:
                    continue
                if id(node) in lazy:
                    reexports.add((layer, module))
                    continue
                upward.append(f"{rel}:{node.lineno} imports {module} "
                              f"({layer}: layer {RANK[layer]} < {target}: layer {RANK[target]})")
    return upward, reexports, unranked


def test_no_module_imports_from_a_higher_layer() -> None:
    upward, _, unranked = scan()
    assert not unranked, f"add these to a layer of LAYERS in {__file__}: {unranked}"
    assert not upward, "imports that reach up (move the code to the layer it belongs to):\n" + "\n".join(upward)


def test_lazy_reexports_are_the_listed_ones() -> None:
    _, reexports, _ = scan()
    assert reexports == set(REEXPORTS), (f"unlisted lazy re-exports: {sorted(reexports - set(REEXPORTS))}; "
                                         f"stale entries of REEXPORTS: {sorted(set(REEXPORTS) - reexports)}")


def test_the_scan_sees_every_kind_of_import() -> None:
    """The checker itself: lazy, relative, TYPE_CHECKING and import_module imports are all found."""
    source = (
        "import importlib\nfrom typing import TYPE_CHECKING\n"
        "from tracetochain.chain import AbsorbingChain\n"           # same layer as below: ignored
        "if TYPE_CHECKING:\n    from tracetochain.analysis import analyze\n"
        "def f():\n    from ..report import render\n    import tracetochain.cli\n"
        "    importlib.import_module('tracetochain.serve')\n    from tracetochain import Certificate, numerics\n"
    )
    tree = ast.parse(source)
    parts = ("tracetochain", "traces", "_table")
    found = [m for node in ast.walk(tree) for m in imported_modules(node, parts, False)]
    assert sorted({top_level(m) for m in found} - {None}) == ["__init__", "analysis", "chain", "cli", "numerics",
                                                              "report", "serve"]
    package_import, module_import = ast.parse("from . import _json\nfrom ._json import x").body
    assert isinstance(package_import, ast.ImportFrom) and isinstance(module_import, ast.ImportFrom)
    assert resolve(package_import, ("tracetochain", "traces"), True) == "tracetochain.traces"
    assert resolve(module_import, ("tracetochain", "traces", "_canonical"), False) == "tracetochain.traces._json"
