"""Foundation benchmark (issue 2): what the local environment and leader election cost.

Everything later (agents, remedy, failover) runs on the local environment and
on Lease election, so their baseline figures are recorded here, on real
``kube-apiserver``/``etcd`` processes:

1. start-up of the control plane and two members with cached binaries, and
   the resident memory of each server process once started;
2. leader take-over with client-go's default timings after ``kill -9`` and
   after a graceful stop of the leader;
3. with ``--cold``, building the binaries from empty Go module and build caches.

Run from the repository root: ``python -m bench.foundation [--quick] [--cold]
[--markdown docs/benchmarks.md]``.  The table goes to stdout, progress to stderr.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import os
import pathlib
import shutil
import signal
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence

from bench import report, takeover
from bench.takeover import progress
from clusterhealth_localenv import binaries as bins
from clusterhealth_localenv import environment

SECTION_TITLE = "## Foundation (issue 2)"
MEMBERS = ("member1", "member2")
STARTUP_TARGET = 20.0


@dataclasses.dataclass(frozen=True)
class Options:
    """What to measure and how often."""

    startup_trials: int
    takeover_trials: int
    settle: float
    cold: bool
    markdown: pathlib.Path | None


class ColdSetupError(RuntimeError):
    """Building the binaries from empty caches failed; the message quotes the output."""


# --- figure 1: start-up and memory -------------------------------------------------


def rss_mib(pid: int) -> float:
    """Resident set size of a process in MiB (``VmRSS`` of /proc/<pid>/status)."""
    for line in pathlib.Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no VmRSS for pid {pid}")


def server_pids(env: environment.LocalEnvironment) -> dict[str, int]:
    """The pid of etcd and of every kube-apiserver, by a readable name."""
    named = {"etcd": env.etcd.pid if env.etcd is not None else None}
    named |= {f"kube-apiserver {name}": s.process.pid for name, s in env.servers.items()}
    missing = [name for name, pid in named.items() if pid is None]
    if missing:
        raise RuntimeError(f"not running after start: {', '.join(missing)}")
    return {name: pid for name, pid in named.items() if pid is not None}


async def startup_trial(settle: float) -> tuple[float, dict[str, float]]:
    """One timed ``start()``; then the RSS of each server after ``settle`` seconds."""
    env = environment.LocalEnvironment(environment.EnvironmentConfig(members=MEMBERS))
    try:
        began = time.monotonic()
        await env.start()
        elapsed = time.monotonic() - began
        await asyncio.sleep(settle)
        rss = {name: rss_mib(pid) for name, pid in server_pids(env).items()}
    finally:
        await env.stop()
    return elapsed, rss


def _startup_verdict(samples: Sequence[float]) -> str:
    if max(samples) < STARTUP_TARGET:
        return "pass"
    if statistics.median(samples) < STARTUP_TARGET:
        return "pass (median only)"
    return "FAIL"


async def measure_startup(options: Options) -> list[report.Figure]:
    """Figure 1: start-up wall time and the steady-state RSS of each server."""
    await asyncio.to_thread(bins.ensure_kubernetes)  # cached binaries are the premise
    times: list[float] = []
    memory: dict[str, list[float]] = {}
    for index in range(options.startup_trials):
        elapsed, rss = await startup_trial(options.settle)
        progress(f"start-up {index + 1}/{options.startup_trials}: {elapsed:.2f} s")
        times.append(elapsed)
        for name, mib in rss.items():
            memory.setdefault(name, []).append(mib)
    samples = tuple(times)
    figures = [report.Figure(
        f"env start-up: control plane + {len(MEMBERS)} members (cached binaries)",
        samples, "s", f"< {STARTUP_TARGET:.0f} s", _startup_verdict(samples),
    )]
    figures += [report.Figure(f"RSS {name}, {options.settle:.0f} s after start", tuple(v), "MiB")
                for name, v in memory.items()]
    return figures


# --- figure 2: leader take-over ----------------------------------------------------


SLACK = 0.5
"""Seconds of API round trips a take-over may add to its nominal window."""


def _inside(samples: Sequence[float], low: float, high: float) -> int:
    return sum(1 for s in samples if low <= s <= high)


def takeover_figures(
    kill: Sequence[float], term: Sequence[float], timing: takeover.Timing
) -> list[report.Figure]:
    """Rows for both take-overs; the target is the nominal window, the verdict a count."""
    ld, rp = timing.lease_duration, timing.retry_period
    return [
        report.Figure(
            "leader take-over after kill -9 (15 s / 10 s / 2 s)", tuple(kill), "s",
            f"{ld - rp:.0f}-{ld:.0f} s (nominal)",
            f"{_inside(kill, ld - rp, ld + SLACK)}/{len(kill)} inside",
        ),
        report.Figure(
            "leader take-over after SIGTERM (15 s / 10 s / 2 s)", tuple(term), "s",
            f"<= {rp:.0f} s (nominal)", f"{_inside(term, 0.0, rp)}/{len(term)} inside",
        ),
    ]


def takeover_notes(kill: Sequence[float], timing: takeover.Timing) -> list[str]:
    """How the take-over windows follow from the standbys' watch of the Lease."""
    ld, rp = timing.lease_duration, timing.retry_period
    return [
        f"Take-over: {takeover.ELECTORS_PER_TRIAL} elector processes per trial, a fresh Lease "
        "each, the signal sent 1-2 retry periods after all are campaigning and one leads; "
        "time from the signal to another process's `start` event (CLOCK_MONOTONIC).",
        f"Nominal bounds: kill -9 {ld - rp:.0f}-{ld:.0f} s, SIGTERM <= {rp:.0f} s, each plus "
        f"API round trips (counted as inside up to {SLACK:.1f} s late). Standbys watch the "
        "Lease, so they see every renewal as it happens; a standby takes over one lease "
        "duration after the last renewal it saw, which the leader sent at most one retry "
        "period before it was killed: LD - RP .. LD after the kill. On SIGTERM the leader "
        "releases the Lease and the watch delivers the release at once.",
    ]


