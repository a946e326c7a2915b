"""Scheduler benchmarks (issue 9): throughput against the real API server, beside Karmada's.

* Throughput: ``--clusters`` Clusters (Cluster objects only, ``apiEndpoint``
  https://127.0.0.1:1, with the status both schedulers read: served APIs, ``Ready`` and
  ``CompleteAPIEnablements`` True, a resource summary) and ``--bindings`` unscheduled
  ResourceBindings exist; a scheduler is started and the time until every binding is
  ``Scheduled=True`` with ``schedulerObservedGeneration`` equal to its generation (as
  a watch shows) is measured: bindings per second, wall time, and the scheduler's peak
  RSS. Each binding is a Deployment of 6 replicas, Divided by static weights 1:2 over
  two label-selected groups (``group=a`` / ``group=b``) within one shard of 4 Clusters
  (``shard=i % (clusters/4)``), so every binding needs label selectors, static weights
  and the Webster division.
* Side by side: Karmada's own scheduler v1.18.2 (``cmd/scheduler``, unmodified, built
  from the Go module proxy: ``binaries.ensure_karmada_scheduler``), with its
  estimator off, on the same API server, Clusters and bindings; the implementations
  alternate and every binding is reset (``spec.clusters``, the applied-placement
  annotation and the status cleared) before each run.
* The pure algorithm's rate: ``algorithm.schedule()`` calls per second over the same
  Clusters as views, in this process.

Run: ``python -m bench.scheduler [--clusters 100] [--bindings 10000] [--rounds 1]
[--karmada-scheduler BINARY] [--karmada-shipped] [--markdown PATH]``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import functools
import os
import pathlib
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from bench import remedy, report, runtime, takeover
from clusterhealth_controlplane.scheduler import adapt, algorithm, plugins
from clusterhealth_core.api import policy, work
from clusterhealth_core.kube import client as kube
from clusterhealth_core.kube import errors, resources
from clusterhealth_localenv import binaries, environment

SECTION_TITLE = "## Scheduler (issue 9)"
NAMESPACE = "bench-scheduler"
SHARD = 4
"""Clusters per shard: 2 in group a (weight 1), 2 in group b (weight 2)."""
REPLICAS = 6
TARGET_RATE = 200.0
"""Bindings per second the issue asks of our scheduler."""
CONCURRENCY = 32
"""Concurrent requests while creating and resetting bindings."""
RUN_TIMEOUT = 1800.0
APIS = [{"groupVersion": "apps/v1", "resources": [{"name": "deployments", "kind": "Deployment"}]}]
NOW = "2024-01-01T00:00:00Z"
CLAIM_LABEL = "propagationpolicy.karmada.io/permanent-id"
"""The detector's claim label: Karmada's scheduler only schedules bindings that carry it
(or the ClusterPropagationPolicy one, or ``binding.karmada.io/managed-by``)."""
POLICY_ID = "7b0d5a4e-0000-4000-8000-000000000001"


# --- the workload ------------------------------------------------------------------------

def cluster_name(index: int) -> str:
    return f"bench-c{index:04d}"


def cluster_object(index: int) -> dict[str, Any]:
    """A Cluster in shard ``index // 4``, group a or b."""
    return {"apiVersion": resources.CLUSTERS.api_version, "kind": "Cluster",
            "metadata": {"name": cluster_name(index),
                         "labels": {"shard": str(index // SHARD),
                                    "group": "a" if index % SHARD < SHARD // 2 else "b"}},
            "spec": {"apiEndpoint": "https://127.0.0.1:1", "syncMode": "Push"}}


def cluster_status() -> dict[str, Any]:
    """What both schedulers read: served APIs, readiness, capacity."""
    conditions = [{"type": kind, "status": "True", "reason": reason, "message": "",
                   "lastTransitionTime": NOW}
                  for kind, reason in (("Ready", "ClusterReady"),
                                       ("CompleteAPIEnablements", "Complete"))]
    return {"apiEnablements": APIS, "conditions": conditions,
            "resourceSummary": {"allocatable": {"pods": 1000, "cpu": "256", "memory": "1Ti"}}}


def placement(shard: int) -> dict[str, Any]:
    """Divided 1:2 over the shard's group a and group b."""
    def group(name: str) -> dict[str, Any]:
        return {"labelSelector": {"matchLabels": {"shard": str(shard), "group": name}}}
    return {"clusterAffinity": {"labelSelector": {"matchLabels": {"shard": str(shard)}}},
            "replicaScheduling": {
                "replicaSchedulingType": "Divided", "replicaDivisionPreference": "Weighted",
                "weightPreference": {"staticWeightList": [
                    {"targetCluster": group("a"), "weight": 1},
                    {"targetCluster": group("b"), "weight": 2}]}}}


def binding_name(index: int) -> str:
    return f"web-{index:05d}-deployment"


def binding_object(index: int, shards: int) -> dict[str, Any]:
    name = f"web-{index:05d}"
    return {"apiVersion": resources.RESOURCE_BINDINGS.api_version, "kind": "ResourceBinding",
            "metadata": {"name": binding_name(index), "namespace": NAMESPACE,
                         "labels": {CLAIM_LABEL: POLICY_ID}},
            "spec": {"resource": {"apiVersion": "apps/v1", "kind": "Deployment",
                                  "namespace": NAMESPACE, "name": name,
                                  "uid": f"00000000-0000-0000-0000-{index:012d}"},
                     "replicas": REPLICAS,
                     "replicaRequirements": {"resourceRequest": {"cpu": "100m"}},
                     "placement": placement(index % shards)}}


async def _bounded(calls: Sequence[Callable[[], Awaitable[Any]]]) -> None:
    semaphore = asyncio.Semaphore(CONCURRENCY)

    async def one(call: Callable[[], Awaitable[Any]]) -> None:
        async with semaphore:
            await call()
    await asyncio.gather(*(one(c) for c in calls))


async def create_workload(api: kube.ApiClient, clusters: int, bindings: int) -> None:
    """The Clusters (with status) and the unscheduled bindings."""
    with contextlib.suppress(errors.Conflict):
        await api.create(resources.NAMESPACES, {"metadata": {"name": NAMESPACE}})
    status = cluster_status()

    async def make_cluster(index: int) -> None:
        await api.create(resources.CLUSTERS, cluster_object(index))
        await api.apply(resources.CLUSTERS, {"metadata": {"name": cluster_name(index)},
                                             "status": status},
                        field_manager="bench-cluster-status", subresource="status")
    await _bounded([functools.partial(make_cluster, i) for i in range(clusters)])
    shards = max(1, clusters // SHARD)
    await _bounded([functools.partial(api.create, resources.RESOURCE_BINDINGS,
                                      binding_object(i, shards))
                    for i in range(bindings)])


async def reset(api: kube.ApiClient, bindings: int) -> None:
    """Every binding unscheduled again: no targets, no applied placement, no status."""
    async def one(index: int) -> None:
        name = binding_name(index)
        await api.patch(resources.RESOURCE_BINDINGS, name,
                        {"metadata": {"annotations": {adapt.APPLIED_PLACEMENT: None}},
                         "spec": {"clusters": None}},
                        namespace=NAMESPACE, patch_type="merge")
        await api.patch(resources.RESOURCE_BINDINGS, name,
                        {"status": {"conditions": None, "schedulerObservedGeneration": None,
                                    "lastScheduledTime": None}},
                        namespace=NAMESPACE, patch_type="merge", subresource="status")
    await _bounded([functools.partial(one, i) for i in range(bindings)])


# --- one run -----------------------------------------------------------------------------

def done(obj: dict[str, Any]) -> bool:
    """Scheduled=True, and the status is about the current generation."""
    st = obj.get("status") or {}
    if st.get("schedulerObservedGeneration") != (obj.get("metadata") or {}).get("generation"):
        return False
    return any(c.get("type") == "Scheduled" and c.get("status") == "True"
               for c in st.get("conditions") or [])


@dataclasses.dataclass(frozen=True)
class Run:
    """One scheduler run: time to all scheduled, to the first, and peak RSS."""

    seconds: float
    first: float
    rss_peak: float
    cpu: float
    """The scheduler's CPU seconds (user + system) over the run."""


@dataclasses.dataclass(frozen=True)
class Implementation:
    """A scheduler this benchmark can start."""

    name: str
    label: str
    argv: Callable[[environment.LocalEnvironment], list[str]]


def ours(workers: int) -> Implementation:
    def argv(env: environment.LocalEnvironment) -> list[str]:
        return [runtime.python(), "-m", "clusterhealth_controlplane.scheduler",
                "--kubeconfig", str(env.kubeconfig()), "--bind-address", "127.0.0.1",
                "--healthz-port", str(environment.free_port("127.0.0.1")),
                "--workers", str(workers), "--leader-elect", "false"]
    return Implementation("ours", f"ours ({workers} workers)", argv)


def bare(workers: int) -> Implementation:
    """The scheduler's two writes per binding with no scheduler (``bench.bare_schedule``)."""
    def argv(env: environment.LocalEnvironment) -> list[str]:
        return [runtime.python(), "-m", "bench.bare_schedule", "--kubeconfig",
                str(env.kubeconfig()), "--namespace", NAMESPACE, "--workers", str(workers)]
    return Implementation("bare", f"bare writes, no scheduler ({workers} workers; the floor)",
                          argv)


def karmada(binary: pathlib.Path, *, shipped: bool) -> Implementation:
    def argv(env: environment.LocalEnvironment) -> list[str]:
        limits = [] if shipped else ["--kube-api-qps", "10000", "--kube-api-burst", "10000"]
        return [str(binary), "--kubeconfig", str(env.kubeconfig()), "--leader-elect=false",
                "--enable-scheduler-estimator=false", "--metrics-bind-address=0",
                f"--health-probe-bind-address=127.0.0.1:{environment.free_port('127.0.0.1')}",
                *limits]
    if shipped:
        return Implementation("karmada-shipped", "Karmada as shipped (qps 40, burst 60)", argv)
    return Implementation("karmada", "Karmada, unthrottled (qps 10000)", argv)


def start(impl: Implementation, env: environment.LocalEnvironment,
          log: pathlib.Path) -> subprocess.Popen[bytes]:
    """Start one scheduler process, its output appended to ``log``."""
    child = takeover.child_env()
    # the repository root too: the bare writer lives in bench/
    child["PYTHONPATH"] = os.pathsep.join([str(takeover.REPO), child["PYTHONPATH"]])
    with log.open("ab") as out:
        return subprocess.Popen(impl.argv(env), stdout=out, stderr=subprocess.STDOUT,
                                env=child)


async def run_once(env: environment.LocalEnvironment, api: kube.ApiClient,
                   impl: Implementation, bindings: int, log: pathlib.Path) -> Run:
    """Start ``impl``; wait until every binding is done (by a watch); stop it."""
    first = await api.list(resources.RESOURCE_BINDINGS, namespace=NAMESPACE)
    finished = {o["metadata"]["name"] for o in first["items"] if done(o)}
    if finished:
        raise RuntimeError(f"{len(finished)} binding(s) already scheduled before the run")
    version = first["metadata"]["resourceVersion"]
    all_done = asyncio.Event()
    first_done: list[float] = []

    async def follow() -> None:
        nonlocal version
        while True:
            async for event in api.watch(resources.RESOURCE_BINDINGS, namespace=NAMESPACE,
                                         resource_version=version):
                if event.type == "BOOKMARK":
                    continue
                version = event.object["metadata"]["resourceVersion"]
                if event.type != "DELETED" and done(event.object):
                    if not first_done:
                        first_done.append(time.monotonic())
                    finished.add(event.object["metadata"]["name"])
                    if len(finished) >= bindings:
                        all_done.set()
                        return

    samples: list[float] = []
    watcher = asyncio.create_task(follow())
    await asyncio.sleep(0.2)  # the watch is open before the scheduler starts
    started = time.monotonic()
    proc = start(impl, env, log)
    sampler = asyncio.create_task(_sample_rss(proc.pid, samples))
    try:
        async with asyncio.timeout(RUN_TIMEOUT):
            await all_done.wait()
        elapsed = time.monotonic() - started
        peak = max(remedy.proc_mib(proc.pid, "VmHWM"), *samples, 0.0)
        cpu = cpu_seconds(proc.pid)
    finally:
        sampler.cancel()
        watcher.cancel()
        await asyncio.gather(sampler, watcher, return_exceptions=True)
        remedy.stop(proc)
    return Run(elapsed, first_done[0] - started if first_done else elapsed, peak, cpu)


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of a running process (``/proc/PID/stat``)."""
    fields = pathlib.Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def _sample_rss(pid: int, samples: list[float]) -> None:
    while True:
        samples.append(remedy.proc_mib(pid, "VmRSS"))
        await asyncio.sleep(remedy.RSS_PERIOD)


# --- the pure algorithm ------------------------------------------------------------------

def algorithm_rate(clusters: int, calls: int) -> float:
    """``schedule()`` calls per second over ``clusters`` views, this workload's placement."""
    status = cluster_status()
    entries = [adapt.cluster_entry({**cluster_object(i), "status": status})
               for i in range(clusters)]
    shards = max(1, clusters // SHARD)
    registry = plugins.default_registry()
    prepared = []
    for index in range(min(calls, 64)):
        obj = binding_object(index, shards)
        spec = work.ResourceBindingSpec.from_dict(obj["spec"])
        view = adapt.placement_view(policy.Placement.from_dict(obj["spec"]["placement"]))
        request = adapt.resource_request(spec)
        prepared.append((view, adapt.binding_view(spec),
                         [e.for_request(request) for e in entries]))
    started = time.perf_counter()
    for index in range(calls):
        view, binding, cluster_views = prepared[index % len(prepared)]
        result = algorithm.schedule(view, binding, cluster_views, registry)
        if not isinstance(result, algorithm.Scheduled):
            raise RuntimeError(f"the benchmark binding is unschedulable: {result.message}")
    return calls / (time.perf_counter() - started)


# --- figures -----------------------------------------------------------------------------

def figures_for(impls: Sequence[Implementation], runs: dict[str, list[Run]], bindings: int,
                rates: Sequence[float], clusters: int) -> list[report.Figure]:
    figures = [report.Figure(f"pure algorithm: schedule() calls/s over {clusters} Clusters",
                             tuple(rates), "calls/s")]
    for impl in impls:
        done_runs = runs[impl.name]
        if not done_runs:
            continue
        rate = tuple(bindings / r.seconds for r in done_runs)
        mine = impl.name == "ours"
        figures += [
            report.Figure(f"{impl.label}: bindings scheduled per second "
                          f"({bindings:,} bindings, {clusters} Clusters)", rate, "bindings/s",
                          f">= {TARGET_RATE:.0f}" if mine else "-",
                          ("pass" if statistics.median(rate) >= TARGET_RATE else "FAIL")
                          if mine else "recorded"),
            report.Figure(f"{impl.label}: start to all Scheduled",
                          tuple(r.seconds for r in done_runs), "s"),
            report.Figure(f"{impl.label}: start to the first Scheduled",
                          tuple(r.first for r in done_runs), "s"),
            report.Figure(f"{impl.label}: CPU (user + system) until all Scheduled",
                          tuple(r.cpu for r in done_runs), "s"),
            report.Figure(f"{impl.label}: peak RSS", tuple(r.rss_peak for r in done_runs),
                          "MiB"),
        ]
    if runs.get("ours"):
        for other in ("bare", "karmada", "karmada-shipped"):
            if runs.get(other):
                ratio = (statistics.median(r.seconds for r in runs["ours"])
                         / statistics.median(r.seconds for r in runs[other]))
                who = next(i.label for i in impls if i.name == other)
                strict = other == "karmada"  # the floor and the shipped one: recorded
                figures.append(report.Figure(
                    f"wall time ours / {who} (medians)", (ratio,), "x",
                    "< 1" if strict else "-",
                    ("pass" if ratio < 1 else "FAIL") if strict else "recorded"))
    return figures


async def measure(options: argparse.Namespace, karmada_binary: pathlib.Path | None
                  ) -> list[report.Figure]:
    impls: list[Implementation] = [ours(options.workers)]
    if options.floor:
        impls.append(bare(options.workers))
    if karmada_binary is not None:
        impls.append(karmada(karmada_binary, shipped=False))
        if options.karmada_shipped:
            impls.append(karmada(karmada_binary, shipped=True))
    takeover.progress(f"pure algorithm: {options.algorithm_calls} calls x 3")
    rates = [algorithm_rate(options.clusters, options.algorithm_calls) for _ in range(3)]
    runs: dict[str, list[Run]] = {impl.name: [] for impl in impls}
    with tempfile.TemporaryDirectory(prefix="clusterhealth-bench-sched-") as tmp:
        takeover.progress(f"scheduler logs in {tmp}")
        config = environment.EnvironmentConfig(members=())
        async with environment.LocalEnvironment(config) as env, \
                env.client(max_connections=CONCURRENCY + 4) as api:
            takeover.progress(f"creating {options.clusters} Clusters and "
                              f"{options.bindings:,} bindings")
            await create_workload(api, options.clusters, options.bindings)
            dirty = False
            for index in range(options.rounds):
                order = impls if index % 2 == 0 else list(reversed(impls))
                for impl in order:
                    if dirty:
                        takeover.progress("resetting every binding")
                        await reset(api, options.bindings)
                    takeover.progress(f"{impl.label}, round {index + 1}/{options.rounds}")
                    log = pathlib.Path(tmp) / f"{impl.name}-{index}.log"
                    run = await run_once(env, api, impl, options.bindings, log)
                    dirty = True
                    takeover.progress(
                        f"{impl.label}: {run.seconds:.1f} s "
                        f"({options.bindings / run.seconds:.0f} bindings/s), first "
                        f"{run.first:.2f} s, CPU {run.cpu:.1f} s, peak {run.rss_peak:.0f} MiB")
                    runs[impl.name].append(run)
    return figures_for(impls, runs, options.bindings, rates, options.clusters)


def karmada_scheduler(options: argparse.Namespace) -> pathlib.Path | None:
    """Karmada's scheduler to compare with: given, or built from the Go module proxy."""
    if options.karmada_scheduler is not None:
        if not options.karmada_scheduler.exists():
            raise SystemExit(f"--karmada-scheduler {options.karmada_scheduler}: no such file")
        return pathlib.Path(options.karmada_scheduler)
    takeover.progress("building Karmada's scheduler (cmd/scheduler) from the module proxy "
                      "(cached)")
    return binaries.ensure_karmada_scheduler()


def main(argv: Sequence[str] | None = None) -> int:
    """Measure, print the table, optionally update docs/benchmarks.md."""
    args = list(sys.argv[1:] if argv is None else argv)
    parser = argparse.ArgumentParser(prog="python -m bench.scheduler")
    parser.add_argument("--clusters", type=int, default=100)
    parser.add_argument("--bindings", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=1,
                        help="runs of each scheduler, alternating (default 1)")
    parser.add_argument("--workers", type=int, default=8, help="our scheduler's --workers")
    parser.add_argument("--algorithm-calls", type=int, default=2000,
                        help="schedule() calls per trial of the pure algorithm's rate")
    parser.add_argument("--karmada-scheduler", type=pathlib.Path, default=None,
                        help="Karmada's scheduler binary; default: built from the module proxy")
    parser.add_argument("--no-karmada", dest="karmada", action="store_false",
                        help="measure our scheduler alone")
    parser.add_argument("--no-floor", dest="floor", action="store_false",
                        help="leave out the bare writes (bench.bare_schedule: the scheduler's "
                             "two writes per binding with no scheduler, the API server's floor)")
    parser.add_argument("--karmada-shipped", action="store_true",
                        help="also run Karmada's scheduler with its default client limit "
                             "(qps 40, burst 60): slow, about 3 writes per binding")
    parser.add_argument("--markdown", type=pathlib.Path, default=None)
    options = parser.parse_args(args)
    if options.clusters < SHARD or options.bindings < 1:
        parser.error(f"need at least {SHARD} clusters and 1 binding")
    binary = karmada_scheduler(options) if options.karmada else None
    figures = asyncio.run(measure(options, binary))
    print(report.text_table(figures))
    if options.markdown is not None:
        notes = [
            f"Workload: {options.clusters} Clusters (Cluster objects only, apiEndpoint "
            "https://127.0.0.1:1; status: apps/v1 Deployments served, Ready and "
            "CompleteAPIEnablements True, a resource summary), in shards of 4 (2 labelled "
            f"group=a, 2 group=b); {options.bindings:,} ResourceBindings of a {REPLICAS}-replica "
            "Deployment, each Divided by static weights 1:2 over its shard's group a and "
            "group b (label selectors), all created unscheduled before the scheduler starts.",
            "Time: from the scheduler process's start until a watch has seen every binding "
            "Scheduled=True with status.schedulerObservedGeneration equal to its generation "
            "(ours writes spec.clusters by server-side apply, then the status: 2 writes; "
            "Karmada patches the spec, the status, then the observed generation: 3). "
            "Bindings are reset (spec.clusters, the applied-placement annotation and the "
            "status cleared) before every run after the first. Peak RSS is the larger of "
            "VmHWM and VmRSS sampled every 0.2 s.",
            "Pure algorithm: algorithm.schedule() over the same Clusters as views, in the "
            "benchmark process, all plugins, no timing hook.",
            "Karmada: its scheduler v1.18.2 (cmd/scheduler, unmodified, built from the Go "
            "module proxy), --enable-scheduler-estimator=false, no leader "
            "election, unthrottled (--kube-api-qps/--kube-api-burst 10000)"
            + ("; and as shipped (qps 40, burst 60)" if options.karmada_shipped else "")
            + f"; the schedulers alternate, {options.rounds} run(s) each."
            if binary is not None else
            "Karmada's scheduler was not measured (--no-karmada).",
        ]
        command = report.command_line("bench.scheduler", args)
        body = report.section(SECTION_TITLE, figures, notes, command)
        report.write_section(options.markdown, SECTION_TITLE, body)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
