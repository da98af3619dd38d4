"""What the wheel and the sdist ship: the package's source and data files, nothing stray.

hatchling (the build backend, in the ``test`` extra) lists the files it would put in each archive without building
it (pyproject.toml and the metadata are added to the sdist on top). Every file must be package source or data with
a known suffix; none may look like a leftover (``*.orig``, ``*.rej``, editor backups).
"""

from __future__ import annotations

from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
ALLOWED_SUFFIXES = {".py", ".typed", ".j2", ".jsonl", ".json", ".csv", ".md", ".toml", ".css", ".js", ".html"}
STRAY = (".orig", ".rej", ".bak", ".swp", "~", ".pyc", ".DS_Store")


def included(builder_name: str) -> list[tuple[str, str]]:
    """(path inside the archive, path in the repository) of every file the builder would include."""
    builders = pytest.importorskip(f"hatchling.builders.{builder_name}")
    cls = getattr(builders, "WheelBuilder" if builder_name == "wheel" else "SdistBuilder")
    return [(f.distribution_path, f.relative_path) for f in cls(str(REPO)).recurse_included_files()]


def test_wheel_ships_only_the_package() -> None:
    files = included("wheel")
    assert any(dist == "tracetochain/__init__.py" for dist, _ in files)
    for dist, _ in files:
        assert dist.startswith("tracetochain/"), dist
        assert Path(dist).suffix in ALLOWED_SUFFIXES and not dist.endswith(STRAY), dist


def test_sdist_ships_the_package_readme_and_licence() -> None:
    files = [dist for dist, _ in included("sdist")]
    others = [f for f in files if not f.startswith("src/tracetochain/")]
    assert sorted(others) == ["LICENSE", "README.md"], others
    assert "src/tracetochain/__init__.py" in files
    assert not [f for f in files if f.endswith(STRAY)]
