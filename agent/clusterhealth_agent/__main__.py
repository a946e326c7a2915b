"""``python -m clusterhealth_agent``: validate everything, then run the agent."""

from __future__ import annotations

import asyncio
import logging
import sys
from collections.abc import Sequence

from clusterhealth_agent import app
from clusterhealth_agent import settings as agent_settings
from clusterhealth_agent.probes import config as probe_config
from clusterhealth_agent.probes import registry as probe_registry
from clusterhealth_core import settings


def main(argv: Sequence[str] | None = None) -> int:
    """Exit 2 on bad flags or config, 1 when the member cannot be reached, 0 on shutdown."""
    logging.basicConfig(level=logging.INFO,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        parsed = agent_settings.load(sys.argv[1:] if argv is None else argv)
        probe_registry.resolve_detectors(parsed.detectors)
        specs = []
        if parsed.probe_config:
            specs = probe_config.load_file(
                parsed.probe_config, probe_registry.BUILTIN_CONDITION_TYPES)
        probe_config.check_timeouts(specs, parsed.detect_period)
    except (settings.SettingsError, probe_config.ProbeConfigError) as exc:
        print(f"clusterhealth-agent: error: {exc}", file=sys.stderr)
        return 2
    try:
        asyncio.run(app.serve(parsed, specs))
    except app.StartupError as exc:
        print(f"clusterhealth-agent: error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
