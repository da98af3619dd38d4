from __future__ import annotations

import os
from pathlib import Path

import pytest

# Progress lines depend on how long a phase took (tracetochain._progress prints phases of 2 s or more), so on a loaded
# machine they would come and go in the stderr that tests compare; tests/test_progress.py turns them on itself.
# Set in the environment so that commands run as subprocesses inherit it.
os.environ.setdefault("TRACETOCHAIN_PROGRESS", "off")

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = REPO.parent / "shared" / "data"


@pytest.fixture(scope="session")
def shared_data() -> Path:
    if not SHARED_DATA.exists():
        pytest.skip("../shared/data is not present beside the repository")
    return SHARED_DATA
