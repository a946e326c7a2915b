"""A Python environment with only what the shipped image installs, for footprint figures.

The development virtualenv holds test and lint tools; some of them change
what the product imports (httpx loads its command-line front end, with
``rich`` and ``click``, when those happen to be installed: about 6 MiB).
Memory is measured as it ships: a virtualenv with the project's runtime
dependencies from ``pyproject.toml`` (aiohttp, which the agent's aiohttp
variant needs, is one of them), running the sources through ``PYTHONPATH``.  It is made
once per set of dependencies and cached beside the binaries.

Its processes start as the image's do: from compiled bytecode.  The image's
``pip install`` compiles every module; a shell with ``PYTHONDONTWRITEBYTECODE``
set (this machine's) would make every start compile the product's modules again
from source (about 0.1 s of a remedy controller's 0.3 s of imports), a cost no user
pays.  :func:`child_env` compiles a tree's sources once and lets its children
write what else they import.
"""

from __future__ import annotations

import argparse
import compileall
import functools
import hashlib
import os
import pathlib
import subprocess
import sys
import tomllib
from collections.abc import Sequence

from bench import report, takeover

EXTRA: tuple[str, ...] = ()


def _cache() -> pathlib.Path:
    base = os.environ.get("CLUSTERHEALTH_CACHE") or str(pathlib.Path.home() / ".cache"
                                                        / "clusterhealth")
    return pathlib.Path(base)


def requirements(extra: tuple[str, ...] = EXTRA) -> list[str]:
    """The runtime dependencies of the project, plus ``extra``."""
    project = tomllib.loads((takeover.REPO / "pyproject.toml").read_text())["project"]
    return [*project["dependencies"], *extra]


def python(extra: tuple[str, ...] = EXTRA) -> str:
    """The interpreter of a runtime-only virtualenv with ``extra`` (made on first use).

    The kopf prototype gets its own (``extra=("kopf>=1.45,<1.46",)``): kopf
    brings ``click``, which would change what httpx imports in ours.
    """
    wanted = requirements(extra)
    digest = hashlib.sha256("\n".join(sorted(wanted)).encode()).hexdigest()[:12]
    venv = _cache() / f"bench-runtime-{digest}"
    interpreter = venv / "bin" / "python"
    if not interpreter.exists():
        takeover.progress(f"making the runtime-only virtualenv {venv}")
        base = getattr(sys, "_base_executable", sys.executable)
        subprocess.run([base, "-m", "venv", str(venv)], check=True)
        subprocess.run([str(interpreter), "-m", "pip", "install", "-q", *wanted], check=True)
    return str(interpreter)


def child_env(tree: pathlib.Path | None = None) -> dict[str, str]:
    """PYTHONPATH with the project's sources and the repository (for ``bench.*``).

    With ``tree`` (a benchmark's ``--baseline-tree``: another checkout, before
    the change measured), the product's sources come from that checkout.
    """
    env = takeover.child_env()
    sources = env["PYTHONPATH"] if tree is None else os.pathsep.join(
        str(tree / folder) for folder in takeover.SOURCE_FOLDERS)
    env["PYTHONPATH"] = os.pathsep.join([sources, str(takeover.REPO)])
    compiled((tree or takeover.REPO).resolve())
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # started as the image starts: see the module
    return env


@functools.cache
def compiled(tree: pathlib.Path) -> None:
    """Compile ``tree``'s product and bench sources to ``__pycache__`` (once per process).

    Up-to-date files are skipped; ``__pycache__`` is ignored by git.
    """
    for folder in (*takeover.SOURCE_FOLDERS, "bench"):
        if (tree / folder).is_dir():
            compileall.compile_dir(tree / folder, quiet=1, workers=1)


def baseline_tree(parser: argparse.ArgumentParser, tree: pathlib.Path | None) -> None:
    """Refuse a ``--baseline-tree`` that is not a checkout of this project (exit 2)."""
    if tree is not None and not all((tree / f).is_dir() for f in takeover.SOURCE_FOLDERS):
        parser.error(f"--baseline-tree {tree}: not a checkout of this project (it needs "
                     f"{', '.join(takeover.SOURCE_FOLDERS)})")


def before_after(label: str, mine: Sequence[float], before: Sequence[float]) -> report.Figure:
    """``mine / before`` per round (both measured in the same run, alternating)."""
    return report.Figure(f"{label}, this tree / --baseline-tree (per round)",
                         tuple(m / b for m, b in zip(mine, before, strict=False)), "x")
