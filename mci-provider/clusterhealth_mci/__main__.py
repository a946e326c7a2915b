"""``python -m clusterhealth_mci``: validate the flags, then run the controller."""

from __future__ import annotations

from collections.abc import Sequence

from clusterhealth_core import runner
from clusterhealth_mci import app
from clusterhealth_mci import settings as mci_settings


def main(argv: Sequence[str] | None = None) -> int:
    """Exit 2 on bad flags, 1 when the control plane is unusable, 0 on shutdown."""
    return runner.main("clusterhealth-mci", mci_settings.load, app.serve, argv)


if __name__ == "__main__":
    raise SystemExit(main())
