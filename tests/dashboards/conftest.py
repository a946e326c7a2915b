"""Dashboard tests: this folder is on ``sys.path`` for ``dashkit``; promtool is required.

promtool comes from Debian's ``prometheus`` package, which the bootstrap
installs; without it these tests fail, never skip.
"""

from __future__ import annotations

import pathlib
import shutil

import pytest

PROMTOOL = pathlib.Path("/usr/bin/promtool")


@pytest.fixture(scope="session")
def promtool() -> str:
    found = str(PROMTOOL) if PROMTOOL.exists() else shutil.which("promtool")
    if not found:
        pytest.fail(f"promtool not found at {PROMTOOL} or on PATH: install Debian's "
                    "'prometheus' package (scripts/bootstrap.sh does)")
    return found
