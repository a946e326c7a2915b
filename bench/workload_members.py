"""Members that run workloads (issue 9 §1): what they cost to start and to keep.

``EnvironmentConfig(workloads=...)`` gives every member a
kube-controller-manager, a kube-scheduler and kwok's simulated Nodes
(:mod:`clusterhealth_localenv.workloads`).  Measured with cached binaries,
trials of bare members (the baseline) and workload members interleaved:

1. start-up time of the environment (control plane + two members; with
   workloads, ``start()`` returns once every Node is Ready and the three
   processes answer their health checks);
2. resident memory of one workload member's processes some seconds after
   start-up;
3. in every workload environment: the time from creating a 3-replica
   Deployment in a member until it reports 3 available replicas (the
   member's own controllers, scheduler and kwok at work).

Run from the repository root: ``python -m bench.workload_members [--trials N]
[--deployments N] [--markdown docs/benchmarks.md]``.
"""

from __future__ import annotations

import argparse
import asyncio
import pathlib
import statistics
import sys
import time
from collections.abc import Sequence
from typing import Any

from bench import foundation, report
from bench.takeover import progress
from clusterhealth_core.kube import resources
from clusterhealth_localenv import binaries as bins
from clusterhealth_localenv import environment, workloads

SECTION_TITLE = "## Members that run workloads (issue 9)"
MEMBERS = ("member1", "member2")
NAMESPACE = "default"


def deployment(name: str, replicas: int) -> dict[str, Any]:
    """A Deployment of ``replicas`` Pods with small requests."""
    labels = {"app": name}
    return {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": name, "namespace": NAMESPACE},
            "spec": {"replicas": replicas, "selector": {"matchLabels": labels},
                     "template": {"metadata": {"labels": labels}, "spec": {"containers": [
                         {"name": "web", "image": "nginx:1.27", "resources": {
                             "requests": {"cpu": "100m", "memory": "64Mi"}}}]}}}}


async def time_to_available(env: environment.LocalEnvironment, member: str, name: str,
                            replicas: int) -> float:
    """Create a Deployment in ``member``; seconds until it reports every replica available."""
    async with env.client(member) as api:
        began = time.monotonic()
        await api.create(resources.DEPLOYMENTS, deployment(name, replicas), namespace=NAMESPACE)
        async with asyncio.timeout(120):
            while True:
                status = (await api.get(resources.DEPLOYMENTS, name,
                                        namespace=NAMESPACE)).get("status") or {}
                if status.get("availableReplicas") == replicas:
                    return time.monotonic() - began
                await asyncio.sleep(0.05)


def member_pids(env: environment.LocalEnvironment, member: str) -> dict[str, int]:
    """The pids of one workload member's processes, by name."""
    named = {"kube-apiserver": env.servers[member].process.pid}
    for child in env.workloads[member].children:
        named[child.name.split("[")[0]] = child.pid
    missing = [name for name, pid in named.items() if pid is None]
    if missing:
        raise RuntimeError(f"{member}: not running after start: {', '.join(missing)}")
    return {name: pid for name, pid in named.items() if pid is not None}


async def trial(with_workloads: bool, settle: float, deployments: int
                ) -> tuple[float, dict[str, float], list[float]]:
    """One timed ``start()``; with workloads, RSS after ``settle`` s and Deployment times."""
    config = environment.EnvironmentConfig(
        members=MEMBERS, workloads=workloads.WorkloadSettings() if with_workloads else None)
    env = environment.LocalEnvironment(config)
    rss: dict[str, float] = {}
    ready: list[float] = []
    try:
        began = time.monotonic()
        await env.start()
        elapsed = time.monotonic() - began
        if with_workloads:
            await asyncio.sleep(settle)
            rss = {name: foundation.rss_mib(pid)
                   for name, pid in member_pids(env, MEMBERS[0]).items()}
            for index in range(deployments):
                ready.append(await time_to_available(env, MEMBERS[index % 2], f"d{index}", 3))
    finally:
        await env.stop()
    return elapsed, rss, ready


async def measure(trials: int, settle: float, deployments: int) -> list[report.Figure]:
    """Interleaved trials: bare and workload members."""
    await asyncio.to_thread(bins.ensure_kubernetes)
    await asyncio.to_thread(bins.ensure_workload_parts)
    times: dict[bool, list[float]] = {False: [], True: []}
    memory: dict[str, list[float]] = {}
    available: list[float] = []
    for index in range(trials):
        for with_workloads in (False, True):
            elapsed, rss, ready = await trial(with_workloads, settle, deployments)
            progress(f"{'workload' if with_workloads else 'bare'} {index + 1}/{trials}: "
                     f"start-up {elapsed:.2f} s "
                     + ", ".join(f"{name} {mib:.0f} MiB" for name, mib in rss.items()))
            times[with_workloads].append(elapsed)
            for name, mib in rss.items():
                memory.setdefault(name, []).append(mib)
            available += ready
    n = len(MEMBERS)
    figures = [
        report.Figure(f"env start-up, control plane + {n} bare members (cached binaries)",
                      tuple(times[False]), "s"),
        report.Figure(f"env start-up, control plane + {n} members that run workloads "
                      f"(cached binaries)", tuple(times[True]), "s"),
        report.Figure("start-up, workload / bare (medians)",
                      (statistics.median(times[True]) / statistics.median(times[False]),), "x"),
    ]
    figures += [report.Figure(f"RSS {name} of one workload member, {settle:.0f} s after start",
                              tuple(samples), "MiB") for name, samples in memory.items()]
    figures.append(report.Figure(
        "RSS of one workload member, all its processes (medians summed)",
        (sum(statistics.median(s) for s in memory.values()),), "MiB"))
    if available:
        figures.append(report.Figure(
            "Deployment of 3 replicas created in a member -> 3 available", tuple(available), "s"))
    return figures


def main(argv: Sequence[str] | None = None) -> int:
    """Measure, print the table, optionally update the Markdown section."""
    args = list(sys.argv[1:] if argv is None else argv)
    parser = argparse.ArgumentParser(prog="python -m bench.workload_members",
                                     description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trials", type=int, default=5, help="trials of each kind (default 5)")
    parser.add_argument("--settle", type=float, default=10.0,
                        help="seconds after start-up before reading RSS (default 10)")
    parser.add_argument("--deployments", type=int, default=10,
                        help="Deployments timed per workload trial (default 10)")
    parser.add_argument("--markdown", type=pathlib.Path)
    options = parser.parse_args(args)
    if options.trials < 1 or options.deployments < 0:
        parser.error("--trials must be >= 1 and --deployments >= 0")
    figures = asyncio.run(measure(options.trials, options.settle, options.deployments))
    print(report.text_table(figures))
    settings = workloads.WorkloadSettings()
    notes = [
        f"Kubernetes {bins.KUBERNETES_VERSION} (kube-apiserver, kube-controller-manager, "
        f"kube-scheduler built from the Go module proxy), kwok {settings.kwok_version}; "
        f"{settings.nodes} simulated Nodes per member ({settings.node_cpu} CPU, "
        f"{settings.node_memory}, {settings.node_pods} Pods each); trials of bare and "
        "workload members alternate.",
        "A workload member's start-up ends when the controller manager and the scheduler "
        "answer /healthz, kwok answers /healthz and every Node is Ready.",
    ]
    if options.markdown is not None:
        command = report.command_line("bench.workload_members", args)
        report.write_section(options.markdown, SECTION_TITLE,
                             report.section(SECTION_TITLE, figures, notes, command))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
