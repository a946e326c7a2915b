"""bench.remedy's verdicts: issue 13's targets per scale are checked, and can fail."""

from __future__ import annotations

import argparse
from typing import Any

import pytest
from bench import remedy, remedy_workload, report


def run(start: float, changes: tuple[float, ...], rss: float,
        cpu: tuple[float, ...] = ()) -> remedy.ScaleRun:
    return remedy.ScaleRun(start, changes, rss, cpu, tuple(3 * c for c in cpu))


def verdicts(figures: list[report.Figure]) -> dict[str, str]:
    return {f.name.split(": ", 1)[1]: f.verdict for f in figures}


@pytest.mark.parametrize(("ours", "karmada", "expected"), [
    pytest.param(run(3.0, (14.0, 15.0), 90.0), run(5.0, (15.5, 16.0), 70.0),
                 {"change convergence, ours / Karmada (medians)": "pass",
                  "start convergence, ours / Karmada (medians)": "pass",
                  "peak RSS, ours": "pass"}, id="all met"),
    pytest.param(run(6.0, (18.0, 19.0), 120.0), run(5.0, (15.5, 16.0), 70.0),
                 {"change convergence, ours / Karmada (medians)": "FAIL",
                  "start convergence, ours / Karmada (medians)": "FAIL",
                  "peak RSS, ours": "FAIL"}, id="none met"),
])
def test_5000_targets(ours: remedy.ScaleRun, karmada: remedy.ScaleRun,
                      expected: dict[str, str]) -> None:
    workload = remedy_workload.Workload.build(70, 8)  # only its label and write count are used
    found = verdicts(remedy.compare_figures(remedy.Scale(5000, 500), workload,
                                            {"ours": [ours], "karmada": [karmada]}))
    assert {k: found[k] for k in expected} == expected
    assert found["peak RSS, Karmada, unthrottled"] == "recorded"


def test_growth_is_checked_for_ours_only() -> None:
    results = {1000: {"ours": [run(1, (2.0,), 50)], "karmada": [run(1, (2.0,), 50)]},
               5000: {"ours": [run(3, (12.0,), 80)], "karmada": [run(3, (10.0,), 80)]}}
    figures = {f.name: f for f in remedy.growth_figures(results)}
    ours = figures["change convergence 5,000 / 1,000 Clusters, ours"]
    assert (ours.samples, ours.verdict) == ((6.0,), "FAIL")
    assert figures["change convergence 5,000 / 1,000 Clusters, Karmada, unthrottled"
                   ].verdict == "recorded"


def test_cpu_per_write_is_reported_per_controller_and_its_growth_recorded() -> None:
    results = {1000: {"ours": [run(1, (2.0,), 50, (2.0, 2.2))]},
               5000: {"ours": [run(3, (12.0,), 80, (2.4, 2.6))]}}
    workload = remedy_workload.Workload.build(70, 8)
    rows = {f.name: f for f in remedy.compare_figures(remedy.Scale(5000, 500), workload,
                                                      results[5000])}
    assert rows["5,000 x 500: CPU per write during a change, ours"].samples == (2.4, 2.6)
    assert rows["5,000 x 500: API server + etcd CPU per write, with ours"].samples == \
        pytest.approx((7.2, 7.8))
    growth = [f for f in remedy.growth_figures(results) if f.name.startswith("CPU per write")]
    assert [round(f.samples[0], 3) for f in growth] == [round(2.5 / 2.1, 3)]
    assert "2.50 ms/write" in report.text_table(list(rows.values()))


def test_runs_without_cpu_samples_give_no_cpu_rows() -> None:
    workload = remedy_workload.Workload.build(70, 8)
    names = [f.name for f in remedy.compare_figures(remedy.Scale(1000, 100), workload,
                                                    {"ours": [run(1, (2.0,), 50)]})]
    assert not [n for n in names if "CPU" in n]


@pytest.mark.parametrize(("text", "scale"), [("5000x500", remedy.Scale(5000, 500)),
                                             ("10000X1000", remedy.Scale(10000, 1000))])
def test_scale_parse(text: str, scale: remedy.Scale) -> None:
    assert remedy.Scale.parse(text) == scale


@pytest.mark.parametrize("text", ["5000", "x", "0x10", "10x1", "ax b"])
def test_scale_parse_refuses(text: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError):
        remedy.Scale.parse(text)


@pytest.mark.parametrize(("ours", "verdict"), [([5.0, 6.0, 7.0, 20.0], "pass"),
                                               ([8.0, 9.0, 10.0, 30.0], "FAIL")])
def test_reaction_latency_ratios_against_karmada(ours: list[float], verdict: str) -> None:
    blocks = {"ours": [ours[:2], ours[2:]], "baseline": [[9.0, 9.0], [9.0, 40.0]],
              "karmada": [[6.0, 7.0], [7.0, 25.0]]}
    found = {f.name: f for f in remedy.latency_compare_figures(blocks)}
    assert found["reaction latency p50, ours / Karmada (all flips)"].verdict == verdict
    assert found["reaction latency p99, ours / Karmada (all flips)"].verdict == verdict
    assert found["reaction latency p50, ours, baseline tree / Karmada (all flips)"].samples \
        == (9.0 / 7.0,)
    assert found["reaction latency, ours: p99 per block"].samples == (ours[1], ours[3])


