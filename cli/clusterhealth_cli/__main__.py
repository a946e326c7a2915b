"""``python -m clusterhealth_cli``, the ``clusterhealth`` and ``kubectl-clusterhealth`` scripts."""

from __future__ import annotations

import sys
from collections.abc import Sequence

from clusterhealth_cli import app


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command; the exit codes are in :mod:`clusterhealth_cli.errors`."""
    return app.main(argv)


def complete() -> int:
    """``kubectl_complete-clusterhealth``: kubectl's completion of ``kubectl clusterhealth``."""
    return app.main([app.COMPLETE, *sys.argv[1:]], argv0=app.PLUGIN)


if __name__ == "__main__":
    raise SystemExit(main())
