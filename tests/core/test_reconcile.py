"""The controller runtime: results, errors that never kill a worker, terminal errors, metrics."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from collections.abc import AsyncIterator

import prometheus_client
import pytest

import testkit
from clusterhealth_core import clock as clocks
from clusterhealth_core import reconcile, retry, workqueue
from clusterhealth_core.kube import errors

# Fake time (looptime): the runtime sleeps and times out on the loop's clock (the injected
# clocks.Clock), so backoffs, deadlines and "no retry may come" waits pass at once, exactly.
# each on a loop of its own: the session's loop runs other tests' background tasks, and fake
# time moves only when its loop is idle
pytestmark = [pytest.mark.looptime, pytest.mark.asyncio(loop_scope="function")]

FAST = workqueue.RateLimit(backoff=retry.Backoff(initial=0.01, factor=2, maximum=0.05,
                                                 jitter=0, attempts=1_000_000))


def sample(registry: prometheus_client.CollectorRegistry, metric: str,
           **labels: str) -> float:
    value = registry.get_sample_value(metric, labels)
    return 0.0 if value is None else value


@contextlib.asynccontextmanager
async def running(controller: reconcile.Controller) -> AsyncIterator[None]:
    task = asyncio.create_task(controller.run())
    try:
        yield
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


def make(name: str, fn: reconcile.Reconcile, **kwargs: object
         ) -> tuple[reconcile.Controller, prometheus_client.CollectorRegistry]:
    registry = prometheus_client.CollectorRegistry()
    controller = reconcile.Controller(
        name, fn, metrics=reconcile.ControllerMetrics(registry), clock=clocks.Clock(),
        settings=reconcile.ControllerSettings(workers=2, rate_limit=FAST),
        **kwargs)  # type: ignore[arg-type]
    return controller, registry


async def test_any_exception_is_retried_with_backoff_and_the_worker_survives() -> None:
    calls: list[str] = []

    async def flaky(key: str) -> reconcile.Result:
        calls.append(key)
        if len(calls) == 1:
            raise ValueError("a bug in a reconcile")
        if len(calls) == 2:
            raise errors.Unreachable("API server away")
        return reconcile.DONE

    controller, registry = make("flaky", flaky)
    async with running(controller):
        controller.enqueue("a")
        await testkit.eventually(
            lambda: sample(registry, "clusterhealth_controller_reconcile_total",
                           controller="flaky", result="success") == 1, timeout=5, interval=0.005)
    assert calls == ["a", "a", "a"]
    assert sample(registry, "clusterhealth_controller_reconcile_total", controller="flaky",
                  result="error") == 2
    assert sample(registry, "clusterhealth_workqueue_retries_total", name="flaky") == 2


async def test_requeue_after_runs_again() -> None:
    calls: list[float] = []
    loop = asyncio.get_running_loop()

    async def periodic(key: str) -> reconcile.Result:
        calls.append(loop.time())
        return reconcile.Result(requeue_after=0.05)

    controller, registry = make("periodic", periodic)
    async with running(controller):
        controller.enqueue("a")
        await testkit.eventually(lambda: len(calls) >= 3, timeout=5, interval=0.005)
    # on fake time the gaps are exactly 0.05 s, up to the float's rounding
    assert all(round(b - a, 9) >= 0.05 for a, b in itertools.pairwise(calls)), calls
    assert sample(registry, "clusterhealth_controller_reconcile_total", controller="periodic",
                  result="requeue_after") >= 2


async def test_terminal_error_is_reported_and_not_retried() -> None:
    reported: list[tuple[str, str]] = []
    calls: list[str] = []

    async def invalid(key: str) -> reconcile.Result:
        calls.append(key)
        raise reconcile.TerminalError("InvalidSpec", "path must start with /")

    async def report(key: str, exc: reconcile.TerminalError) -> None:
        reported.append((key, exc.reason))

    controller, registry = make("terminal", invalid, on_terminal=report)
    async with running(controller):
        controller.enqueue("ns/mci")
        await testkit.eventually(lambda: reported, timeout=5, interval=0.005)
        await asyncio.sleep(0.2)  # several backoff periods: no retry may come
        assert calls == ["ns/mci"]
        controller.enqueue("ns/mci")  # the object changed
        await testkit.eventually(lambda: len(calls) == 2, timeout=5, interval=0.005)
    assert reported == [("ns/mci", "InvalidSpec")] * 2
    assert sample(registry, "clusterhealth_controller_reconcile_total", controller="terminal",
                  result="terminal") == 2


async def test_a_failing_report_of_a_terminal_error_is_retried() -> None:
    attempts: list[int] = []

    async def invalid(key: str) -> reconcile.Result:
        raise reconcile.TerminalError("InvalidSpec", "bad")

    async def report(key: str, exc: reconcile.TerminalError) -> None:
        attempts.append(1)
        if len(attempts) < 3:
            raise errors.Unreachable("cannot write the condition")

    controller, _ = make("report", invalid, on_terminal=report)
    async with running(controller):
        controller.enqueue("k")
        await testkit.eventually(lambda: len(attempts) == 3, timeout=5, interval=0.005)


async def test_one_key_is_never_reconciled_by_two_workers_at_once() -> None:
    active: set[str] = set()
    overlaps: list[str] = []
    done: list[str] = []

    async def slow(key: str) -> reconcile.Result:
        if key in active:
            overlaps.append(key)
        active.add(key)
        await asyncio.sleep(0.02)
        active.discard(key)
        done.append(key)
        return reconcile.DONE

    controller, _ = make("slow", slow)
    async with running(controller):
        for _ in range(5):
            controller.enqueue("a")
            await asyncio.sleep(0.005)
        await testkit.eventually(lambda: len(done) >= 2 and not active, timeout=5, interval=0.005)
    assert overlaps == []


async def test_overall_rate_limit_spaces_out_many_failing_keys() -> None:
    now = {"t": 0.0}

    class Fixed(clocks.Clock):
        def monotonic(self) -> float:
            return now["t"]

    bucket = workqueue.TokenBucket(qps=10, burst=3, clock=Fixed())
    waits = [bucket.reserve() for _ in range(6)]
    assert waits == pytest.approx([0, 0, 0, 0.1, 0.2, 0.3])
    now["t"] = 10.0  # refilled up to the burst
    assert bucket.reserve() == 0


async def test_a_reconcile_past_its_deadline_is_cancelled_counted_and_retried(
        caplog: pytest.LogCaptureFixture) -> None:
    calls: list[str] = []
    cancelled: list[str] = []

    async def hangs_once(key: str) -> reconcile.Result:
        calls.append(key)
        if len(calls) == 1:
            try:
                await asyncio.Event().wait()  # a call that never returns
            except asyncio.CancelledError:
                cancelled.append(key)
                raise
        return reconcile.DONE

    registry = prometheus_client.CollectorRegistry()
    controller = reconcile.Controller(
        "deadline", hangs_once, metrics=reconcile.ControllerMetrics(registry),
        clock=clocks.Clock(),
        settings=reconcile.ControllerSettings(workers=1, rate_limit=FAST, timeout=0.2))
    async with running(controller):
        controller.enqueue("slow")
        controller.enqueue("other")
        await testkit.eventually(
            lambda: sample(registry, "clusterhealth_controller_reconcile_total",
                           controller="deadline", result="success") == 2, timeout=5, interval=0.005)
    assert calls == ["slow", "other", "slow"]  # the one worker was freed, the key retried
    assert cancelled == ["slow"]
    assert sample(registry, "clusterhealth_controller_reconcile_total", controller="deadline",
                  result="timeout") == 1
    assert sample(registry, "clusterhealth_workqueue_retries_total", name="deadline") == 1
    assert "reconcile of slow did not finish within its 0.2s deadline" in caplog.text


async def test_a_timeout_raised_inside_a_reconcile_is_an_ordinary_error() -> None:
    async def raises(key: str) -> reconcile.Result:
        raise TimeoutError("a probe's own timeout")

    controller, registry = make("own-timeout", raises)
    assert await controller.process("k") == reconcile.RESULT_ERROR
    assert sample(registry, "clusterhealth_workqueue_retries_total", name="own-timeout") == 1


async def test_a_reconcile_timeout_must_be_positive() -> None:
    with pytest.raises(ValueError, match="reconcile timeout must be > 0"):
        reconcile.ControllerSettings(timeout=0)


async def test_a_backlog_that_never_suspends_lets_other_tasks_run_between_keys() -> None:
    order: list[str] = []

    async def decide(key: str) -> None:  # from caches: never suspends
        order.append(key)

    async def other() -> None:
        order.append("other")

    controller, _ = make("backlog", decide)
    for index in range(20):
        controller.enqueue(f"k{index:02d}")
    async with running(controller):
        asyncio.get_running_loop().call_soon(lambda: asyncio.ensure_future(other()))
        async with asyncio.timeout(5):
            while len(order) < 21:
                await asyncio.sleep(0.01)
    assert order.index("other") < 10  # not after the whole backlog
    assert sorted(k for k in order if k != "other") == [f"k{i:02d}" for i in range(20)]
