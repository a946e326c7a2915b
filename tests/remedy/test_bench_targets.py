"""bench.remedy's verdicts: issue 13's targets per scale are checked, and can fail."""

from __future__ import annotations

import argparse

import pytest
from bench import remedy, remedy_workload, report


def run(start: float, changes: tuple[float, ...], rss: float) -> remedy.ScaleRun:
    return remedy.ScaleRun(start, changes, rss)


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


@pytest.mark.parametrize(("text", "scale"), [("5000x500", remedy.Scale(5000, 500)),
                                             ("10000X1000", remedy.Scale(10000, 1000))])
def test_scale_parse(text: str, scale: remedy.Scale) -> None:
    assert remedy.Scale.parse(text) == scale


@pytest.mark.parametrize("text", ["5000", "x", "0x10", "10x1", "ax b"])
def test_scale_parse_refuses(text: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError):
        remedy.Scale.parse(text)
