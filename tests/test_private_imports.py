"""Packages import each other only through public names (issue 28; the rule is in docs/architecture.md).

A module of ``tracetochain.<pkg>`` may import ``tracetochain.<pkg>._anything``; a module anywhere else may not: it
imports ``tracetochain.<pkg>`` (the names users import, its ``__init__``) or ``tracetochain.<pkg>.shared`` (names
the library shares between its packages, no promise to users). Top-level private modules (``tracetochain._display``,
``tracetochain._outcome`` …) belong to no package and are the foundation every package may use. Every import counts:
module level, inside functions, under ``TYPE_CHECKING``.
"""

from __future__ import annotations

import ast
from pathlib import Path

import tracetochain

PACKAGE = Path(tracetochain.__file__).resolve().parent


def private_imports(path: Path) -> list[tuple[int, str]]:
    """(line, module) of every import of another package's private module in one source file."""
    rel = path.relative_to(PACKAGE.parent).with_suffix("")
    parts = rel.parts if rel.name != "__init__" else rel.parts[:-1]
    own = parts[1] if len(parts) > 1 and (PACKAGE / parts[1]).is_dir() else None
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        modules: list[str] = []
        if isinstance(node, ast.Import):
            modules = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            modules = [node.module, *(f"{node.module}.{a.name}" for a in node.names)]
        elif isinstance(node, ast.ImportFrom) and node.level:
            base = parts[: len(parts) - node.level + (1 if path.name == "__init__.py" else 0)]
            modules = [".".join((*base, *([node.module] if node.module else [])))]
        for module in modules:
            bits = module.split(".")
            if len(bits) >= 3 and bits[0] == "tracetochain" and (PACKAGE / bits[1]).is_dir() \
                    and bits[2].startswith("_") and bits[1] != own:
                found.append((node.lineno, module))
                break
    return found


def test_no_package_imports_another_packages_private_module() -> None:
    offenders = {f"{p.relative_to(PACKAGE.parent)}:{line}": module
                 for p in sorted(PACKAGE.rglob("*.py")) for line, module in private_imports(p)}
    assert not offenders, (f"{len(offenders)} imports reach into another package's private module; import the name "
                           "from the package or its `shared` module (docs/architecture.md): "
                           + ", ".join(f"{k} {v}" for k, v in offenders.items()))


def test_the_scan_sees_what_it_should(tmp_path: Path) -> None:
    # The scan itself, on the forms it must catch and the ones it must let through.
    src = PACKAGE / "analysis" / "__probe__.py"
    try:
        src.write_text("from tracetochain.audit._common import json_dict\n"
                       "import tracetochain.chain._counts\n"
                       "def f():\n    from tracetochain.models._encoded import encode_traces\n"
                       "from tracetochain.analysis._summary import FIT\n"
                       "from tracetochain._display import Display\n"
                       "from tracetochain.audit import Certificate\n", encoding="utf-8")
        got = [m for _, m in private_imports(src)]
    finally:
        src.unlink()
    assert got == ["tracetochain.audit._common", "tracetochain.chain._counts", "tracetochain.models._encoded"]
