"""The repository stands alone: nothing cites documents that are not in it, and nothing stray is committed.

The team's working notes (a specification of the paper, notes on numerics, formats, data, dependencies and style,
a security review) live outside the repository. Code and docs cite the paper (Tran-Truong & Le 2026), standard
references by author and year, or pages under ``docs/`` — never those notes. A mention of one of their names is
allowed only as a path that exists in the repository (``docs/formats.md`` is our own page).
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
#: Internal documents that are not part of the repository.
INTERNAL = ("paper-spec", "math", "formats", "DESIGN", "style", "dependencies", "data", "attack-report")
MENTION = re.compile(r"(?<![\w/.-])([\w./-]*?)\b(" + "|".join(re.escape(n) for n in INTERNAL) + r")\.md\b")
SCANNED = ("src", "docs", "tests", "studies", "benchmarks", "scripts", "README.md")
TEXT_SUFFIXES = {".py", ".md", ".j2", ".toml", ".json", ".txt", ".html", ".js", ".css", ".csv"}
STRAY = re.compile(r"(\.orig|\.rej|\.bak|\.swp|~|\.DS_Store)$")


def _files() -> list[Path]:
    out: list[Path] = []
    for name in SCANNED:
        path = REPO / name
        if path.is_file():
            out.append(path)
            continue
        out += [p for p in path.rglob("*") if p.is_file() and p.suffix in TEXT_SUFFIXES
                and ".venv" not in p.parts and "__pycache__" not in p.parts and "_data" not in p.parts]
    return out


def _resolves(prefix: str, name: str, where: Path) -> bool:
    """Whether ``prefix + name + '.md'`` names a file of the repository (from its root or from ``where``)."""
    rel = f"{prefix}{name}.md"
    return bool(prefix) and any((base / rel).is_file() and (base / rel).resolve().is_relative_to(REPO)
                                for base in (REPO, where.parent))


def test_no_citation_of_documents_outside_the_repository() -> None:
    found = []
    for path in _files():
        if path == Path(__file__):
            continue
        text = path.read_text(encoding="utf-8", errors="replace")
        for m in MENTION.finditer(text):
            prefix, name = m.group(1), m.group(2)
            if not _resolves(prefix, name, path):
                line = text.count("\n", 0, m.start()) + 1
                found.append(f"{path.relative_to(REPO)}:{line}: {m.group(0)}")
    assert not found, ("cite the paper, a reference or a docs/ page instead of internal notes:\n  "
                       + "\n  ".join(found[:40]))


@pytest.mark.parametrize("text, flagged", [
    ("see ``paper-spec.md`` §3.1", True), ("(math.md §2)", True), ("`formats.md` §3.3", True),
    ("docs/formats.md §2", False), ("[numerics.md](numerics.md)", False), ("metadata.md", False),
    ("the DESIGN.md notes", True), ("../shared/docs/data.md", True),
])
def test_the_guard_itself(text: str, flagged: bool) -> None:
    hits = [m for m in MENTION.finditer(text) if not _resolves(m.group(1), m.group(2), REPO / "docs" / "x.md")]
    assert bool(hits) == flagged


def test_docs_pages_that_code_cites_exist() -> None:
    cited = set()
    for path in _files():
        if path == Path(__file__):
            continue
        cited |= set(re.findall(r"docs/([\w-]+\.md)", path.read_text(encoding="utf-8", errors="replace")))
    missing = sorted(c for c in cited if not (REPO / "docs" / c).is_file())
    assert not missing, f"cited but not in docs/: {missing}"
    for page in ("formats.md", "numerics.md", "statistics.md"):
        assert page in cited, f"docs/{page} is not cited anywhere in the code"


def test_no_stray_files_are_committed() -> None:
    try:
        listed = subprocess.run(["git", "ls-files"], cwd=REPO, capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("not a git checkout")
    stray = [f for f in listed.splitlines() if STRAY.search(f)]
    assert not stray, f"leftover files committed: {stray}"


# ---------------------------------------------------------------------------------------------------- public API
#: Packages whose public API was trimmed to what users need → (how many names at most, names that must stay).
TRIMMED = {"audit": (25, ("audit", "Certificate")),
           "uncertainty": (12, ("DirichletPosterior", "TraceBootstrap", "ChainEnsemble", "interval_summary")),
           "models": (21, ("choose_model", "fit_model", "register_family", "MarkovModel")),
           "costs": (10, ("cost_report", "summarize_costs", "CostModel")),
           "serve": (10, ("LiveService", "ServeConfig", "run"))}


@pytest.mark.parametrize("package", sorted(TRIMMED))
def test_packages_export_what_users_need_and_moved_names_warn(package: str) -> None:
    import importlib
    import sys
    import warnings

    importlib.import_module(f"tracetochain.{package}")  # ``tracetochain.audit`` the attribute is the function
    pkg = sys.modules[f"tracetochain.{package}"]
    most, required = TRIMMED[package]
    assert len(pkg.__all__) <= most and set(required) <= set(pkg.__all__)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for name in pkg.__all__:
            assert getattr(pkg, name) is not None, name
    for name, module in pkg._MOVED.items():
        assert name not in pkg.__all__
        where = module if module.startswith("tracetochain.") else f"tracetochain.{package}.{module}"
        with pytest.warns(DeprecationWarning, match=f"import it from {re.escape(where)}$") as caught:
            obj = getattr(pkg, name)
        assert caught[0].filename == __file__  # the warning points at the line that asked for the name
        assert obj is getattr(sys.modules[where], name)
    with pytest.raises(AttributeError):
        _ = pkg.no_such_name


@pytest.mark.parametrize("package", sorted(TRIMMED))
def test_the_repository_imports_only_public_names(package: str) -> None:
    import importlib
    import sys

    importlib.import_module(f"tracetochain.{package}")
    public = set(sys.modules[f"tracetochain.{package}"].__all__)
    statement = re.compile(rf"^[ \t]*from tracetochain\.{package} import (\(([^)]*)\)|[^\n]*)", re.M)
    bad = []
    for path in _files():
        if path.suffix != ".py":
            continue
        for m in statement.finditer(path.read_text(encoding="utf-8")):
            names = re.sub(r"#[^\n]*", "", m.group(2) if m.group(2) is not None else m.group(1))
            for name in (n.split(" as ")[0].strip() for n in names.replace("\n", " ").split(",")):
                if name and name not in public:
                    bad.append(f"{path.relative_to(REPO)}: {name}")
    assert not bad, (f"import these from their private module (tracetochain.{package}._…):\n  "
                     + "\n  ".join(bad))