async def measure_takeover(options: Options) -> tuple[list[report.Figure], list[str]]:
    """Figure 2: take-over after kill -9 and after SIGTERM, on one environment."""
    timing = takeover.Timing()
    count = options.takeover_trials
    config = environment.EnvironmentConfig(members=MEMBERS)
    async with environment.LocalEnvironment(config) as env:
        kubeconfig = env.kubeconfig()
        kill = await takeover.trials(kubeconfig, signal.SIGKILL, count, timing, seed=1)
        term = await takeover.trials(kubeconfig, signal.SIGTERM, count, timing, seed=2)
    return takeover_figures(kill, term, timing), takeover_notes(kill, timing)


# --- figure 3: cold set-up ---------------------------------------------------------


def tree_size(path: pathlib.Path) -> int:
    """Apparent size in bytes of every file below ``path`` (symlinks not followed)."""
    total = 0
    for root, _, files in os.walk(path):
        total += sum(os.lstat(os.path.join(root, f)).st_size for f in files)
    return total


def has_read_only_dirs(path: pathlib.Path) -> bool:
    """Whether any directory below ``path`` lacks the owner's write permission."""
    return any(not os.stat(root).st_mode & 0o200 for root, _, _ in os.walk(path))


def remove_tree(path: pathlib.Path) -> None:
    """Delete ``path`` even when Go left its module cache read-only."""
    for root, dirs, _ in os.walk(path):
        for name in dirs:
            full = os.path.join(root, name)
            if not os.path.islink(full):
                os.chmod(full, 0o700)
    shutil.rmtree(path, ignore_errors=True)


async def _timed_lines(stream: asyncio.StreamReader, began: float) -> list[tuple[float, str]]:
    lines = []
    while line := await stream.readline():
        lines.append((time.monotonic() - began, line.decode(errors="replace").rstrip()))
    return lines


def _phases(lines: Sequence[tuple[float, str]], total: float) -> str:
    """``what: seconds`` for each "building ..." line, up to the next one or the end."""
    marks = [(t, text.split("building ", 1)[1].split(" (")[0])
             for t, text in lines if "building " in text]
    ends = [t for t, _ in marks[1:]] + [total]
    return "; ".join(f"{what} {end - t:.0f} s" for (t, what), end in zip(marks, ends, strict=True))


