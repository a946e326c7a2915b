"""The Event recorder against the real API server: aggregation, expiry, bounds, namespaces."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Iterator
from typing import Any

import prometheus_client
import pytest

import testkit
from clusterhealth_core import clock as clocks
from clusterhealth_core import events, retry
from clusterhealth_core.kube import client as kube
from clusterhealth_core.kube import config, resources

COMPONENT = "clusterhealth-test"


@pytest.fixture
async def namespace(cp: kube.ApiClient) -> AsyncIterator[str]:
    name = testkit.unique("events")
    await cp.create(resources.NAMESPACES, {"metadata": {"name": name}})
    try:
        yield name
    finally:
        await cp.delete(resources.NAMESPACES, name, missing_ok=True)


@pytest.fixture
async def configmap(cp: kube.ApiClient, namespace: str) -> dict[str, Any]:
    obj = await cp.create(resources.CONFIGMAPS, {
        "metadata": {"name": testkit.unique("subject"), "namespace": namespace},
        "data": {"a": "1"}})
    return {"apiVersion": "v1", "kind": "ConfigMap", **obj}


@pytest.fixture
async def cluster(cp: kube.ApiClient) -> AsyncIterator[dict[str, Any]]:
    obj = await cp.create(resources.CLUSTERS, {
        "apiVersion": resources.CLUSTERS.api_version, "kind": "Cluster",
        "metadata": {"name": testkit.unique("member")},
        "spec": {"apiEndpoint": "https://127.0.0.1:1", "syncMode": "Push"}})
    try:
        yield obj
    finally:
        await cp.delete(resources.CLUSTERS, obj["metadata"]["name"], missing_ok=True)


class Metrics:
    def __init__(self) -> None:
        self.registry = prometheus_client.CollectorRegistry()
        self.events = events.EventMetrics(self.registry)

    def value(self, name: str, **labels: str) -> float:
        found = self.registry.get_sample_value(name, {"component": COMPONENT, **labels})
        return found or 0.0


@contextlib.contextmanager
def no_errors_logged(caplog: pytest.LogCaptureFixture) -> Iterator[None]:
    caplog.set_level(logging.DEBUG, logger=events.__name__)
    yield
    assert [r for r in caplog.records if r.levelno >= logging.WARNING] == []


@contextlib.asynccontextmanager
async def running(recorder: events.EventRecorder) -> AsyncIterator[asyncio.Task[None]]:
    task = asyncio.create_task(recorder.run())
    try:
        yield task
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def events_about(cp: kube.ApiClient, namespace: str,
                       obj: dict[str, Any]) -> list[dict[str, Any]]:
    found = await cp.list(resources.EVENTS, namespace=namespace,
                          field_selector=f"involvedObject.uid={obj['metadata']['uid']}")
    return list(found["items"])


async def test_repeats_aggregate_into_one_event(
        cp: kube.ApiClient, namespace: str, configmap: dict[str, Any],
        caplog: pytest.LogCaptureFixture) -> None:
    clock = clocks.ManualClock()
    metrics = Metrics()
    recorder = events.EventRecorder(cp, COMPONENT, clock, instance="replica-a",
                                    metrics=metrics.events)
    with no_errors_logged(caplog):
        async with running(recorder):
            for _ in range(3):
                recorder.record(configmap, "Warning", "Broken", "it broke")
                clock.advance(60)
            recorder.record(configmap, "Warning", "Broken", "it broke differently")
            recorder.record(configmap, "Normal", "Broken", "it broke")
            await recorder.flush()

    found = await events_about(cp, namespace, configmap)
    by_message = {(e["type"], e["message"]): e for e in found}
    assert len(found) == 3
    event = by_message[("Warning", "it broke")]
    assert event["count"] == 3
    assert event["firstTimestamp"] == "2026-01-01T00:00:00Z"
    assert event["lastTimestamp"] == "2026-01-01T00:02:00Z"
    meta = configmap["metadata"]
    assert event["involvedObject"] == {
        "apiVersion": "v1", "kind": "ConfigMap", "name": meta["name"],
        "namespace": namespace, "uid": meta["uid"], "resourceVersion": meta["resourceVersion"]}
    assert event["metadata"]["namespace"] == namespace  # the object's own namespace
    assert event["source"] == {"component": COMPONENT}
    assert event["reportingComponent"] == COMPONENT
    assert event["reportingInstance"] == "replica-a"
    assert event["action"] == "Broken"
    assert event["eventTime"].startswith("2026-01-01T00:00:00.")
    assert by_message[("Warning", "it broke differently")]["count"] == 1
    assert by_message[("Normal", "it broke")]["count"] == 1
    assert metrics.value("clusterhealth_events_recorded_total", type="Warning") == 4
    assert metrics.value("clusterhealth_events_recorded_total", type="Normal") == 1
    assert metrics.value("clusterhealth_events_errors_total") == 0


async def test_an_expired_event_is_created_again(
        cp: kube.ApiClient, namespace: str, configmap: dict[str, Any],
        caplog: pytest.LogCaptureFixture) -> None:
    clock = clocks.ManualClock()
    recorder = events.EventRecorder(cp, COMPONENT, clock)
    with no_errors_logged(caplog):
        async with running(recorder):
            recorder.record(configmap, "Warning", "Broken", "it broke")
            recorder.record(configmap, "Warning", "Broken", "it broke")
            await recorder.flush()
            [first] = await events_about(cp, namespace, configmap)
            assert first["count"] == 2
            # the event TTL ran out: the API server deleted the Event
            await cp.delete(resources.EVENTS, first["metadata"]["name"], namespace=namespace)
            clock.advance(7200)
            recorder.record(configmap, "Warning", "Broken", "it broke")
            await recorder.flush()
            [again] = await events_about(cp, namespace, configmap)
            assert again["metadata"]["uid"] != first["metadata"]["uid"]  # a new object
            assert again["metadata"]["name"] == first["metadata"]["name"]
            assert again["count"] == 3  # the count goes on, as in client-go
            assert again["firstTimestamp"] == first["firstTimestamp"]
            assert again["lastTimestamp"] == "2026-01-01T02:00:00Z"
            # ... and the key is not stuck: the next repeat is counted on the new Event
            recorder.record(configmap, "Warning", "Broken", "it broke")
            await recorder.flush()
    [last] = await events_about(cp, namespace, configmap)
    assert (last["metadata"]["uid"], last["count"]) == (again["metadata"]["uid"], 4)


@pytest.mark.parametrize(("configured", "other"),
                         [("default", "kube-system"), ("kube-system", "default")])
async def test_cluster_scoped_objects_land_in_the_configured_namespace(
        cp: kube.ApiClient, cluster: dict[str, Any], configured: str, other: str,
        caplog: pytest.LogCaptureFixture) -> None:
    recorder = events.EventRecorder(cp, COMPONENT, clocks.Clock(), namespace=configured)
    with no_errors_logged(caplog):
        async with running(recorder):
            recorder.record(cluster, "Normal", "Seen", "a cluster")
            recorder.record(cluster, "Normal", "Seen", "a cluster")
            await recorder.flush()
    [event] = await events_about(cp, configured, cluster)
    assert event["count"] == 2
    assert event["involvedObject"] == {
        "apiVersion": resources.CLUSTERS.api_version, "kind": "Cluster",
        "name": cluster["metadata"]["name"], "uid": cluster["metadata"]["uid"],
        "resourceVersion": cluster["metadata"]["resourceVersion"]}
    assert await events_about(cp, other, cluster) == []


@pytest.mark.parametrize("configured", ["karmada-system", "clusterhealth-system", ""])
async def test_a_namespace_the_api_server_refuses_is_an_error_at_start(
        cp: kube.ApiClient, configured: str) -> None:
    with pytest.raises(ValueError, match="only in default or kube-system"):
        events.check_namespace(configured)
    with pytest.raises(ValueError, match="cannot be written to namespace"):
        events.EventRecorder(cp, COMPONENT, clocks.Clock(), namespace=configured)


async def test_long_messages_are_capped(cp: kube.ApiClient, namespace: str,
                                        configmap: dict[str, Any]) -> None:
    recorder = events.EventRecorder(cp, COMPONENT, clocks.Clock(), instance="i" * 300)
    async with running(recorder):
        recorder.record(configmap, "Warning", "Verbose", "x" * 5000)
        recorder.record(configmap, "Warning", "Accents", "é" * 1000)  # 2000 bytes
        recorder.record(configmap, "Warning", "Short", "é" * 512)  # exactly 1024 bytes
        recorder.record(configmap, "Warning", "R" * 200, "long reason")
        await recorder.flush()
    found = {e["reason"]: e for e in await events_about(cp, namespace, configmap)}
    assert len(found) == 4
    assert found["Verbose"]["message"] == "x" * 1021 + "..."
    assert found["Accents"]["message"] == "é" * 510 + "..."
    assert found["Short"]["message"] == "é" * 512
    assert found["R" * 128]["message"] == "long reason"
    assert found["Verbose"]["reportingInstance"] == "i" * 128


async def test_the_backlog_is_bounded(cp: kube.ApiClient, namespace: str,
                                      configmap: dict[str, Any],
                                      caplog: pytest.LogCaptureFixture) -> None:
    metrics = Metrics()
    recorder = events.EventRecorder(cp, COMPONENT, clocks.Clock(), max_pending=3,
                                    metrics=metrics.events)
    for i in range(5):  # nothing writes yet: the queue fills, and record() never blocks
        recorder.record(configmap, "Normal", "Step", f"step {i}")
    assert recorder.pending == 3
    assert metrics.value("clusterhealth_events_dropped_total", reason="backlog") == 2
    assert "event backlog full" in caplog.text
    async with running(recorder):
        await recorder.flush()
    found = await events_about(cp, namespace, configmap)
    assert sorted(e["message"] for e in found) == ["step 0", "step 1", "step 2"]
    assert metrics.value("clusterhealth_events_recorded_total", type="Normal") == 3


async def test_a_failed_write_is_counted_and_the_recorder_goes_on(
        cp: kube.ApiClient, namespace: str, configmap: dict[str, Any]) -> None:
    metrics = Metrics()
    recorder = events.EventRecorder(cp, COMPONENT, clocks.Clock(), metrics=metrics.events)
    elsewhere = {"apiVersion": "v1", "kind": "ConfigMap",
                 "metadata": {"name": "x", "namespace": testkit.unique("missing"), "uid": "u4"}}
    async with running(recorder) as task:
        recorder.record(elsewhere, "Normal", "Seen", "into a namespace that does not exist")
        recorder.record(configmap, "Normal", "Seen", "fine")
        await recorder.flush()
        assert not task.done()
    assert metrics.value("clusterhealth_events_errors_total") == 1
    assert [e["message"] for e in await events_about(cp, namespace, configmap)] == ["fine"]


async def test_the_key_cache_is_an_lru(cp: kube.ApiClient, namespace: str,
                                       configmap: dict[str, Any]) -> None:
    recorder = events.EventRecorder(cp, COMPONENT, clocks.Clock(), cache_size=2)
    async with running(recorder):
        for message in ("a", "b", "a", "c", "a", "b"):  # "b" is the least recent when "c" comes
            recorder.record(configmap, "Normal", "Lru", message)
            await recorder.flush()
    found = await events_about(cp, namespace, configmap)
    counts = sorted((e["message"], e["count"]) for e in found)
    # "a" stays cached (count 3); "b" was evicted, so its repeat is a new Event
    assert counts == [("a", 3), ("b", 1), ("b", 1), ("c", 1)]


class SteppedClock(clocks.ManualClock):
    def __init__(self) -> None:
        super().__init__()
        self.t = 0.0

    def monotonic(self) -> float:
        return self.t


async def test_spam_filter_per_object(cp: kube.ApiClient) -> None:
    clock = SteppedClock()
    metrics = Metrics()
    recorder = events.EventRecorder(cp, COMPONENT, clock, metrics=metrics.events,
                                    spam_filter=events.SpamFilter(burst=3, refill_every=60))
    noisy = {"kind": "Cluster", "metadata": {"name": "noisy", "uid": "u1"}}
    quiet = {"kind": "Cluster", "metadata": {"name": "quiet", "uid": "u2"}}
    for i in range(5):
        recorder.record(noisy, "Warning", "Flap", f"flap {i}")
    recorder.record(quiet, "Normal", "Fine", "fine")
    assert recorder.pending == 4  # 3 of noisy's, and quiet's own bucket
    assert metrics.value("clusterhealth_events_dropped_total", reason="rate_limit") == 2
    clock.t += 59
    recorder.record(noisy, "Warning", "Flap", "too soon")
    assert recorder.pending == 4
    clock.t += 1  # one token back after refill_every
    recorder.record(noisy, "Warning", "Flap", "allowed")
    recorder.record(noisy, "Warning", "Flap", "and again too soon")
    assert recorder.pending == 5
    assert metrics.value("clusterhealth_events_dropped_total", reason="rate_limit") == 4
    assert events.SpamFilter(burst=25, refill_every=300) == events.DEFAULT_SPAM_FILTER


class SleepingClock(SteppedClock):
    """Sleeps move the clock at once and are remembered."""

    def __init__(self) -> None:
        super().__init__()
        self.slept: list[float] = []

    async def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.t += seconds
        await asyncio.sleep(0)


async def test_writes_follow_the_write_rate(cp: kube.ApiClient, namespace: str) -> None:
    clock = SleepingClock()
    metrics = Metrics()
    recorder = events.EventRecorder(cp, COMPONENT, clock, metrics=metrics.events,
                                    write_rate=events.WriteRate(qps=2, burst=3))
    subjects = [{"apiVersion": "v1", "kind": "ConfigMap",
                 "metadata": {"name": f"cm{i}", "namespace": namespace, "uid": f"u{i}"}}
                for i in range(7)]
    for subject in subjects:  # seven objects: the per-object spam filter lets each pass
        recorder.record(subject, "Normal", "Mass", "one of many")
    async with running(recorder):
        await recorder.flush()
    # a burst of 3 at once, then the other 4 at 2 a second: 2 s of waiting in all
    assert sum(clock.slept) == pytest.approx(2.0)
    assert all(s == pytest.approx(0.5) for s in clock.slept), clock.slept
    assert metrics.value("clusterhealth_events_recorded_total", type="Normal") == 7
    assert events.WriteRate(qps=10, burst=50) == events.DEFAULT_WRITE_RATE


async def test_events_wait_while_the_component_is_busy(cp: kube.ApiClient,
                                                      namespace: str) -> None:
    clock = SleepingClock()
    metrics = Metrics()
    recorder = events.EventRecorder(cp, COMPONENT, clock, metrics=metrics.events,
                                    write_rate=None)
    busy_until = {"t": 1.0}
    written_at: list[float] = []
    recorder.hold_while(lambda: clock.t < busy_until["t"], at_most=10)
    subject = {"apiVersion": "v1", "kind": "ConfigMap",
               "metadata": {"name": "held", "namespace": namespace, "uid": "u-held"}}
    real_write = recorder._write

    async def write(pending: Any) -> None:
        written_at.append(clock.t)
        await real_write(pending)

    recorder._write = write  # type: ignore[method-assign]
    async with running(recorder):
        recorder.record(subject, "Normal", "Held", "after the busy second")
        await recorder.flush()
        assert written_at == [pytest.approx(1.0)]  # held until not busy, polled
        busy_until["t"] = clock.t + 100  # busy for longer than at_most
        recorder.record(subject, "Normal", "Held", "after at most ten seconds")
        recorder.record(subject, "Normal", "Held", "and the next at once")
        await recorder.flush()
    start = written_at[0]
    assert written_at[1:] == [pytest.approx(start + 10, abs=events.HOLD_POLL),
                              pytest.approx(start + 10, abs=events.HOLD_POLL)]
    assert metrics.value("clusterhealth_events_recorded_total", type="Normal") == 3


async def test_a_term_that_ends_writes_its_held_events(cp: kube.ApiClient,
                                                       namespace: str) -> None:
    clock = SleepingClock()
    metrics = Metrics()
    recorder = events.EventRecorder(cp, COMPONENT, clock, metrics=metrics.events,
                                    write_rate=None)
    recorder.hold_while(lambda: True, at_most=30)  # busy for good: held up to 30 s
    subject = {"apiVersion": "v1", "kind": "ConfigMap",
               "metadata": {"name": "closing", "namespace": namespace, "uid": "u-closing"}}
    async with running(recorder):
        recorder.record(subject, "Normal", "Held", "told of a write already made")
        for _ in range(10):
            await asyncio.sleep(0)
        # held: the write loop polls the hold, nothing written yet
        assert metrics.value("clusterhealth_events_recorded_total", type="Normal") == 0
        assert 0 < clock.t < 30
        await recorder.close(timeout=5)
    assert recorder.pending == 0
    assert clock.t < 30  # the hold was lifted, not waited out
    assert metrics.value("clusterhealth_events_recorded_total", type="Normal") == 1
    written = await cp.list(resources.EVENTS, namespace=namespace,
                            field_selector="involvedObject.name=closing")
    assert [e["message"] for e in written["items"]] == ["told of a write already made"]


async def test_a_term_that_cannot_write_drops_the_rest_once() -> None:
    metrics = Metrics()
    async with unreachable() as api:
        recorder = events.EventRecorder(api, COMPONENT, SleepingClock(),
                                        metrics=metrics.events, write_rate=None)
        for i in range(5):
            recorder.record({"kind": "Cluster", "metadata": {"name": f"c{i}", "uid": f"u{i}"}},
                            "Normal", "Mass", "m")
        async with running(recorder):
            await recorder.close(timeout=60)
        assert recorder.pending == 0
    assert metrics.value("clusterhealth_events_errors_total") == 1  # one try, not five
    assert metrics.value("clusterhealth_events_dropped_total", reason="closed") == 4


async def test_backlog_drops_are_logged_once_a_minute(caplog: pytest.LogCaptureFixture) -> None:
    clock = SteppedClock()
    metrics = Metrics()
    async with unreachable() as api:  # nothing is written: run() never starts
        recorder = events.EventRecorder(api, COMPONENT, clock, metrics=metrics.events,
                                        max_pending=1, spam_filter=None)
        subject = {"kind": "Cluster", "metadata": {"name": "c", "uid": "u"}}
        for i in range(101):
            recorder.record(subject, "Normal", "Mass", f"m{i}")
        clock.t += events.DROP_LOG_INTERVAL
        recorder.record(subject, "Normal", "Mass", "later")
    lines = [r.getMessage() for r in caplog.records if "event backlog full" in r.getMessage()]
    assert len(lines) == 2, lines
    assert "dropped 1 event(s)" in lines[0] and "dropped 100 event(s)" in lines[1]
    assert metrics.value("clusterhealth_events_dropped_total", reason="backlog") == 101


async def test_record_never_raises(caplog: pytest.LogCaptureFixture) -> None:
    metrics = Metrics()
    async with unreachable() as api:  # never used: nothing is written
        recorder = events.EventRecorder(api, COMPONENT, clocks.Clock(), metrics=metrics.events)
        recorder.record({"metadata": "not a mapping"}, "Normal", "Odd", "odd")
    assert recorder.pending == 0
    assert metrics.value("clusterhealth_events_errors_total") == 1
    assert "could not queue event Odd" in caplog.text


async def test_cancelling_run_is_clean(cp: kube.ApiClient, namespace: str,
                                       configmap: dict[str, Any],
                                       caplog: pytest.LogCaptureFixture) -> None:
    metrics = Metrics()
    recorder = events.EventRecorder(cp, COMPONENT, clocks.Clock(), metrics=metrics.events,
                                    spam_filter=None)
    with no_errors_logged(caplog):
        idle = asyncio.create_task(recorder.run())
        await asyncio.sleep(0.05)
        idle.cancel()
        with pytest.raises(asyncio.CancelledError):
            await idle
        assert idle.cancelled()

        busy = asyncio.create_task(recorder.run())
        for i in range(200):
            recorder.record(configmap, "Normal", "Many", f"event {i}")
        await testkit.eventually(lambda: recorder.pending <= 150, 30,  # cancel mid-writing
                                 "some of the 200 written", interval=0.001)
        busy.cancel()
        with pytest.raises(asyncio.CancelledError):
            await busy
        assert busy.cancelled()
    assert metrics.value("clusterhealth_events_errors_total") == 0
    written = metrics.value("clusterhealth_events_recorded_total", type="Normal")
    assert 0 < written < 200
    # whatever was written is on the server; the rest stays queued, nothing half-counted
    assert len(await events_about(cp, namespace, configmap)) in (written, written + 1)
    assert recorder.pending + written in (200, 199)


@contextlib.asynccontextmanager
async def unreachable() -> AsyncIterator[kube.ApiClient]:
    credentials = config.Credentials(server="https://127.0.0.1:1", insecure_skip_tls_verify=True)
    async with kube.ApiClient(credentials, backoff=retry.NO_RETRY) as api:
        yield api


async def test_an_unreachable_server_is_counted_not_fatal(
        caplog: pytest.LogCaptureFixture) -> None:
    metrics = Metrics()
    async with unreachable() as api:
        recorder = events.EventRecorder(api, COMPONENT, clocks.Clock(), metrics=metrics.events)
        subject = {"kind": "Cluster", "metadata": {"name": "gone", "uid": "u3"}}
        async with running(recorder) as task:
            recorder.record(subject, "Normal", "Seen", "one")
            recorder.record(subject, "Normal", "Seen", "two")
            await recorder.flush()
            assert not task.done()
    assert metrics.value("clusterhealth_events_errors_total") == 2
    assert metrics.value("clusterhealth_events_recorded_total", type="Normal") == 0
    assert "could not record event Seen on Cluster gone" in caplog.text
