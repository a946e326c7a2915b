"""``python -m clusterhealth_agent``: validate everything, then run the agent."""

from __future__ import annotations

from collections.abc import Sequence

from clusterhealth_agent import app
from clusterhealth_agent import settings as agent_settings
from clusterhealth_agent.probes import config as probe_config
from clusterhealth_agent.probes import registry as probe_registry
from clusterhealth_core import runner

Loaded = tuple[agent_settings.AgentSettings, list[probe_config.ProbeSpec]]


def load(argv: Sequence[str]) -> Loaded:
    """Flags, detectors and the probe file, all validated before anything starts."""
    parsed = agent_settings.load(argv)
    probe_registry.resolve_detectors(parsed.detectors)
    specs: list[probe_config.ProbeSpec] = []
    if parsed.probe_config:
        specs = probe_config.load_file(parsed.probe_config,
                                       probe_registry.BUILTIN_CONDITION_TYPES)
    probe_config.check_timeouts(specs, parsed.detect_period)
    return parsed, specs


def main(argv: Sequence[str] | None = None) -> int:
    """Exit 2 on bad flags or config, 1 when the member cannot be reached, 0 on shutdown."""
    return runner.main("clusterhealth-agent", load, lambda loaded: app.serve(*loaded), argv,
                       event_loop=runner.ASYNCIO)


if __name__ == "__main__":
    raise SystemExit(main())
