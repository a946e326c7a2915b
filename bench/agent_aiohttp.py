"""Run the detection agent with the kube transport swapped for aiohttp (measurement only).

``python -m bench.agent_aiohttp <agent flags>`` is ``python -m
clusterhealth_agent <agent flags>`` except that every API connection (and the
HTTP probe) goes through :class:`clusterhealth_core.kube.aiohttp_transport.AiohttpTransport`.
The swap replaces one module attribute before anything runs: acceptable for
a benchmark, never done in product code.
"""

from __future__ import annotations

from clusterhealth_agent import __main__ as agent_main
from clusterhealth_core.kube import aiohttp_transport, transport


def main() -> int:
    """Swap the transport class, then run the agent's own main."""
    transport.HttpTransport = aiohttp_transport.AiohttpTransport  # type: ignore[misc,assignment]
    return agent_main.main()


if __name__ == "__main__":
    raise SystemExit(main())
