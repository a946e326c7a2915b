"""What a failover cost, as bench.failover_peer reports it: requests and CPU read twice, subtracted.

Pure: metrics text and ``/proc`` lines written here, no API server.
"""

from __future__ import annotations

import dataclasses
import subprocess
import sys
from collections import Counter

import prometheus_client
import pytest
from bench import failover_peer, usage

from clusterhealth_core import pauses

METRICS = """\
# HELP apiserver_request_total [STABLE] Counter of apiserver requests broken out by verb...
# TYPE apiserver_request_total counter
apiserver_request_total{code="200",component="apiserver",dry_run="",group="work.karmada.io",\
resource="resourcebindings",scope="namespace",subresource="",verb="PUT",version="v1alpha2"} 7
apiserver_request_total{code="409",component="apiserver",dry_run="",group="work.karmada.io",\
resource="resourcebindings",scope="namespace",subresource="",verb="PUT",version="v1alpha2"} 2
apiserver_request_total{code="200",component="apiserver",dry_run="",group="work.karmada.io",\
resource="resourcebindings",scope="namespace",subresource="status",verb="PATCH",\
version="v1alpha2"} 1.2e+01
apiserver_request_total{code="0",component="apiserver",dry_run="",group="",resource="pods",\
scope="cluster",subresource="",verb="WATCH",version="v1"} 3
apiserver_request_duration_seconds_count{resource="pods",verb="WATCH"} 99
"""


def test_request_counts_are_keyed_by_verb_and_resource_and_refusals_apart() -> None:
    assert usage.parse_request_counts(METRICS) == Counter({
        "PUT resourcebindings": 7, "PUT resourcebindings [409]": 2,
        "PATCH resourcebindings/status": 12, "WATCH pods": 3})
    assert usage.writes_of(usage.parse_request_counts(METRICS), "resourcebindings") == 9


def test_requests_sent_between_two_readings() -> None:
    before = Counter({"PUT works": 5, "GET clusters": 2})
    after = Counter({"PUT works": 9, "GET clusters": 2, "DELETE works": 1})
    assert usage.sent(before, after) == Counter({"PUT works": 4, "DELETE works": 1})
    assert usage.writes_of(after, "works") == 9


def test_a_child_process_cpu_read_to_below_a_tick_and_zero_once_gone() -> None:
    # a child that spins for 0.2 s of CPU and then waits to be told to go
    code = ("import sys, time\nt = time.process_time()\n"
            "while time.process_time() - t < 0.2: pass\nprint('done', flush=True)\n"
            "sys.stdin.read()")
    child = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None and child.stdout.readline() == "done\n"
        used = usage.process_cpu_seconds(child.pid)
        assert 0.2 <= used < 5.0 and used != round(used, 2)  # nanoseconds, not 10 ms ticks
    finally:
        child.communicate("")
    assert usage.process_cpu_seconds(child.pid) == 0.0  # reaped: no such process
    assert usage.process_cpu_seconds(None) == 0.0


def test_a_process_gone_within_the_window_is_left_out() -> None:
    before = {10: 1.0, 11: 5.0, 12: 2.0}
    after = {10: 3.5, 11: 0.0}  # 11 read 0: gone; 12 missing
    assert usage.cpu_used(before, after) == pytest.approx(2.5)


def reading(requests: dict[str, int], chain: float) -> failover_peer.Reading:
    return failover_peer.Reading(Counter(requests), {"chain": {7: chain}, "bench": {8: 1.0}})


def test_a_round_keeps_the_bench_own_requests_apart() -> None:
    result = failover_peer.FleetRound("ours")
    own = Counter({"LIST resourcebindings": 1, "WATCH resourcebindings": 1})
    failover_peer.window_usage(
        result, reading({"PUT works": 10, "LIST resourcebindings": 4}, 2.0),
        reading({"PUT works": 30, "LIST resourcebindings": 6, "WATCH resourcebindings": 1},
                5.0), own)
    assert result.requests == Counter({"PUT works": 20, "LIST resourcebindings": 1})
    assert result.own_requests == own
    assert result.cpu == {"chain": pytest.approx(3.0), "bench": 0.0}


def fleet_round(chain: str, requests: dict[str, int], cpu: float) -> failover_peer.FleetRound:
    return failover_peer.FleetRound(
        chain, requests=Counter(requests), own_requests=Counter({"WATCH resourcebindings": 1}),
        cpu=dict.fromkeys(failover_peer.CPU_GROUPS, 0.0) | {"chain": cpu})


