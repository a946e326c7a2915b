"""Leader-election benchmark (issue 8): what a standby costs the API server, and take-over.

On a 1,000-node cluster every agent pod is a candidate for the agents' Lease,
so what a standby asks of the API server is multiplied by the fleet.  Measured
on a real ``kube-apiserver`` whose audit log is the witness (one line per
request; every elector process runs as its own ServiceAccount, so each request
names the process that sent it):

1. API requests per minute per standby in steady state, with client-go's
   default timings (15 s / 10 s / 2 s): standbys that watch the Lease (this
   elector), and for comparison standbys whose RBAC does not allow ``watch``,
   which fall back to reading the Lease every retry period as client-go's
   elector always does (nominally 60 s / 2 s = 30 per minute); also the
   leader's own requests per minute (a GET and a PUT per renewal);
2. take-over after ``kill -9`` and after SIGTERM of the leader
   (``bench.takeover``: three elector processes per trial).

Run from the repository root: ``python -m bench.election [--quick] [--window S]
[--standbys N] [--trials N] [--markdown docs/benchmarks.md]``.  The table goes
to stdout, progress to stderr.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import datetime
import pathlib
import signal
import sys
import tempfile
import uuid
from collections.abc import Sequence
from typing import Any

from bench import report, takeover
from bench.takeover import progress
from clusterhealth_localenv import elector as elector_proc
from clusterhealth_localenv import environment

SECTION_TITLE = "## Leader election (issue 8)"
NAMESPACE = "default"
CLIENT_GO_PER_MINUTE = 60.0 / takeover.Timing().retry_period


@dataclasses.dataclass(frozen=True)
class Options:
    """What to measure and how long."""

    window: float
    standbys: int
    pollers: int
    trials: int
    markdown: pathlib.Path | None


@dataclasses.dataclass(frozen=True)
class Cost:
    """Requests per minute of each process over the window, by role."""

    watching: tuple[float, ...]
    polling: tuple[float, ...]
    leader: float
    window: float
    verbs: dict[str, dict[str, int]]


def requests_per_user(events: Sequence[dict[str, Any]], start: datetime.datetime,
                      end: datetime.datetime) -> tuple[dict[str, int], dict[str, dict[str, int]]]:
    """Requests (distinct audit IDs) each user sent in [start, end), in total and by verb."""
    seen: dict[str, tuple[str, str]] = {}
    for event in events:
        received = environment.audit_time(event)
        if start <= received < end:
            seen[event["auditID"]] = (str(event["user"]["username"]), str(event["verb"]))
    totals: dict[str, int] = {}
    verbs: dict[str, dict[str, int]] = {}
    for user, verb in seen.values():
        totals[user] = totals.get(user, 0) + 1
        by_verb = verbs.setdefault(user, {})
        by_verb[verb] = by_verb.get(verb, 0) + 1
    return totals, verbs


async def measure_cost(env: environment.LocalEnvironment, options: Options,
                       timing: takeover.Timing, directory: pathlib.Path) -> Cost:
    """Figure 1: one leader, watching and polling standbys; count their requests."""
    lease = f"bench-cost-{uuid.uuid4().hex[:6]}"
    watchers = [f"watch-{i}" for i in range(options.standbys)]
    pollers = [f"poll-{i}" for i in range(options.pollers)]
    url = env.servers[environment.CONTROL_PLANE].url
    async with env.client() as api:
        kubeconfigs = await elector_proc.grant_identities(
            api, url, env.workdir / "ca.crt", NAMESPACE, lease, "unused",
            ["leader", *watchers], directory)
        if pollers:
            kubeconfigs |= await elector_proc.grant_identities(
                api, url, env.workdir / "ca.crt", NAMESPACE, lease, "unused", pollers,
                directory, watch=False)
    leader = await takeover.spawn(kubeconfigs["leader"], lease, "leader", timing)
    electors = [leader]
    try:
        await takeover.wait_event([leader], "start", float("-inf"), timeout=60)
        for name in [*watchers, *pollers]:
            electors.append(await takeover.spawn(kubeconfigs[name], lease, name, timing))
        await takeover.wait_all(electors, "ready", timeout=60)
        settle = timing.lease_duration
        progress(f"cost: {len(watchers)} watching + {len(pollers)} polling standbys; "
                 f"settling {settle:.0f} s, then counting for {options.window:.0f} s")
        await asyncio.sleep(settle)
        start = datetime.datetime.now(datetime.UTC)
        await asyncio.sleep(options.window)
        end = datetime.datetime.now(datetime.UTC)
        if any(e.first("start", float("-inf")) for e in electors[1:]):
            raise takeover.TrialError("a standby took over during the cost window")
    finally:
        await takeover.stop_all(electors)
    totals, verbs = requests_per_user(env.audit_events(), start, end)
    minutes = (end - start).total_seconds() / 60

    def rate(name: str) -> float:
        return totals.get(elector_proc.username(NAMESPACE, name), 0) / minutes

    return Cost(
        watching=tuple(rate(n) for n in watchers), polling=tuple(rate(n) for n in pollers),
        leader=rate("leader"), window=(end - start).total_seconds(),
        verbs={n: verbs.get(elector_proc.username(NAMESPACE, n), {})
               for n in ["leader", *watchers, *pollers]},
    )


def cost_figures(cost: Cost) -> list[report.Figure]:
    """Rows: requests per minute per standby (watching, polling) and of the leader."""
    figures = [report.Figure(
        "standby Lease requests per minute, watching (15 s / 10 s / 2 s)", cost.watching,
        "/min", f"< {CLIENT_GO_PER_MINUTE:.0f} (client-go: {CLIENT_GO_PER_MINUTE:.0f})",
        "pass" if max(cost.watching) < CLIENT_GO_PER_MINUTE else "FAIL",
    )]
    if cost.polling:
        figures.append(report.Figure(
            "standby Lease requests per minute, watch forbidden (polls)", cost.polling,
            "/min", f"~{CLIENT_GO_PER_MINUTE:.0f} (client-go)",
        ))
    figures.append(report.Figure(
        "leader Lease requests per minute (GET + PUT per renewal)", (cost.leader,), "/min",
    ))
    return figures


def cost_notes(cost: Cost, options: Options) -> list[str]:
    """How the request counts were taken and what each process sent."""
    detail = "; ".join(
        f"{name}: " + (", ".join(f"{verb} {count}" for verb, count in sorted(verbs.items()))
                       or "nothing")
        for name, verbs in cost.verbs.items())
    return [
        f"Standby cost: one leader, {options.standbys} watching and {options.pollers} "
        f"polling standbys on one Lease; after settling one lease duration, every request "
        f"each process sent during {cost.window:.0f} s is counted in the API server's "
        "audit log (distinct audit IDs, each process its own ServiceAccount).",
        f"Requests in the window by verb: {detail}.",
        "A watching standby's only steady-state request is re-opening its watch, which the "
        "server ends after 5-10 minutes (about 0.1-0.2 per minute in the long run): a window "
        "shorter than that mostly counts none.  Polling standbys read every 0.8-1.0 retry "
        "periods (about 33 per minute) and retry the forbidden watch with a backoff up to "
        "5 minutes.",
    ]


def takeover_figures(kill: Sequence[float], term: Sequence[float],
                     timing: takeover.Timing) -> list[report.Figure]:
    """Take-over rows; the target is client-go's bound, the verdict a count."""
    ld, rp = timing.lease_duration, timing.retry_period

    def inside(samples: Sequence[float], high: float) -> str:
        return f"{sum(1 for s in samples if s <= high)}/{len(samples)} inside"

    return [
        report.Figure("leader take-over after kill -9 (15 s / 10 s / 2 s)", tuple(kill), "s",
                      f"<= {ld + rp:.0f} s", inside(kill, ld + rp)),
        report.Figure("leader take-over after SIGTERM (15 s / 10 s / 2 s)", tuple(term), "s",
                      f"<= {rp:.0f} s", inside(term, rp)),
    ]


