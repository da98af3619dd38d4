"""The API section of the README states how many names the public modules export, and it is right (issue 28).

A public module is one whose dotted path has no component starting with "_" (a package's ``__init__`` is the
package); its ``__all__`` lists what users import. The README's "Python API" section states the total and the
count per module; this test recomputes both from the source.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import tracetochain

PACKAGE = Path(tracetochain.__file__).resolve().parent
README = PACKAGE.parents[1] / "README.md"


def public_all() -> dict[str, list[str]]:
    """Dotted module name → its ``__all__``, for every public module that declares one."""
    out: dict[str, list[str]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE.parent).with_suffix("")
        parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
        if any(p.startswith("_") for p in parts):
            continue
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            target = node.targets[0] if isinstance(node, ast.Assign) else getattr(node, "target", None)
            if isinstance(target, ast.Name) and target.id == "__all__":
                value = getattr(node, "value", None)
                assert value is not None
                out[".".join(parts)] = list(ast.literal_eval(value))
    return out


def test_the_readme_counts_the_public_names() -> None:
    text = README.read_text(encoding="utf-8")
    section = text[text.index("## Python API"):]
    section = re.sub(r"\s+", " ", section[: section.index("\n## ", 1)])
    surface = public_all()
    total = sum(len(v) for v in surface.values())
    m = re.search(r"\*\*(\d+) names\*\* in the `__all__` of (\d+) public modules", section)
    assert m is not None, "the README's Python API section must state the count"
    assert (int(m.group(1)), int(m.group(2))) == (total, len(surface)), (
        f"README says {m.group(1)} names in {m.group(2)} modules; the source has {total} in {len(surface)}")
    for module, names in surface.items():
        assert f"`{module}` {len(names)}" in section, f"the README's count for {module} is missing or stale"


def test_every_exported_name_exists() -> None:
    import importlib

    for module, names in public_all().items():
        mod = importlib.import_module(module)
        missing = [n for n in names if not hasattr(mod, n)]
        assert not missing, (module, missing)
