"""``python -m clusterhealth_controlplane.webhook``: validate the flags, then serve."""

from __future__ import annotations

from collections.abc import Sequence

from clusterhealth_controlplane.webhook import app
from clusterhealth_controlplane.webhook import settings as webhook_settings
from clusterhealth_core import runner


def main(argv: Sequence[str] | None = None) -> int:
    """Exit 2 on bad flags or certificate files, 1 when it cannot listen, 0 on shutdown."""
    return runner.main("clusterhealth-webhook", webhook_settings.load, app.serve, argv)


if __name__ == "__main__":
    raise SystemExit(main())
