"""Leader take-over times measured with real elector processes on a real API server.

Each trial starts three ``clusterhealth_localenv.elector`` processes on a fresh
Lease, waits until one leads and the others have seen its record, then either
kills the leader (``SIGKILL``) or stops it gracefully (``SIGTERM``).  The
figure is the time from the signal to another process's ``start`` event; both
ends are ``CLOCK_MONOTONIC``, which every process on the machine shares.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import pathlib
import random
import signal
import sys
import time
import uuid

from clusterhealth_localenv import processes

REPO = pathlib.Path(__file__).resolve().parents[1]
SOURCE_FOLDERS = ("core", "agent", "remedy", "mci-provider", "controlplane")
ELECTORS_PER_TRIAL = 3


class TrialError(RuntimeError):
    """A trial did not reach the expected event; the message quotes the electors' stderr."""


@dataclasses.dataclass(frozen=True)
class Timing:
    """Lease duration, renew deadline and retry period in seconds (client-go defaults)."""

    lease_duration: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0


@dataclasses.dataclass(frozen=True)
class Event:
    """One JSON line of an elector: ready, start, stop or exit, at a monotonic time."""

    kind: str
    identity: str
    t: float


@dataclasses.dataclass
class Elector:
    """A running elector process and the events it has printed so far."""

    identity: str
    proc: asyncio.subprocess.Process
    events: list[Event] = dataclasses.field(default_factory=list)
    stderr: list[str] = dataclasses.field(default_factory=list)
    readers: list[asyncio.Task[None]] = dataclasses.field(default_factory=list)

    def first(self, kind: str, after: float) -> Event | None:
        """The first event of ``kind`` later than ``after``."""
        return next((e for e in self.events if e.kind == kind and e.t > after), None)


def progress(text: str) -> None:
    """One progress line on stderr (stdout carries only the table)."""
    print(f"[{time.strftime('%H:%M:%S')}] {text}", file=sys.stderr, flush=True)


def child_env() -> dict[str, str]:
    """The environment for child Python processes that import the project."""
    paths = [str(REPO / folder) for folder in SOURCE_FOLDERS]
    return {**os.environ, "PYTHONPATH": os.pathsep.join(paths)}




async def _read_events(elector: Elector, stream: asyncio.StreamReader) -> None:
    while line := await stream.readline():
        data = json.loads(line)
        elector.events.append(Event(str(data["event"]), str(data["id"]), float(data["t"])))


async def _read_stderr(elector: Elector, stream: asyncio.StreamReader) -> None:
    while line := await stream.readline():
        elector.stderr.append(line.decode(errors="replace").rstrip())


async def spawn(kubeconfig: pathlib.Path, lease: str, identity: str, timing: Timing) -> Elector:
    """Start one elector process campaigning for ``lease``."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-u", "-m", "clusterhealth_localenv.elector",
        "--kubeconfig", str(kubeconfig), "--lease", lease, "--identity", identity,
        "--lease-duration", str(timing.lease_duration),
        "--renew-deadline", str(timing.renew_deadline),
        "--retry-period", str(timing.retry_period),
        stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE, env=child_env(), preexec_fn=processes.die_with_parent,
    )
    assert proc.stdout is not None and proc.stderr is not None
    elector = Elector(identity, proc)
    elector.readers = [
        asyncio.create_task(_read_events(elector, proc.stdout)),
        asyncio.create_task(_read_stderr(elector, proc.stderr)),
    ]
    return elector


def _stderr_tail(electors: list[Elector]) -> str:
    lines = [f"{e.identity}: {line}" for e in electors for line in e.stderr[-10:]]
    return "\n".join(lines) or "(no stderr)"


async def wait_event(
    electors: list[Elector], kind: str, after: float, timeout: float
) -> tuple[Elector, Event]:
    """The earliest event of ``kind`` after ``after`` among ``electors``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = [(e, ev) for e in electors if (ev := e.first(kind, after)) is not None]
        if found:
            return min(found, key=lambda pair: pair[1].t)
        await asyncio.sleep(0.02)
    raise TrialError(f"no {kind!r} event within {timeout:.0f}s:\n{_stderr_tail(electors)}")


async def wait_all(electors: list[Elector], kind: str, timeout: float) -> float:
    """Wait until every elector printed ``kind``; return the latest such time."""
    times = [(await wait_event([e], kind, float("-inf"), timeout))[1].t for e in electors]
    return max(times)


async def stop_all(electors: list[Elector], grace: float = 10.0) -> None:
    """SIGTERM the electors still running, SIGKILL after ``grace``, reap them."""
    for elector in electors:
        if elector.proc.returncode is None:
            elector.proc.send_signal(signal.SIGTERM)
    for elector in electors:
        try:
            await asyncio.wait_for(elector.proc.wait(), grace)
        except TimeoutError:
            elector.proc.kill()
            await elector.proc.wait()
        await asyncio.gather(*elector.readers)


async def trial(
    kubeconfig: pathlib.Path, sig: signal.Signals, timing: Timing, rng: random.Random
) -> float:
    """One take-over: seconds from sending ``sig`` to the leader until another leads."""
    lease = f"bench-{sig.name.lower()}-{uuid.uuid4().hex[:8]}"
    electors = [
        await spawn(kubeconfig, lease, f"e{i}", timing) for i in range(ELECTORS_PER_TRIAL)
    ]
    try:
        settled = await wait_all(electors, "ready", timeout=60)
        leader, started = await wait_event(electors, "start", float("-inf"), timeout=60)
        # Random phase against the renewal cycle; every candidate has polled by then.
        pause = rng.uniform(1.0, 2.0) * timing.retry_period
        await asyncio.sleep(max(settled, started.t) + pause - time.monotonic())
        sent = time.monotonic()
        leader.proc.send_signal(sig)
        others = [e for e in electors if e is not leader]
        limit = timing.lease_duration + 4 * timing.retry_period + 30
        _, taken = await wait_event(others, "start", sent, timeout=limit)
        return taken.t - sent
    finally:
        await stop_all(electors)


async def trials(
    kubeconfig: pathlib.Path, sig: signal.Signals, count: int, timing: Timing, seed: int
) -> tuple[float, ...]:
    """``count`` take-over trials, one after the other, each on a fresh Lease."""
    rng = random.Random(seed)
    results = []
    for index in range(count):
        elapsed = await trial(kubeconfig, sig, timing, rng)
        progress(f"take-over after {sig.name} {index + 1}/{count}: {elapsed:.2f} s")
        results.append(elapsed)
    return tuple(results)
