"""Fencing, bounded stop and the standby's cost of leader election, on the real API server.

The API server's audit log is the witness of who wrote what: every elector
process runs as its own ServiceAccount (``elector.grant_identities``), so each
request in the log names the process that sent it.
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime
import json
import pathlib
import signal
import time
import uuid
from collections.abc import Iterable, Mapping
from typing import Any

import pytest

import testkit
from clusterhealth_core import election, runner
from clusterhealth_core.kube import client as kube
from clusterhealth_core.kube import errors, resources
from clusterhealth_localenv import elector as elector_proc
from clusterhealth_localenv import environment

LEASE = 3.0
RENEW = 2.0
RETRY = 0.5
WRITE_VERBS = frozenset({"create", "update", "patch", "delete"})


@pytest.fixture
def audited(audited_env: environment.LocalEnvironment) -> environment.LocalEnvironment:
    """The session's control plane whose API server writes an audit log."""
    return audited_env


# --- elector processes ------------------------------------------------------------


@dataclasses.dataclass
class Proc:
    """One elector process, its identity and the JSON lines it printed."""

    identity: str
    user: str
    proc: asyncio.subprocess.Process
    events: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    stderr: list[str] = dataclasses.field(default_factory=list)
    readers: list[asyncio.Task[None]] = dataclasses.field(default_factory=list)

    def times(self, kind: str, after: float) -> list[float]:
        return [float(e["t"]) for e in self.events if e["event"] == kind and e["t"] > after]

    def running(self) -> bool:
        return self.proc.returncode is None

    def log_tail(self, lines: int = 40) -> str:
        return "\n".join(self.stderr[-lines:])

    async def wait(self, kind: str, after: float, timeout: float, count: int = 1) -> float:
        """The time of the ``count``-th ``kind`` event after ``after``."""
        seen: list[float] = await testkit.eventually(
            lambda: self.times(kind, after)[count - 1:], timeout, interval=0.02, process=self,
            what=f"{self.identity}: {count} {kind!r} after {after}")
        return seen[0]


async def _read(proc: Proc, stream: asyncio.StreamReader, into_events: bool) -> None:
    while line := await stream.readline():
        if into_events:
            proc.events.append(json.loads(line))
        else:
            proc.stderr.append(line.decode(errors="replace").rstrip())


@dataclasses.dataclass
class Scene:
    """A namespace with a Lease name, a ConfigMap and one identity per process."""

    env: environment.LocalEnvironment
    namespace: str
    lease: str
    configmap: str
    kubeconfigs: dict[str, pathlib.Path]
    procs: list[Proc] = dataclasses.field(default_factory=list)

    @classmethod
    async def create(cls, env: environment.LocalEnvironment, tmp_path: pathlib.Path,
                     names: list[str]) -> Scene:
        suffix = uuid.uuid4().hex[:6]
        namespace, lease, configmap = f"fence-{suffix}", f"lease-{suffix}", f"cm-{suffix}"
        async with env.client() as api:
            kubeconfigs = await elector_proc.grant_identities(
                api, env.servers[environment.CONTROL_PLANE].url, env.workdir / "ca.crt",
                namespace, lease, configmap, names, tmp_path)
            await api.create(resources.CONFIGMAPS, {
                "metadata": {"name": configmap, "namespace": namespace}, "data": {}})
        return cls(env, namespace, lease, configmap, kubeconfigs)

    async def spawn(self, python: str, python_env: dict[str, str], identity: str,
                    *extra: str) -> Proc:
        proc = await asyncio.create_subprocess_exec(
            python, "-u", "-m", "clusterhealth_localenv.elector",
            "--kubeconfig", str(self.kubeconfigs[identity]), "--lease", self.lease,
            "--namespace", self.namespace, "--identity", identity,
            "--lease-duration", str(LEASE), "--renew-deadline", str(RENEW),
            "--retry-period", str(RETRY), *extra,
            stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE, env=python_env,
        )
        assert proc.stdout is not None and proc.stderr is not None
        handle = Proc(identity, elector_proc.username(self.namespace, identity), proc)
        handle.readers = [asyncio.create_task(_read(handle, proc.stdout, True)),
                          asyncio.create_task(_read(handle, proc.stderr, False))]
        self.procs.append(handle)
        return handle

    async def stop_all(self) -> None:
        for proc in self.procs:
            if proc.proc.returncode is None:
                proc.proc.send_signal(signal.SIGCONT)
                proc.proc.send_signal(signal.SIGTERM)
        for proc in self.procs:
            try:
                async with asyncio.timeout(15):
                    await proc.proc.wait()
            except TimeoutError:
                proc.proc.kill()
                await proc.proc.wait()
            await asyncio.gather(*proc.readers)