async def cold_build(dirs: dict[str, pathlib.Path]) -> tuple[float, str]:
    """Run ``python -m clusterhealth_localenv.binaries`` on empty caches; time and phases."""
    env = {**takeover.child_env(), "CLUSTERHEALTH_CACHE": str(dirs["cache"]),
           "GOMODCACHE": str(dirs["gomod"]), "GOCACHE": str(dirs["gocache"]),
           "GOFLAGS": "-modcacherw"}
    began = time.monotonic()
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "clusterhealth_localenv.binaries", env=env,
        stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
    )
    assert proc.stderr is not None
    lines = await _timed_lines(proc.stderr, began)
    code = await proc.wait()
    elapsed = time.monotonic() - began
    if code != 0:
        tail = "\n".join(text for _, text in lines[-20:])
        raise ColdSetupError(f"binaries exited {code} after {elapsed:.0f} s:\n{tail}")
    return elapsed, _phases(lines, elapsed)


async def measure_cold() -> tuple[report.Figure, list[str]]:
    """Figure 3: build every binary (``python -m clusterhealth_localenv.binaries``) cold."""
    dirs = {name: pathlib.Path(tempfile.mkdtemp(prefix=f"clusterhealth-cold-{name}-"))
            for name in ("cache", "gomod", "gocache")}
    try:
        elapsed, phases = await cold_build(dirs)
        sizes = {name: tree_size(path) / 2**20 for name, path in dirs.items()}
        read_only = has_read_only_dirs(dirs["gomod"])
    finally:
        for path in dirs.values():
            await asyncio.to_thread(remove_tree, path)
    figure = report.Figure(
        "cold set-up: build kube-apiserver, etcd, helm, Karmada's two (empty Go caches)",
        (elapsed,), "s",
    )
    proxy = os.environ.get("GOPROXY", bins.GOPROXY_DEFAULT)
    notes = [
        f"Cold set-up includes downloading every module from the Go proxy ({proxy}) and "
        f"compiling with an empty build cache; phases: {phases}.",
        f"Cold set-up sizes: modules {sizes['gomod']:.0f} MiB, build cache "
        f"{sizes['gocache']:.0f} MiB, binaries {sizes['cache']:.0f} MiB"
        + ("; the module cache was left read-only despite GOFLAGS=-modcacherw." if read_only
           else "."),
    ]
    return figure, notes


# --- main --------------------------------------------------------------------------


def parse_args(argv: Sequence[str]) -> Options:
    """Options from the command line (``--quick`` means 3 trials of each)."""
    parser = argparse.ArgumentParser(prog="python -m bench.foundation", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="smoke run: 3 trials of each")
    parser.add_argument("--trials", type=int, help="take-over trials per kind (default 10)")
    parser.add_argument("--startup-trials", type=int, help="start-up trials (default 5)")
    parser.add_argument("--settle", type=float, default=10.0,
                        help="seconds after start-up before reading RSS (default 10)")
    parser.add_argument("--cold", action="store_true",
                        help="also build the binaries from empty Go caches (minutes)")
    parser.add_argument("--markdown", type=pathlib.Path,
                        help="write/update this benchmark's section of this Markdown file")
    args = parser.parse_args(argv)
    default = 3 if args.quick else None
    options = Options(
        startup_trials=args.startup_trials or default or 5,
        takeover_trials=args.trials or default or 10,
        settle=args.settle, cold=args.cold, markdown=args.markdown,
    )
    if options.startup_trials < 1 or options.takeover_trials < 1:
        parser.error("trial counts must be >= 1")
    return options


async def measure(options: Options) -> tuple[list[report.Figure], list[str], str | None]:
    """Every figure asked for, notes, and the cold set-up's failure if it failed."""
    figures = await measure_startup(options)
    more, notes = await measure_takeover(options)
    figures += more
    if not options.cold:
        return figures, notes, None
    progress("cold set-up: building from empty Go caches (several minutes)")
    try:
        cold, cold_notes = await measure_cold()
    except (ColdSetupError, OSError) as exc:
        return figures, notes, str(exc)
    return [*figures, cold], notes + cold_notes, None


def main(argv: Sequence[str] | None = None) -> int:
    """Measure, print the table, optionally update the Markdown section."""
    args = list(sys.argv[1:] if argv is None else argv)
    options = parse_args(args)
    figures, notes, failure = asyncio.run(measure(options))
    print(report.text_table(figures))
    for note in notes:
        print(f"* {note}")
    if failure is not None:
        print(f"cold set-up FAILED: {failure}", file=sys.stderr)
    if options.markdown is not None:
        command = report.command_line("bench.foundation", args)
        body = report.section(SECTION_TITLE, figures, notes, command)
        report.write_section(options.markdown, SECTION_TITLE, body)
    return 1 if failure is not None else 0


if __name__ == "__main__":
    raise SystemExit(main())