def takeover_notes(timing: takeover.Timing) -> list[str]:
    """How the take-over is measured and its nominal window with a watching standby."""
    ld, rp = timing.lease_duration, timing.retry_period
    return [
        f"Take-over: {takeover.ELECTORS_PER_TRIAL} elector processes per trial "
        "(bench.takeover), time from the signal to another process's `start` event "
        "(CLOCK_MONOTONIC).  A watching standby sees every renewal as it happens, so after "
        f"kill -9 it takes over {ld - rp:.0f}-{ld:.0f} s after the kill (lease duration "
        "after the last renewal) plus the round trips of one attempt; after SIGTERM it sees "
        "the release on its watch and takes over at once.",
    ]


async def measure(options: Options) -> tuple[list[report.Figure], list[str]]:
    """Every figure, on one audited environment."""
    timing = takeover.Timing()
    config = environment.EnvironmentConfig(members=(), audit=True)
    with tempfile.TemporaryDirectory(prefix="clusterhealth-bench-election-") as tmp:
        async with environment.LocalEnvironment(config) as env:
            cost = await measure_cost(env, options, timing, pathlib.Path(tmp))
            kubeconfig = env.kubeconfig()
            kill = await takeover.trials(kubeconfig, signal.SIGKILL, options.trials, timing,
                                         seed=1)
            term = await takeover.trials(kubeconfig, signal.SIGTERM, options.trials, timing,
                                         seed=2)
    figures = cost_figures(cost) + takeover_figures(kill, term, timing)
    return figures, cost_notes(cost, options) + takeover_notes(timing)


def parse_args(argv: Sequence[str]) -> Options:
    """Options from the command line (``--quick``: a 60 s window, 2 take-over trials)."""
    parser = argparse.ArgumentParser(prog="python -m bench.election", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true",
                        help="smoke run: a 60 s window and 2 take-over trials of each kind")
    parser.add_argument("--window", type=float,
                        help="seconds of steady state to count requests in (default 300)")
    parser.add_argument("--standbys", type=int, default=3,
                        help="watching standbys (default 3)")
    parser.add_argument("--pollers", type=int, default=1,
                        help="standbys not allowed to watch, for comparison (default 1)")
    parser.add_argument("--trials", type=int, help="take-over trials per kind (default 5)")
    parser.add_argument("--markdown", type=pathlib.Path,
                        help="write/update this benchmark's section of this Markdown file")
    args = parser.parse_args(argv)
    options = Options(
        window=args.window or (60.0 if args.quick else 300.0),
        standbys=args.standbys, pollers=args.pollers,
        trials=args.trials or (2 if args.quick else 5), markdown=args.markdown,
    )
    if options.window <= 0 or options.standbys < 1 or options.pollers < 0 \
            or options.trials < 1:
        parser.error("window, standbys and trials must be positive")
    return options


def main(argv: Sequence[str] | None = None) -> int:
    """Measure, print the table, optionally update the Markdown section."""
    args = list(sys.argv[1:] if argv is None else argv)
    options = parse_args(args)
    figures, notes = asyncio.run(measure(options))
    print(report.text_table(figures))
    for note in notes:
        print(f"* {note}")
    if options.markdown is not None:
        command = report.command_line("bench.election", args)
        body = report.section(SECTION_TITLE, figures, notes, command)
        report.write_section(options.markdown, SECTION_TITLE, body)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