def test_requests_per_binding_and_chain_cpu_are_compared_with_karmada() -> None:
    rounds = [fleet_round("ours", {"PUT works": 200, "PATCH resourcebindings/status": 400,
                                   "GET clusters": 1}, 30.0),
              fleet_round("karmada", {"PUT works": 200, "PUT resourcebindings": 200}, 20.0)]
    figures = {f.name: f for f in failover_peer.usage_figures(rounds, 200)}
    what = "control-plane API requests per failed-over binding (kill -> all Ready)"
    assert figures[f"fleet, ours: {what}"].samples == pytest.approx((3.005,))
    assert figures[f"fleet: {what}: ours / Karmada (per pair of rounds)"].samples == \
        pytest.approx((1.5025,))
    chain = "CPU of the chain's processes (kill -> all Ready)"
    assert figures[f"fleet: {chain}: ours / Karmada (per pair of rounds)"].samples == \
        pytest.approx((1.5,))
    note = failover_peer.request_notes(rounds, 200)[0]
    assert ("most more in ours first: PATCH resourcebindings/status 2.00 / 0.00; "
            "PUT works 1.00 / 1.00; PUT resourcebindings 0.00 / 1.00; "
            "1 kinds under 0.01 in both.") in note
    assert "(WATCH resourcebindings 2)" in note


def test_the_placing_is_judged_to_the_bindings_last_write_and_the_status_lag_recorded() -> None:
    """Ours places sooner and its status trails the members longer: one verdict, one record."""
    rounds = [dataclasses.replace(fleet_round("ours", {"PUT works": 1}, 1.0),
                                  placed=240.0, at_rest=248.0),
              dataclasses.replace(fleet_round("karmada", {"PUT works": 1}, 1.0),
                                  placed=295.0, at_rest=300.0)]
    figures = {f.name: f for f in failover_peer.fleet_figures(rounds, 1000)}
    ratios = {name: f for name, f in figures.items() if "ours / Karmada" in name}
    at_rest = next(f for name, f in ratios.items() if name.startswith(
        "fleet: first Deployment created -> the bindings' last write"))
    assert at_rest.samples == pytest.approx((248.0 / 300.0,))
    assert (at_rest.target, at_rest.verdict) == ("<= 1", "pass")
    placed = ratios["fleet: first Deployment created -> the members run all 1,000: "
                    "ours / Karmada (per pair of rounds)"]
    assert placed.verdict == "pass"
    lag = next(f for name, f in ratios.items() if name.startswith("fleet: placed ->"))
    assert lag.samples == pytest.approx((1.6,))
    assert (lag.target, lag.verdict) == ("-", "recorded")


@pytest.mark.parametrize(("now", "wait"), [
    (100.0, 0.25),      # on a second: a quarter of a second
    (100.25, 0.0),      # on the phase: at once
    (100.3, 0.95),      # just past it: the next second's
    (100.9, 0.35),
])
def test_every_kill_falls_at_the_same_place_in_its_second(now: float, wait: float) -> None:
    assert failover_peer.until_kill_phase(now) == pytest.approx(wait)
    assert (now + failover_peer.until_kill_phase(now)) % 1.0 == pytest.approx(
        failover_peer.KILL_PHASE)


def _pauses_text(lags: list[float], full_collections: list[float]) -> str:
    """The ``/metrics`` text of a process whose pause histograms saw these values."""
    registry = prometheus_client.CollectorRegistry()
    metrics = pauses.PauseMetrics(registry)
    for lag in lags:
        metrics.lag.observe(lag)
    for seconds in full_collections:
        metrics.gc.labels(generation="2").observe(seconds)
    metrics.gc.labels(generation="0").observe(0.002)
    return prometheus_client.generate_latest(registry).decode()


def test_pauses_between_two_readings() -> None:
    before = usage.parse_pauses(_pauses_text([0.01, 0.3], [0.2]))
    after = usage.parse_pauses(_pauses_text([0.01, 0.3, 0.02, 0.12, 0.6, 0.004], [0.2, 0.4]))
    window = after.since(before)
    assert window.over(0.1) == 2 and window.over(0.25) == 1
    assert window.longest() == 1.0  # 0.6 s: within the 1 s bucket
    assert window.full_collections == 1
    assert window.full_collection_seconds == pytest.approx(0.4)
    assert window.collection_seconds == pytest.approx(0.4)
    quiet = usage.parse_pauses(_pauses_text([0.01], [])).since(
        usage.parse_pauses(_pauses_text([0.01], [])))
    assert quiet.over(0.1) == 0 and quiet.longest() == 0.0


def test_a_process_without_the_histograms_reads_as_no_pauses() -> None:
    nothing = usage.parse_pauses(METRICS)
    assert nothing.over(0.1) == 0 and nothing.longest() == 0.0
    assert nothing.full_collections == 0


def test_pause_figures_are_ours_alone() -> None:
    window = usage.parse_pauses(_pauses_text([0.3], [0.2]))
    rounds = [failover_peer.FleetRound("ours", pauses=dict.fromkeys(
                  failover_peer.PAUSE_WINDOWS, window)),
              failover_peer.FleetRound("karmada")]
    figures = {f.name: f.samples for f in failover_peer.pause_figures(rounds)}
    first = "fleet, ours' controller manager (kill -> first binding off)"
    assert figures[f"{first}: event-loop lags over 0.1 s"] == (1.0,)
    assert figures[f"{first}: full collections"] == (1.0,)
    assert len(figures) == 10
    assert failover_peer.pause_figures([failover_peer.FleetRound("karmada")]) == []