def test_cpu_per_flip_per_block_and_per_pair_of_blocks() -> None:
    costs = {"ours": [remedy.FlipCpu(0.6, 3.0), remedy.FlipCpu(0.9, 4.0)],
             "baseline": [remedy.FlipCpu(0.8, 3.5), remedy.FlipCpu(0.8, 0.0)],
             "karmada": [remedy.FlipCpu(0.3, 3.0), remedy.FlipCpu(0.45, 0.0)]}
    found = {f.name: f for f in remedy.latency_cpu_figures(costs)}
    assert found["CPU per flip, ours"].samples == (0.6, 0.9)
    assert found["API server + etcd CPU per flip, with Karmada, unthrottled"].samples \
        == (3.0, 0.0)
    assert found["CPU per flip, ours / Karmada (per pair of blocks)"].samples == (2.0, 2.0)
    # a block whose reading came out as nothing is left out of the ratios, not divided by
    assert found["API server + etcd CPU per flip, with ours, baseline tree / Karmada "
                 "(per pair of blocks)"].samples == (3.5 / 3.0,)
    assert all(f.verdict == "recorded" for f in found.values())
    assert remedy.latency_cpu_figures({"ours": [remedy.FlipCpu(1.0, 2.0)]})[0].samples == (1.0,)


def test_ratios_per_pair_of_blocks_and_rounds_are_recorded_for_each_variant() -> None:
    blocks = {"ours": [[11.0, 11.0], [5.0, 5.0]], "ours-no-sources": [[6.0, 6.0], [12.0, 12.0]],
              "karmada": [[8.0, 8.0], [10.0, 10.0]]}
    found = {f.name: f for f in remedy.latency_compare_figures(blocks)}
    paired = found["reaction latency p50, ours / Karmada (per pair of blocks)"]
    assert paired.samples == (11.0 / 8.0, 5.0 / 10.0) and paired.verdict == "recorded"
    assert found["reaction latency p50, ours, schema without remedyActionSources / Karmada "
                 "(per pair of blocks)"].samples == (6.0 / 8.0, 12.0 / 10.0)
    workload = remedy_workload.Workload.build(70, 8)
    runs = {"ours": [run(1, (2.0, 4.0), 50), run(1, (1.0,), 50)],
            "ours-no-sources": [run(1, (2.0,), 50), run(1, (2.0,), 50)],
            "karmada": [run(1, (2.0,), 50), run(1, (4.0,), 50)]}
    rows = {f.name.split(": ", 1)[1]: f for f in remedy.compare_figures(
        remedy.Scale(1000, 100), workload, runs)}
    assert rows["change convergence, ours / Karmada (per pair of rounds)"].samples == (1.5, 0.25)
    assert rows["change convergence, ours, schema without remedyActionSources / Karmada "
                "(per pair of rounds)"].samples == (1.0, 0.5)
    assert rows["change convergence, ours, schema without remedyActionSources / Karmada "
                "(medians)"].samples == (2.0 / 3.0,)


def _audit(name: str, verb: str, received: float, answered: float,
           uri: str = "") -> dict[str, Any]:
    def stamp(seconds: float) -> str:
        return f"2026-11-29T06:00:{seconds:09.6f}Z"
    return {"stage": "ResponseComplete", "verb": verb, "requestURI": uri,
            "objectRef": {"resource": "clusters", "subresource": "status", "name": name},
            "requestReceivedTimestamp": stamp(received), "stageTimestamp": stamp(answered)}


def test_the_server_clock_pairs_each_condition_write_with_the_controllers_next_write() -> None:
    bench = "/apis/cluster.karmada.io/v1alpha1/clusters/x/status?fieldManager=bench-agent"
    events: list[dict[str, Any]] = [
        _audit("latency-ours-0", "patch", 1.000, 1.004, bench),  # before the controller: unpaired
        _audit("latency-ours-0", "patch", 2.000, 2.004, bench),  # warm-up flips
        _audit("latency-ours-0", "update", 2.005, 2.008),
        _audit("latency-ours-0", "patch", 3.000, 3.004, bench),
        _audit("latency-ours-0", "update", 3.0055, 3.009),
        _audit("latency-ours-0", "patch", 4.000, 4.003, bench),  # counted
        _audit("latency-ours-0", "update", 4.0045, 4.0075),
        _audit("latency-ours-0", "patch", 5.000, 5.003, bench),  # no write followed: dropped
        _audit("latency-ours-no-sources-1", "patch", 2.000, 2.001, bench),
        _audit("latency-ours-no-sources-1", "update", 2.002, 2.003),
        {"stage": "ResponseComplete", "verb": "get",
         "objectRef": {"resource": "clusters", "subresource": "status", "name": "latency-ours-0"},
         "requestReceivedTimestamp": "2026-11-29T06:00:04.004000Z",
         "stageTimestamp": "2026-11-29T06:00:04.004100Z"},
    ]
    parts = remedy.server_clock_parts(events)
    assert [round(v, 3) for v in parts["ours"][0][0]] == [1.5, 3.0, 3.0]
    assert len(parts["ours"][0]) == 1
    assert parts["ours-no-sources"][1] == []  # its one pair was a warm-up
    # ours' block ran while the API server was twice as slow: its part is not counted
    # against it; its write, as slow as the condition write, is
    figures = {f.name: f for f in remedy.server_clock_figures(
        {"ours": {0: [(1.5, 3.0, 6.0)]}, "karmada": {0: [(1.0, 2.0, 3.0)]}})}
    over = "p50, ours / Karmada (per pair of blocks, each over its block's condition write)"
    react = figures["API server's clock: condition write answered -> the controller's write "
                    f"arrives, {over}"]
    assert react.samples == (0.75,)
    assert react.verdict == "recorded"
    put = figures[f"API server's clock: the controller's write inside the API server, {over}"]
    assert put.samples == (0.75,)


def test_the_server_clock_makes_no_row_without_a_counted_flip() -> None:
    assert remedy.server_clock_figures({"ours": {0: []}, "karmada": {0: []}}) == []