async def _first(procs: Iterable[Proc], kind: str, after: float, timeout: float
                 ) -> tuple[Proc, float]:
    def earliest() -> tuple[Proc, float] | None:
        found = [(p, t[0]) for p in procs if (t := p.times(kind, after))]
        return min(found, key=lambda pair: pair[1]) if found else None

    first: tuple[Proc, float] = await testkit.eventually(
        earliest, timeout, interval=0.02, what=f"a process reporting {kind!r}")
    return first


# --- the audit log ------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Request:
    """One request in the audit log (its stages merged)."""

    user: str
    verb: str
    resource: str
    name: str
    code: int | None
    received: datetime.datetime


def _requests(env: environment.LocalEnvironment, namespace: str) -> list[Request]:
    """Every request on objects of ``namespace``, by the order the server received them."""
    merged: dict[str, Mapping[str, Any]] = {}
    for event in env.audit_events():
        ref = event.get("objectRef") or {}
        if ref.get("namespace") != namespace:
            continue
        if event["auditID"] not in merged or event.get("stage") == "ResponseComplete":
            merged[event["auditID"]] = event
    requests = [
        Request(
            user=str(event["user"]["username"]), verb=str(event["verb"]),
            resource=str((event.get("objectRef") or {}).get("resource", "")),
            name=str((event.get("objectRef") or {}).get("name", "")),
            code=(event.get("responseStatus") or {}).get("code"),
            received=environment.audit_time(event),
        )
        for event in merged.values()
    ]
    return sorted(requests, key=lambda r: r.received)


# --- tests --------------------------------------------------------------------------


async def test_paused_leader_writes_nothing_after_another_takes_over(
    audited: environment.LocalEnvironment, python: str, python_env: dict[str, str],
    tmp_path: pathlib.Path,
) -> None:
    names = ["e0", "e1", "e2"]
    scene = await Scene.create(audited, tmp_path, names)
    write = ("--write-configmap", scene.configmap, "--write-interval", "0.2")
    for name in names:
        await scene.spawn(python, python_env, name, *write)
    try:
        old, started = await _first(scene.procs, "start", float("-inf"), timeout=60)
        await old.wait("wrote", started, timeout=30, count=3)
        # SIGSTOP just after a write, while the work sleeps: a stop between the fence's
        # check and the request leaving the process is the documented remaining
        # window (microseconds wide); this test shows everything outside it.
        await old.wait("wrote", time.monotonic(), timeout=10)
        old.proc.send_signal(signal.SIGSTOP)
        stopped_at = time.monotonic()
        others = [p for p in scene.procs if p is not old]
        new, taken = await _first(others, "start", stopped_at, timeout=30)
        await new.wait("wrote", taken, timeout=30, count=3)
        old.proc.send_signal(signal.SIGCONT)
        await old.wait("stop", stopped_at, timeout=30)
        await asyncio.sleep(4 * RETRY)  # the old leader campaigns again, as a standby
        assert old.proc.returncode is None, old.stderr[-10:]
        assert not old.times("wrote", stopped_at)
    finally:
        await scene.stop_all()

    requests = _requests(audited, scene.namespace)
    acquired = next(r.received for r in requests
                    if r.user == new.user and r.resource == "leases"
                    and r.verb in ("update", "create") and r.code in (200, 201))
    late_writes = [r for r in requests if r.user == old.user and r.verb in WRITE_VERBS
                   and r.received >= acquired]
    assert late_writes == [], late_writes
    # The witness sees each identity: the old leader wrote before, the new one after,
    # and the old one was alive and talking to the API server after the take-over.
    assert sum(1 for r in requests if r.user == old.user and r.verb == "patch"
               and r.code == 200 and r.received < acquired) >= 3
    assert sum(1 for r in requests if r.user == new.user and r.verb == "patch"
               and r.code == 200 and r.received > acquired) >= 3
    assert any(r.user == old.user and r.resource == "leases" and r.received > acquired
               for r in requests)


