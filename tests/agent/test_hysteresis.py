"""Hysteresis per node, as a table of observation sequences."""

from __future__ import annotations

import pytest

from clusterhealth_agent import hysteresis
from clusterhealth_agent.probes import base

OK = base.ProbeResult(True, "Resolved", "ok")
FAIL = base.ProbeResult(False, "Timeout", "no answer")
TH = hysteresis.Thresholds(failure=30.0, success=20.0)


@pytest.mark.parametrize(
    ("observations", "expected"),
    [
        pytest.param([(0, OK)], [True], id="first observation adopted"),
        pytest.param([(0, FAIL)], [False], id="first failure adopted"),
        pytest.param([(0, OK), (5, FAIL), (34, FAIL)], [True, True, True],
                     id="failing shorter than the failure threshold"),
        pytest.param([(0, OK), (5, FAIL), (35, FAIL)], [True, True, False],
                     id="failing for the failure threshold"),
        pytest.param([(0, OK), (5, FAIL), (20, OK), (25, FAIL), (50, FAIL), (55, FAIL)],
                     [True, True, True, True, True, False], id="a flap resets the timer"),
        pytest.param([(0, FAIL), (5, OK), (24, OK), (25, OK)], [False, False, False, True],
                     id="recovery needs the success threshold"),
        pytest.param([(0, FAIL), (5, OK), (10, FAIL), (30, OK), (49, OK), (50, OK)],
                     [False, False, False, False, False, True], id="recovery flap resets"),
    ],
)
def test_filter(observations: list[tuple[float, base.ProbeResult]], expected: list[bool]) -> None:
    f = hysteresis.Filter(TH)
    got = [f.observe(result, now).ok for now, result in observations]
    assert got == expected


def test_reported_reason_refreshes_while_state_holds() -> None:
    f = hysteresis.Filter(TH)
    f.observe(FAIL, 0)
    nx = base.ProbeResult(False, "NXDOMAIN", "no such name")
    assert f.observe(nx, 1).reason == "NXDOMAIN"


def test_zero_thresholds_follow_every_observation() -> None:
    f = hysteresis.Filter(hysteresis.Thresholds(0, 0))
    assert [f.observe(r, t).ok for t, r in [(0, OK), (1, FAIL), (2, OK)]] == [True, False, True]


def test_negative_threshold_rejected() -> None:
    with pytest.raises(ValueError, match=">= 0"):
        hysteresis.Thresholds(-1, 0)
