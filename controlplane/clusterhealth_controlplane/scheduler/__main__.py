"""``python -m clusterhealth_controlplane.scheduler``: validate the flags, then schedule."""

from __future__ import annotations

from collections.abc import Sequence

from clusterhealth_controlplane.scheduler import app
from clusterhealth_controlplane.scheduler import settings as scheduler_settings
from clusterhealth_core import runner


def main(argv: Sequence[str] | None = None) -> int:
    """Exit 2 on bad flags, 1 when the control plane is unusable, 0 on shutdown."""
    return runner.main("clusterhealth-scheduler", scheduler_settings.load, app.serve, argv)


if __name__ == "__main__":
    raise SystemExit(main())
