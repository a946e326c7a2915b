"""Per-object log lines: written one by one in an incident, summarised in a mass change."""

from __future__ import annotations

import asyncio
import logging

import pytest

import testkit
from clusterhealth_core import floodlog

LOGGER = "clusterhealth.test.floodlog"


def _messages(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == LOGGER]


@testkit.fake_time
async def test_a_few_changes_are_all_logged_one_by_one(caplog: pytest.LogCaptureFixture) -> None:
    sampled = floodlog.SampledLog(logging.getLogger(LOGGER), "cluster change(s)",
                                  rate=floodlog.Rate(qps=1, burst=3))
    with caplog.at_level(logging.INFO, logger=LOGGER):
        for n in range(3):
            sampled.log("TrafficControl added", "cluster m%d: TrafficControl added", n)
        await asyncio.sleep(60)
        sampled.flush()
    assert _messages(caplog) == [f"cluster m{n}: TrafficControl added" for n in range(3)]


@testkit.fake_time
async def test_past_the_burst_lines_are_counted_and_summarised_by_key(
        caplog: pytest.LogCaptureFixture) -> None:
    sampled = floodlog.SampledLog(logging.getLogger(LOGGER), "cluster change(s)",
                                  rate=floodlog.Rate(qps=1, burst=2, interval=10))
    with caplog.at_level(logging.INFO, logger=LOGGER):
        for n in range(5000):
            key = "TrafficControl added" if n % 5 else "TrafficControl removed"
            sampled.log(key, "cluster m%d: %s", n, key)
        assert len(_messages(caplog)) == 2  # the burst; the summary waits for the interval
        await asyncio.sleep(9)
        assert len(_messages(caplog)) == 2
        await asyncio.sleep(2)
    assert _messages(caplog) == [
        "cluster m0: TrafficControl removed",
        "cluster m1: TrafficControl added",
        "4,998 more cluster change(s) not logged one by one (over 1 a second): "
        "TrafficControl added: 3,999, TrafficControl removed: 999",
    ]


@testkit.fake_time
async def test_the_rate_refills_and_a_new_flood_gets_a_new_summary(
        caplog: pytest.LogCaptureFixture) -> None:
    sampled = floodlog.SampledLog(logging.getLogger(LOGGER), "change(s)",
                                  rate=floodlog.Rate(qps=2, burst=1, interval=5))
    with caplog.at_level(logging.INFO, logger=LOGGER):
        sampled.log("a", "line 1")
        sampled.log("a", "left out 1")
        await asyncio.sleep(0.5)  # one token back
        sampled.log("a", "line 2")
        await asyncio.sleep(10)  # the first summary is out
        sampled.log("b", "line 3")
        sampled.log("b", "left out 2")
        sampled.log("b", "left out 3")
        sampled.flush()  # at once (a stopping controller)
        await asyncio.sleep(10)  # and its timer is gone
    assert _messages(caplog) == [
        "line 1", "line 2",
        "1 more change(s) not logged one by one (over 2 a second): a: 1",
        "line 3",
        "2 more change(s) not logged one by one (over 2 a second): b: 2",
    ]


async def test_nothing_is_counted_when_the_level_is_off(caplog: pytest.LogCaptureFixture) -> None:
    sampled = floodlog.SampledLog(logging.getLogger(LOGGER), "change(s)",
                                  rate=floodlog.Rate(qps=1, burst=1))
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        for _ in range(10):
            sampled.log("a", "line")
        sampled.flush()
    assert _messages(caplog) == []


@pytest.mark.parametrize("rate", [dict(qps=0), dict(burst=0), dict(interval=0)])
def test_a_rate_that_could_never_log_is_refused(rate: dict[str, float]) -> None:
    with pytest.raises(ValueError, match="invalid log rate"):
        floodlog.Rate(**rate)  # type: ignore[arg-type]
