"""Three elector processes on one Lease, against the real API server.

Leadership intervals come from each process's own report (CLOCK_MONOTONIC is
shared by all processes), so "at most one leads" is checked at every instant,
not only at sampled ones.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import signal
import subprocess
import time
import uuid
from collections.abc import Iterator

import testkit
from clusterhealth_core.kube import client as kube
from clusterhealth_core.kube import resources
from clusterhealth_localenv import environment

LEASE = 3.0
RENEW = 2.0
RETRY = 0.5
# A standby watches the Lease, so it sees every renewal as it happens and counts the
# lease duration from the last one (at most one retry period before the kill): take-over
# after kill -9 is LEASE - RETRY .. LEASE, plus the attempt's round trips (without the
# watch, e.g. when it is forbidden, LEASE - RETRY .. LEASE + 2 * RETRY).  The bound below
# is the one client-go promises, LEASE + RETRY; SLACK adds the API round trips on a
# loaded two-core machine.
SLACK = 1.0


class Elector:
    def __init__(self, identity: str, proc: subprocess.Popen[str]) -> None:
        self.identity = identity
        self.proc = proc
        self.events: list[dict[str, object]] = []
        self.killed_at: float | None = None

    def drain(self) -> None:
        assert self.proc.stdout is not None
        while True:
            line = self.proc.stdout.readline()
            if not line:
                return
            self.events.append(json.loads(line))

    def intervals(self) -> Iterator[tuple[float, float]]:
        start: float | None = None
        for event in self.events:
            t = float(event["t"])  # type: ignore[arg-type]
            if event["event"] == "start":
                start = t
            elif event["event"] == "stop" and start is not None:
                yield start, t
                start = None
        if start is not None:
            yield start, self.killed_at if self.killed_at is not None else time.monotonic()


def _spawn(python: str, env: dict[str, str], kubeconfig: str, lease: str, identity: str
           ) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [python, "-u", "-m", "clusterhealth_localenv.elector", "--kubeconfig", kubeconfig,
         "--lease", lease, "--identity", identity, "--lease-duration", str(LEASE),
         "--renew-deadline", str(RENEW), "--retry-period", str(RETRY)],
        stdout=subprocess.PIPE, text=True, env=env, bufsize=1,
    )


async def _wait_for(electors: list[Elector], predicate: str, after: float, timeout: float
                    ) -> tuple[Elector, float]:
    def found() -> tuple[Elector, float] | None:
        for elector in electors:
            for event in elector.events:
                t = float(event["t"])  # type: ignore[arg-type]
                if event["event"] == predicate and t > after:
                    return elector, t
        return None

    first: tuple[Elector, float] = await testkit.eventually(
        found, timeout, interval=0.05, what=f"an elector reporting {predicate!r}")
    return first


async def test_three_electors_failover_and_graceful_handover(
    env: environment.LocalEnvironment, cp: kube.ApiClient, python: str,
    python_env: dict[str, str],
) -> None:
    lease = f"election-{uuid.uuid4().hex[:8]}"
    kubeconfig = str(env.kubeconfig())
    electors = [Elector(f"e{i}", _spawn(python, python_env, kubeconfig, lease, f"e{i}"))
                for i in range(3)]
    readers = [asyncio.get_running_loop().run_in_executor(None, e.drain) for e in electors]
    try:
        first, _ = await _wait_for(electors, "start", 0.0, timeout=30)

        # kill -9 of the leader: another leads within lease duration + retry period (+ SLACK).
        first.killed_at = time.monotonic()
        first.proc.send_signal(signal.SIGKILL)
        second, t_second = await _wait_for(
            [e for e in electors if e is not first], "start", first.killed_at, timeout=30
        )
        assert t_second - first.killed_at <= LEASE + RETRY + SLACK

        # graceful stop: the lease is released, the next takes over within a retry period.
        t_term = time.monotonic()
        second.proc.send_signal(signal.SIGTERM)
        third, t_third = await _wait_for(
            [e for e in electors if e not in (first, second)], "start", t_term, timeout=30
        )
        assert t_third - t_term <= RETRY + SLACK
        await asyncio.sleep(2 * RETRY)  # let a few renewals happen

        # leaseTransitions counts every change of holder: e0 -> e1 -> "" -> e2.
        lease_obj = await cp.get(resources.LEASES, lease, namespace="default")
        assert lease_obj["spec"]["holderIdentity"] == third.identity
        assert lease_obj["spec"]["leaseTransitions"] == 2
        renew = lease_obj["spec"]["renewTime"]
        assert renew.endswith("Z") and len(renew.split(".")[1]) == 7  # microseconds + Z
    finally:
        for elector in electors:
            if elector.proc.poll() is None:
                elector.proc.send_signal(signal.SIGTERM)
        for elector in electors:
            try:
                elector.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                elector.proc.kill()
        await asyncio.gather(*readers)

    # At every instant at most one process believed it led.
    spans = sorted(span for e in electors for span in e.intervals())
    assert len(spans) == 3, spans
    for (_, end), (next_start, _) in itertools.pairwise(spans):
        assert end <= next_start, f"overlapping leadership: {spans}"
    assert second.events[-1]["event"] == "exit"
