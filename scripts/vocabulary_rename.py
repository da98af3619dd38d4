"""Rewrite calls that use a deprecated keyword spelling to the library's one vocabulary (issue 28).

``samples`` counts replicates, ``level`` is a significance level, ``intervals`` says how intervals are made. The old
spellings still work for one release (``tracetochain._compat.renamed_parameters``) but warn; this rewrites the
calls in the repository (AST-located: only keywords of calls to the functions below). Idempotent; run from the
repository root: ``python scripts/vocabulary_rename.py src tests benchmarks studies scripts``.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

#: callable name → {old keyword: new keyword}
RENAMES: dict[str, dict[str, str]] = {
    "analyze": {"n_samples": "samples"},
    "board": {"n_samples": "samples"},
    "audit_partitioned": {"n_resamples": "samples"},
    "bootstrap_partitioned": {"n_resamples": "samples"},
    "DirichletPosterior": {"n_samples": "samples"},
    "TraceBootstrap": {"n_resamples": "samples"},
    "homogeneity_test": {"n_replicates": "samples"},
    "compare": {"method": "intervals"},
    "interval_summary": {"method": "intervals"},
    "monitor": {"alpha": "level"},
    "run_monitor": {"alpha": "level"},
    "LiveAnalysis": {"alpha": "level"},
    "ServeConfig": {"alpha": "level"},
}


def _name(func: ast.expr) -> str | None:
    if isinstance(func, ast.Name):
        return func.id
    if isinstance(func, ast.Attribute):
        return func.attr
    return None


def rewrite(path: Path) -> bool:
    text = path.read_text(encoding="utf-8")
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return False
    lines = text.split("\n")
    edits: list[tuple[int, int, str, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and (renames := RENAMES.get(_name(node.func) or "")):
            for kw in node.keywords:
                if kw.arg in renames:
                    edits.append((kw.lineno - 1, kw.col_offset, kw.arg, renames[kw.arg]))
    for line, col, old, new in sorted(edits, reverse=True):
        row = lines[line]
        assert row[col:col + len(old)] == old, (path, line + 1, row)
        lines[line] = row[:col] + new + row[col + len(old):]
    if edits:
        path.write_text("\n".join(lines), encoding="utf-8")
    return bool(edits)


if __name__ == "__main__":
    roots = [Path(a) for a in sys.argv[1:]] or [Path("src"), Path("tests")]
    files = [p for r in roots for p in ([r] if r.is_file() else sorted(r.rglob("*.py")))]
    for p in files:
        if p.name == "test_vocabulary.py":  # it calls the old spellings on purpose (one test per alias)
            continue
        if rewrite(p):
            print(p)
