"""``python -m clusterhealth_controlplane``: validate the flags, then run the controller manager."""

from __future__ import annotations

from collections.abc import Sequence

from clusterhealth_controlplane import app
from clusterhealth_controlplane import settings as manager_settings
from clusterhealth_core import runner


def main(argv: Sequence[str] | None = None) -> int:
    """Exit 2 on bad flags, 1 when the control plane is unusable, 0 on shutdown."""
    return runner.main("clusterhealth-controlplane", manager_settings.load, app.serve, argv)


if __name__ == "__main__":
    raise SystemExit(main())