async def test_standby_watches_instead_of_polling_and_takes_a_released_lease(
    audited: environment.LocalEnvironment, python: str, python_env: dict[str, str],
    tmp_path: pathlib.Path,
) -> None:
    scene = await Scene.create(audited, tmp_path, ["a", "b"])
    first = await scene.spawn(python, python_env, "a")
    try:
        await first.wait("start", float("-inf"), timeout=60)
        standby = await scene.spawn(python, python_env, "b")
        await standby.wait("ready", float("-inf"), timeout=60)
        await asyncio.sleep(4 * RETRY)  # its first read, then the watch
        window_start = datetime.datetime.now(datetime.UTC)
        await asyncio.sleep(12 * RETRY)  # client-go's standby reads the Lease 12 times here
        window_end = datetime.datetime.now(datetime.UTC)
        requests = _requests(audited, scene.namespace)
        by_standby = [r for r in requests if r.user == standby.user]
        in_window = [r for r in by_standby if window_start <= r.received <= window_end]
        assert in_window == [], in_window
        assert any(r.verb == "watch" and r.resource == "leases" and r.code == 200
                   and r.received < window_start for r in by_standby), by_standby
        assert not standby.times("start", float("-inf"))

        # A release (graceful stop of the leader) is seen on the watch and taken.
        term = time.monotonic()
        first.proc.send_signal(signal.SIGTERM)
        await standby.wait("start", term, timeout=30)
    finally:
        await scene.stop_all()


async def test_candidate_waits_for_the_holders_lease_duration(
    audited: environment.LocalEnvironment,
) -> None:
    lease = f"longer-{uuid.uuid4().hex[:6]}"
    holder_seconds = 2 * LEASE
    async with audited.client() as api:
        await api.create(resources.LEASES, {
            "metadata": {"name": lease, "namespace": "default"},
            "spec": {"holderIdentity": "ghost", "leaseDurationSeconds": int(holder_seconds),
                     "leaseTransitions": 0}})
        candidate = election.LeaderElector(api, election.ElectionConfig(
            lease, "default", "candidate", LEASE, RENEW, RETRY))
        task = asyncio.create_task(candidate.run(lambda: asyncio.Event().wait()))
        try:
            # Past its own lease duration the ghost's (longer) lease still holds.
            await asyncio.sleep(LEASE + 2 * RETRY)
            assert not candidate.is_leader
            assert candidate.healthy()[0]
            await testkit.eventually(lambda: candidate.is_leader, 4 * holder_seconds,
                                     interval=0.05, what="the candidate leads")
            spec = (await api.get(resources.LEASES, lease, namespace="default"))["spec"]
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
        assert spec["holderIdentity"] == "candidate"
        assert spec["leaseTransitions"] == 1
        assert spec["leaseDurationSeconds"] == int(LEASE)


