"""``python -m clusterhealth_mci``: validate the flags, then run the controller."""

from __future__ import annotations

import asyncio
import logging
import sys
from collections.abc import Sequence

from clusterhealth_core import settings
from clusterhealth_mci import app
from clusterhealth_mci import settings as mci_settings


def main(argv: Sequence[str] | None = None) -> int:
    """Exit 2 on bad flags, 1 when the control plane is unusable, 0 on shutdown."""
    logging.basicConfig(level=logging.INFO,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        parsed = mci_settings.load(sys.argv[1:] if argv is None else argv)
    except settings.SettingsError as exc:
        print(f"clusterhealth-mci: error: {exc}", file=sys.stderr)
        return 2
    try:
        asyncio.run(app.serve(parsed))
    except app.StartupError as exc:
        print(f"clusterhealth-mci: error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
