"""``python -m clusterhealth_cli``, the ``clusterhealth`` and ``kubectl-clusterhealth`` scripts."""

from __future__ import annotations

from collections.abc import Sequence

from clusterhealth_cli import app


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command; the exit codes are in :mod:`clusterhealth_cli.errors`."""
    return app.main(argv)


if __name__ == "__main__":
    raise SystemExit(main())