async def test_fence_refuses_writes_after_a_pause(
    audited: environment.LocalEnvironment,
) -> None:
    lease = f"pause-{uuid.uuid4().hex[:6]}"
    configmap = f"pause-{uuid.uuid4().hex[:6]}"
    async with audited.client() as api:
        await api.create(resources.CONFIGMAPS, {
            "metadata": {"name": configmap, "namespace": "default"}, "data": {}})
        leader = election.LeaderElector(api, election.ElectionConfig(
            lease, "default", "pausing", LEASE, RENEW, RETRY))
        fenced = api.guarded(leader.check_fence)
        with pytest.raises(errors.NotLeader):
            await fenced.patch(resources.CONFIGMAPS, configmap, {"data": {"n": "0"}},
                               namespace="default")
        task = asyncio.create_task(leader.run(lambda: asyncio.Event().wait()))
        try:
            await testkit.eventually(lambda: leader.is_leader, interval=0.05, what="it leads")
            await fenced.patch(resources.CONFIGMAPS, configmap, {"data": {"n": "1"}},
                               namespace="default")
            assert leader.healthy()[0]
            time.sleep(RENEW + 0.1)  # noqa: ASYNC251  (the whole process stalls: GC, overload)
            with pytest.raises(errors.NotLeader, match="renew deadline"):
                await fenced.patch(resources.CONFIGMAPS, configmap, {"data": {"n": "2"}},
                                   namespace="default")
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
        data = (await api.get(resources.CONFIGMAPS, configmap, namespace="default"))["data"]
        assert data == {"n": "1"}
        # Reads are not fenced.
        await fenced.get(resources.CONFIGMAPS, configmap, namespace="default")


async def test_work_that_does_not_stop_fails_liveness_and_exits(
    audited: environment.LocalEnvironment,
) -> None:
    lease = f"stuck-{uuid.uuid4().hex[:6]}"
    exits: list[int] = []
    cancels: list[float] = []
    api = testkit.PartitionableClient(audited.servers[environment.CONTROL_PLANE].credentials())
    leader = election.LeaderElector(api, election.ElectionConfig(
        lease, "default", "stuck", LEASE, RENEW, RETRY, stop_timeout=0.5))

    released, started, returned = asyncio.Event(), asyncio.Event(), asyncio.Event()

    async def stubborn(_: kube.ApiClient) -> None:
        started.set()
        while not released.is_set():  # ignores cancellation until the test lets it go
            try:
                await asyncio.sleep(0.05)
            except asyncio.CancelledError:
                cancels.append(time.monotonic())
        returned.set()

    task = asyncio.create_task(runner.lead_while_elected(leader, stubborn, api, exits.append))
    try:
        await testkit.eventually(lambda: leader.is_leader, interval=0.05, what="it leads")
        assert leader.healthy()[0]
        api.partitioned = True
        async with asyncio.timeout(10 * RENEW):
            with pytest.raises(election.WorkDidNotStop):
                await task
        assert exits == [runner.EXIT_WORK_STUCK]
        assert len(cancels) == 1
        alive, why = leader.healthy()
        assert not alive and "did not stop" in why
        assert not leader.is_leader
    finally:
        released.set()
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        if started.is_set():
            await testkit.eventually(returned.is_set, 5, what="the orphaned work returns")
        await api.close()


@pytest.mark.parametrize("how", ["lease-lost", "sigterm"])
async def test_process_exits_when_work_ignores_cancellation(
    audited: environment.LocalEnvironment, python: str, python_env: dict[str, str],
    tmp_path: pathlib.Path, how: str,
) -> None:
    scene = await Scene.create(audited, tmp_path, ["stubborn"])
    proc = await scene.spawn(python, python_env, "stubborn", "--ignore-cancel")
    try:
        started = await proc.wait("start", float("-inf"), timeout=60)
        if how == "lease-lost":
            proc.proc.send_signal(signal.SIGSTOP)
            await asyncio.sleep(RENEW + 2 * RETRY)
            proc.proc.send_signal(signal.SIGCONT)
        else:
            proc.proc.send_signal(signal.SIGTERM)
        async with asyncio.timeout(30):
            code = await proc.proc.wait()
        await asyncio.gather(*proc.readers)
    finally:
        await scene.stop_all()
    assert code == runner.EXIT_WORK_STUCK, proc.stderr[-10:]
    assert proc.times("ignored-cancel", started)
    assert not proc.times("exit", started)
    assert any("did not stop" in line for line in proc.stderr), proc.stderr[-10:]
    async with audited.client() as api:
        spec = (await api.get(resources.LEASES, scene.lease, namespace=scene.namespace))["spec"]
    assert spec["holderIdentity"] == "stubborn"  # never released while the work may run
