"""The runner: one deadline for every probe, failures as results, generic metrics."""

from __future__ import annotations

import asyncio

import prometheus_client

from clusterhealth_agent.probes import base


class Hangs(base.Probe):
    def __init__(self) -> None:
        super().__init__("hangs", "HangsReady")
        self.cancelled = False

    async def check(self) -> base.ProbeResult:
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            self.cancelled = True
            raise
        raise AssertionError("unreachable")


class Raises(base.Probe):
    async def check(self) -> base.ProbeResult:
        raise RuntimeError("probe bug")


class Fine(base.Probe):
    async def check(self) -> base.ProbeResult:
        return base.ProbeResult(True, "Fine", "all good")


def sample(registry: prometheus_client.CollectorRegistry, name: str, **labels: str) -> float:
    return registry.get_sample_value(name, labels) or 0.0


async def test_hanging_probe_times_out_within_the_deadline(
    registry: prometheus_client.CollectorRegistry,
) -> None:
    probe = Hangs()
    metrics = base.ProbeMetrics(registry)
    result = await asyncio.wait_for(base.run_probe(probe, 0.2, metrics), 2.0)
    assert (result.ok, result.reason) == (False, "Timeout")
    assert "0.2s" in result.message
    assert 0.19 <= result.duration < 1.0
    assert probe.cancelled
    assert sample(registry, "clusterhealth_agent_probe_results_total",
                  probe="hangs", outcome="failure", reason="Timeout") == 1


async def test_raising_probe_is_a_probe_error(
    registry: prometheus_client.CollectorRegistry,
) -> None:
    metrics = base.ProbeMetrics(registry)
    result = await base.run_probe(Raises("raises", "RaisesReady"), 1.0, metrics)
    assert (result.ok, result.reason) == (False, "ProbeError")
    assert "probe bug" in result.message
    assert sample(registry, "clusterhealth_agent_probe_results_total",
                  probe="raises", outcome="failure", reason="ProbeError") == 1


async def test_metrics_recorded_per_run(registry: prometheus_client.CollectorRegistry) -> None:
    metrics = base.ProbeMetrics(registry)
    probe = Fine("fine", "FineReady")
    for _ in range(3):
        result = await base.run_probe(probe, 1.0, metrics)
        assert result.ok and result.duration >= 0
    assert sample(registry, "clusterhealth_agent_probe_results_total",
                  probe="fine", outcome="success", reason="Fine") == 3
    assert sample(registry, "clusterhealth_agent_probe_duration_seconds_count", probe="fine") == 3
    assert sample(registry, "clusterhealth_agent_probe_duration_seconds_bucket",
                  probe="fine", le="+Inf") == 3


async def test_no_metrics_is_fine() -> None:
    result = await base.run_probe(Fine("fine", "FineReady"), 1.0)
    assert result.reason == "Fine"
    assert repr(Fine("fine", "FineReady")) == "Fine('fine' -> FineReady)"
