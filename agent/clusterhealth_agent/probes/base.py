"""The contract every probe implements, and the runner that enforces the deadline.

A probe answers one question about this node ("does kubernetes.default
resolve?") with a :class:`ProbeResult` that carries a machine-readable
``reason`` and a human ``message``, never just a bool.  The runner gives every
probe the same deadline (shorter than the detect period), turns a timeout or
an unexpected exception into a failed result, and records the generic metrics.
"""

from __future__ import annotations

import abc
import asyncio
import dataclasses
import logging

import prometheus_client

log = logging.getLogger(__name__)

REASON_TIMEOUT = "Timeout"
REASON_PROBE_ERROR = "ProbeError"


@dataclasses.dataclass(frozen=True)
class ProbeResult:
    """The outcome of one probe run."""

    ok: bool
    reason: str
    """CamelCase, usable as a condition reason (``Resolved``, ``Timeout``, ``NXDOMAIN``...)."""
    message: str
    duration: float = 0.0
    """Seconds the probe took (filled in by the runner)."""


class Probe(abc.ABC):
    """One configured probe: a name, the condition type it reports, and ``check()``."""

    #: probe type, e.g. "dns", "http", "tcp", "apiserver", "coredns"
    kind: str = ""

    def __init__(self, name: str, condition_type: str) -> None:
        self.name = name
        self.condition_type = condition_type
        #: this probe's own deadline (from the config file); None = the agent's default
        self.timeout: float | None = None

    @abc.abstractmethod
    async def check(self) -> ProbeResult:
        """Probe once.  May be cancelled by the runner's deadline at any await."""

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r} -> {self.condition_type})"


class ProbeMetrics:
    """The metric families shared by every probe type."""

    def __init__(self, registry: prometheus_client.CollectorRegistry) -> None:
        self.duration = prometheus_client.Histogram(
            "clusterhealth_agent_probe_duration_seconds",
            "Time one probe run took, by probe.",
            ["probe"],
            buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5),
            registry=registry,
        )
        self.results = prometheus_client.Counter(
            "clusterhealth_agent_probe_results",
            "Probe runs by probe, outcome (success|failure) and reason.",
            ["probe", "outcome", "reason"],
            registry=registry,
        )


async def run_probe(
    probe: Probe, timeout: float, metrics: ProbeMetrics | None = None
) -> ProbeResult:
    """Run ``probe`` with a deadline of ``timeout`` seconds; never raises (but cancellation)."""
    loop = asyncio.get_running_loop()
    started = loop.time()
    try:
        async with asyncio.timeout(timeout):
            result = await probe.check()
    except TimeoutError:
        result = ProbeResult(False, REASON_TIMEOUT, f"{probe.name}: no answer within {timeout:g}s")
    except Exception as exc:  # a probe bug must not stop the agent
        log.exception("probe %s raised", probe.name)
        result = ProbeResult(False, REASON_PROBE_ERROR, f"{probe.name}: {exc!r}")
    duration = loop.time() - started
    result = dataclasses.replace(result, duration=duration)
    if metrics is not None:
        metrics.duration.labels(probe.name).observe(duration)
        outcome = "success" if result.ok else "failure"
        metrics.results.labels(probe.name, outcome, result.reason).inc()
    return result
