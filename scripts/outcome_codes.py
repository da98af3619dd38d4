"""Rewrite the modules that defined their own outcome codes to import them from ``tracetochain._outcome``.

Mechanical and idempotent (issue 28): a line ``A, B, … = 0, 1, …`` whose names are (optionally ``_``-prefixed)
SUCCESS / FAILURE / CENSORED / INVALID becomes one import of those names; ``outcomes() != 3`` / ``== 0`` become the
named codes. Run from the repository root: ``python scripts/outcome_codes.py && ruff check --fix src``.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

SRC = Path("src/tracetochain")
NAMES = ("SUCCESS", "FAILURE", "CENSORED", "INVALID")
DEF = re.compile(r"^(?P<names>_?(?:SUCCESS|FAILURE|CENSORED|INVALID)(?:, *_?(?:SUCCESS|FAILURE|CENSORED|INVALID))*)"
                 r" *= *(?P<values>[0-3](?:, *[0-3])*)\n", re.M)
LITERAL = re.compile(r"(\.outcomes\(\)\)?(?:\[[^]\n]*\])?\)? *)(==|!=) *([03])\b")


def add_import(text: str, line: str) -> str:
    """``line`` after the module's last top-level import (``ruff check --fix`` sorts the block afterwards)."""
    if line in text:
        return text
    tree = ast.parse(text)
    last = max((node.end_lineno or node.lineno for node in tree.body if isinstance(node, (ast.Import, ast.ImportFrom))),
               default=0)
    lines = text.split("\n")
    lines.insert(last, line)
    return "\n".join(lines)


#: Modules whose SUCCESS / FAILURE are outcome *words*, not codes.
WORD_MODULES = ("tracetochain.serve._live", "tracetochain.whatif._edits")


def redirect_imports(text: str) -> str:
    """``from tracetochain.<module> import SUCCESS, …`` (a re-export of the codes) → from ``tracetochain._outcome``."""
    tree = ast.parse(text)
    lines = text.split("\n")
    moved: list[str] = []
    for node in sorted((n for n in tree.body if isinstance(n, ast.ImportFrom)), key=lambda n: -n.lineno):
        if not (node.module or "").startswith("tracetochain.") or node.module == "tracetochain._outcome" \
                or node.module in WORD_MODULES or node.level:
            continue
        codes = [a for a in node.names if a.name.lstrip("_") in NAMES]
        if not codes:
            continue
        moved += [a.name if a.asname is None else f"{a.name} as {a.asname}" for a in codes]
        rest = [a.name if a.asname is None else f"{a.name} as {a.asname}" for a in node.names if a not in codes]
        new = [f"from {node.module} import {', '.join(rest)}"] if rest else []
        lines[node.lineno - 1: node.end_lineno] = new
    text = "\n".join(lines)
    if moved:
        # the module that defined them also had them; the plain names come from tracetochain._outcome
        text = add_import(text, "from tracetochain._outcome import " + ", ".join(
            f"{m.lstrip('_')} as {m}" if m.startswith("_") and " as " not in m else m for m in sorted(set(moved))))
    return text


def rewrite(path: Path) -> bool:
    text = original = path.read_text(encoding="utf-8")
    m = DEF.search(text)
    needed: set[str] = set()
    if m:
        names = [n.strip() for n in m.group("names").split(",")]
        values = [int(v) for v in m.group("values").split(",")]
        assert all(NAMES[v] == n.lstrip("_") for n, v in zip(names, values, strict=True)), (path, names, values)
        aliases = ", ".join(sorted(n if not n.startswith("_") else f"{n[1:]} as {n}" for n in names))
        text = add_import(text[: m.start()] + text[m.end():], f"from tracetochain._outcome import {aliases}")

    def literal(mm: re.Match[str]) -> str:
        name = NAMES[int(mm.group(3))]
        needed.add(name)
        return f"{mm.group(1)}{mm.group(2)} OutcomeCode.{name}"

    text = LITERAL.sub(literal, text)
    text = redirect_imports(text)
    if needed:
        text = add_import(text, "from tracetochain._outcome import OutcomeCode")
    if text != original:
        path.write_text(text, encoding="utf-8")
        return True
    return False


if __name__ == "__main__":
    import sys

    roots = [Path(a) for a in sys.argv[1:]] or [SRC]
    changed = [str(p) for r in roots for p in sorted(r.rglob("*.py")) if p.name != "_outcome.py" and rewrite(p)]
    print("\n".join(changed))
