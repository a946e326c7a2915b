"""Scheduler benchmarks (issues 9 and 22): throughput against the real API server, beside Karmada's.

* Throughput: ``--clusters`` Clusters (Cluster objects only, ``apiEndpoint``
  https://127.0.0.1:1, with the status both schedulers read: served APIs, ``Ready`` and
  ``CompleteAPIEnablements`` True, a resource summary) and ``--bindings`` unscheduled
  ResourceBindings exist; a scheduler is started and, by a watch, the time until every
  binding's placement is written (``spec.clusters``: the finish line), and separately
  until its status is (``Scheduled=True`` with ``schedulerObservedGeneration`` equal to
  its generation; Karmada records the generation it read before its own spec patch, and
  catches up on a second pass), the first placement written, CPU and peak RSS.
* The workload (``--workload``): ``mixed`` (default) takes turns over six placements
  within a shard of 4 Clusters (``shard=i % (clusters/4)``; 2 labelled ``group=a``,
  2 ``group=b``, capacities differing): static weights 1:2 over the groups; dynamic
  weights (``AvailableReplicas``); Duplicated over group a (cluster affinity); Duplicated
  with a spread constraint (2 clusters of the shard); Aggregated; and two affinity terms
  of which the first names no existing cluster (it falls through to the second, static
  weights).  ``static`` is issue 9's workload: every binding static weights 1:2.
* Side by side: Karmada's own scheduler v1.18.2 (``cmd/scheduler``, unmodified, built
  from the Go module proxy: ``binaries.ensure_karmada_scheduler``), with its
  estimator off, on the same API server, Clusters and bindings; the implementations
  alternate and every binding is reset (``spec.clusters``, the applied-placement
  annotation and the status cleared) before each run.  After each run every
  binding's placement is kept, and ours is compared with Karmada's binding by binding
  (the placement-equality check).
* The floor: ``bench.bare_schedule`` makes the scheduler's two writes per binding with
  no scheduling at all.
* The pure algorithm's rate: ``algorithm.schedule()`` calls per second over the same
  Clusters as views, in this process.

Run: ``python -m bench.scheduler [--clusters 100] [--bindings 5000] [--workload mixed]
[--rounds 1] [--karmada-scheduler BINARY] [--karmada-shipped] [--markdown PATH]``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import functools
import json
import pathlib
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from bench import remedy, report, runtime, takeover, usage
from clusterhealth_controlplane.scheduler import adapt, algorithm, plugins
from clusterhealth_core.api import policy, work
from clusterhealth_core.kube import client as kube
from clusterhealth_core.kube import errors, resources
from clusterhealth_localenv import binaries, environment

SECTION_TITLE = "## Scheduler (issues 9 and 22)"
NAMESPACE = "bench-scheduler"
SHARD = 4
"""Clusters per shard: 2 in group a (weight 1), 2 in group b (weight 2)."""
REPLICAS = 6
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


KINDS = ("static", "dynamic", "duplicated", "spread", "aggregated", "fallthrough")
"""The placements of the mixed workload, taken in turns."""
ABSENT = "bench-absent"
"""A cluster name no Cluster has: the first affinity term of ``fallthrough`` selects nothing."""


def cluster_object(index: int) -> dict[str, Any]:
    """A Cluster in shard ``index // 4``, group a or b."""
    return {"apiVersion": resources.CLUSTERS.api_version, "kind": "Cluster",
            "metadata": {"name": cluster_name(index),
                         "labels": {"shard": str(index // SHARD),
                                    "group": "a" if index % SHARD < SHARD // 2 else "b"}},
            "spec": {"apiEndpoint": "https://127.0.0.1:1", "syncMode": "Push"}}


def cluster_status(index: int = 0) -> dict[str, Any]:
    """What both schedulers read: served APIs, readiness, capacity (differing in a shard)."""
    conditions = [{"type": kind, "status": "True", "reason": reason, "message": "",
                   "lastTransitionTime": NOW}
                  for kind, reason in (("Ready", "ClusterReady"),
                                       ("CompleteAPIEnablements", "Complete"))]
    cpu = 16 * (1 + index % SHARD)
    return {"apiEnablements": APIS, "conditions": conditions,
            "resourceSummary": {"allocatable": {"pods": 1000, "cpu": str(cpu),
                                                "memory": "1Ti"}}}


def _group(shard: int, name: str) -> dict[str, Any]:
    return {"labelSelector": {"matchLabels": {"shard": str(shard), "group": name}}}


def _in_shard(shard: int) -> dict[str, Any]:
    return {"labelSelector": {"matchLabels": {"shard": str(shard)}}}


STATIC_1_2 = {"replicaSchedulingType": "Divided", "replicaDivisionPreference": "Weighted"}


def placement(shard: int, kind: str = "static") -> dict[str, Any]:
    """The placement of a binding of ``kind`` in ``shard``."""
    static = {**STATIC_1_2, "weightPreference": {"staticWeightList": [
        {"targetCluster": _group(shard, "a"), "weight": 1},
        {"targetCluster": _group(shard, "b"), "weight": 2}]}}
    if kind == "static":
        return {"clusterAffinity": _in_shard(shard), "replicaScheduling": static}
    if kind == "dynamic":
        return {"clusterAffinity": _in_shard(shard), "replicaScheduling": {
            **STATIC_1_2, "weightPreference": {"dynamicWeight": "AvailableReplicas"}}}
    if kind == "duplicated":
        return {"clusterAffinity": _group(shard, "a"),
                "replicaScheduling": {"replicaSchedulingType": "Duplicated"}}
    if kind == "spread":
        return {"clusterAffinity": _in_shard(shard),
                "spreadConstraints": [{"spreadByField": "cluster", "maxGroups": 2,
                                       "minGroups": 2}],
                "replicaScheduling": {"replicaSchedulingType": "Duplicated"}}
    if kind == "aggregated":
        return {"clusterAffinity": _in_shard(shard), "replicaScheduling": {
            "replicaSchedulingType": "Divided", "replicaDivisionPreference": "Aggregated"}}
    if kind == "fallthrough":
        return {"clusterAffinities": [
            {"affinityName": "absent", "clusterNames": [ABSENT]},
            {"affinityName": "shard", **_in_shard(shard)}], "replicaScheduling": static}
    raise ValueError(f"unknown placement kind {kind!r}")


def kind_of(index: int, workload: str) -> str:
    """The placement kind of binding ``index``."""
    return KINDS[index % len(KINDS)] if workload == "mixed" else "static"


def binding_name(index: int) -> str:
    return f"web-{index:05d}-deployment"


def binding_object(index: int, shards: int, workload: str = "static") -> dict[str, Any]:
    name = f"web-{index:05d}"
    kind = kind_of(index, workload)
    return {"apiVersion": resources.RESOURCE_BINDINGS.api_version, "kind": "ResourceBinding",
            "metadata": {"name": binding_name(index), "namespace": NAMESPACE,
                         "labels": {CLAIM_LABEL: POLICY_ID, "bench-kind": kind}},
            "spec": {"resource": {"apiVersion": "apps/v1", "kind": "Deployment",
                                  "namespace": NAMESPACE, "name": name,
                                  "uid": f"00000000-0000-0000-0000-{index:012d}"},
                     "replicas": REPLICAS,
                     "replicaRequirements": {"resourceRequest": {"cpu": "2"}},
                     "placement": placement(index % shards, kind)}}


async def _bounded(calls: Sequence[Callable[[], Awaitable[Any]]]) -> None:
    semaphore = asyncio.Semaphore(CONCURRENCY)

    async def one(call: Callable[[], Awaitable[Any]]) -> None:
        async with semaphore:
            await call()
    await asyncio.gather(*(one(c) for c in calls))


async def create_workload(api: kube.ApiClient, clusters: int, bindings: int,
                          workload: str = "static") -> None:
    """The Clusters (with status) and the unscheduled bindings."""
    with contextlib.suppress(errors.Conflict):
        await api.create(resources.NAMESPACES, {"metadata": {"name": NAMESPACE}})

    async def make_cluster(index: int) -> None:
        await api.create(resources.CLUSTERS, cluster_object(index))
        await api.apply(resources.CLUSTERS, {"metadata": {"name": cluster_name(index)},
                                             "status": cluster_status(index)},
                        field_manager="bench-cluster-status", subresource="status")
    await _bounded([functools.partial(make_cluster, i) for i in range(clusters)])
    shards = max(1, clusters // SHARD)
    await _bounded([functools.partial(api.create, resources.RESOURCE_BINDINGS,
                                      binding_object(i, shards, workload))
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
                                    "lastScheduledTime": None,
                                    "schedulerObservingAffinityName": None}},
                        namespace=NAMESPACE, patch_type="merge", subresource="status")
    await _bounded([functools.partial(one, i) for i in range(bindings)])


# --- one run -----------------------------------------------------------------------------

def placed(obj: dict[str, Any]) -> bool:
    """The placement is written: ``spec.clusters`` holds at least one cluster."""
    return bool((obj.get("spec") or {}).get("clusters"))


def done(obj: dict[str, Any]) -> bool:
    """Scheduled=True, and the status is about the current generation."""
    st = obj.get("status") or {}
    if st.get("schedulerObservedGeneration") != (obj.get("metadata") or {}).get("generation"):
        return False
    return any(c.get("type") == "Scheduled" and c.get("status") == "True"
               for c in st.get("conditions") or [])


Placement = tuple[tuple[str, int], ...]


def placement_of(obj: dict[str, Any]) -> Placement:
    """``spec.clusters`` as sorted (cluster, replicas) pairs."""
    return tuple(sorted((str(t.get("name")), int(t.get("replicas") or 0))
                        for t in (obj.get("spec") or {}).get("clusters") or []))


@dataclasses.dataclass(frozen=True)
class Run:
    """One scheduler run: to every placement, to every status, the first; CPU, peak RSS."""

    seconds: float
    """Start to every placement written (the finish line)."""
    first: float
    """Start to the first placement written."""
    status: float
    """Start to every status current (Scheduled, observed generation)."""
    rss_peak: float
    cpu: float
    """The scheduler's CPU seconds (user + system) until every placement was written."""
    placements: dict[str, Placement] = dataclasses.field(default_factory=dict)
    """Every binding's placement at the end of the run."""


@dataclasses.dataclass(frozen=True)
class Implementation:
    """A scheduler this benchmark can start."""

    name: str
    label: str
    argv: Callable[[environment.LocalEnvironment], list[str]]
    tree: pathlib.Path | None = None
    """Another checkout whose sources the process runs (``--baseline-tree``); None: this one."""


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
    # runtime.child_env: the repository root too (the bare writer lives in bench/)
    with log.open("ab") as out:
        return subprocess.Popen(impl.argv(env), stdout=out, stderr=subprocess.STDOUT,
                                env=runtime.child_env(impl.tree))


async def run_once(env: environment.LocalEnvironment, api: kube.ApiClient,
                   impl: Implementation, bindings: int, log: pathlib.Path) -> Run:
    """Start ``impl``; by a watch, wait until every placement and every status is written."""
    first = await api.list(resources.RESOURCE_BINDINGS, namespace=NAMESPACE)
    already = [o["metadata"]["name"] for o in first["items"] if placed(o) or done(o)]
    if already:
        raise RuntimeError(f"{len(already)} binding(s) already scheduled before the run")
    version = first["metadata"]["resourceVersion"]
    placed_names: set[str] = set()
    status_names: set[str] = set()
    latest: dict[str, dict[str, Any]] = {}
    all_placed = asyncio.Event()
    all_status = asyncio.Event()
    first_placed: list[float] = []
    placed_at: list[float] = []

    async def follow() -> None:
        nonlocal version
        while True:
            async for event in api.watch(resources.RESOURCE_BINDINGS, namespace=NAMESPACE,
                                         resource_version=version):
                if event.type == "BOOKMARK":
                    continue
                obj = event.object
                version = obj["metadata"]["resourceVersion"]
                if event.type == "DELETED":
                    continue
                name = obj["metadata"]["name"]
                latest[name] = obj
                if placed(obj) and name not in placed_names:
                    if not first_placed:
                        first_placed.append(time.monotonic())
                    placed_names.add(name)
                    if len(placed_names) >= bindings:
                        placed_at.append(time.monotonic())
                        all_placed.set()
                if done(obj):
                    status_names.add(name)
                    if len(status_names) >= bindings:
                        all_status.set()
                        return

    samples: list[float] = []
    watcher = asyncio.create_task(follow())
    await asyncio.sleep(0.2)  # the watch is open before the scheduler starts
    started = time.monotonic()
    proc = start(impl, env, log)
    sampler = asyncio.create_task(_sample_rss(proc.pid, samples))
    try:
        async with asyncio.timeout(RUN_TIMEOUT):
            await all_placed.wait()
            cpu = usage.process_cpu_seconds(proc.pid)
            await all_status.wait()
        status_seconds = time.monotonic() - started
        peak = max(remedy.proc_mib(proc.pid, "VmHWM"), *samples, 0.0)
    finally:
        sampler.cancel()
        watcher.cancel()
        await asyncio.gather(sampler, watcher, return_exceptions=True)
        remedy.stop(proc)
    return Run(placed_at[0] - started, first_placed[0] - started, status_seconds, peak, cpu,
               {name: placement_of(obj) for name, obj in latest.items()})


async def _sample_rss(pid: int, samples: list[float]) -> None:
    while True:
        samples.append(remedy.proc_mib(pid, "VmRSS"))
        await asyncio.sleep(remedy.RSS_PERIOD)


# --- the pure algorithm ------------------------------------------------------------------

def algorithm_rate(clusters: int, calls: int, workload: str = "static") -> float:
    """``schedule()`` calls per second over ``clusters`` views, this workload's placements."""
    entries = [adapt.cluster_entry({**cluster_object(i), "status": cluster_status(i)})
               for i in range(clusters)]
    shards = max(1, clusters // SHARD)
    registry = plugins.default_registry()
    prepared = []
    for index in range(min(calls, 64)):
        obj = binding_object(index, shards, workload)
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

@dataclasses.dataclass(frozen=True)
class Equality:
    """Ours against Karmada's placements in the same round, binding by binding."""

    compared: int
    equal: int
    differing: dict[str, list[str]]
    """Per placement kind, the bindings whose placements differ (ours | Karmada's)."""


def compare(ours_run: Run, theirs: Run, workload: str) -> Equality:
    """Which bindings got the same placement from both schedulers."""
    differing: dict[str, list[str]] = {}
    equal = 0
    for name, mine in sorted(ours_run.placements.items()):
        other = theirs.placements.get(name)
        if other == mine:
            equal += 1
            continue
        kind = kind_of(int(name.split("-")[1]), workload)
        differing.setdefault(kind, []).append(f"{name}: {list(mine)} | {list(other or ())}")
    return Equality(len(ours_run.placements), equal, differing)


def figures_for(impls: Sequence[Implementation], runs: dict[str, list[Run]], bindings: int,
                rates: Sequence[float], clusters: int,
                equality: Sequence[Equality] = ()) -> list[report.Figure]:
    figures = [report.Figure(f"pure algorithm: schedule() calls/s over {clusters} Clusters",
                             tuple(rates), "calls/s")]
    for impl in impls:
        done_runs = runs[impl.name]
        if not done_runs:
            continue
        rate = tuple(bindings / r.seconds for r in done_runs)
        figures += [
            report.Figure(f"{impl.label}: placements written per second "
                          f"({bindings:,} bindings, {clusters} Clusters)", rate, "bindings/s"),
            report.Figure(f"{impl.label}: start to every placement written",
                          tuple(r.seconds for r in done_runs), "s"),
            report.Figure(f"{impl.label}: start to the first placement written",
                          tuple(r.first for r in done_runs), "s"),
            report.Figure(f"{impl.label}: start to every status current (Scheduled, "
                          "observed generation)", tuple(r.status for r in done_runs), "s"),
            report.Figure(f"{impl.label}: CPU (user + system) until every placement",
                          tuple(r.cpu for r in done_runs), "s"),
            report.Figure(f"{impl.label}: peak RSS", tuple(r.rss_peak for r in done_runs),
                          "MiB"),
        ]
    mine = runs.get("ours") or []
    if mine and runs.get("baseline"):
        before = runs["baseline"]
        figures += [
            runtime.before_after("wall time to every placement written",
                                 [r.seconds for r in mine], [r.seconds for r in before]),
            runtime.before_after("wall time to every status current",
                                 [r.status for r in mine], [r.status for r in before]),
            runtime.before_after("CPU until every placement",
                                 [r.cpu for r in mine], [r.cpu for r in before]),
        ]
    if mine and runs.get("bare"):
        # per round: our placement rate over the floor's measured next to it
        share = tuple(floor.seconds / own.seconds
                      for own, floor in zip(mine, runs["bare"], strict=False))
        figures.append(report.Figure(
            "ours' placement rate / the bare-writes floor's (per round)", share, "x",
            ">= 0.95", "pass" if statistics.median(share) >= 0.95 else "FAIL"))
    for other, target in (("karmada", 0.5), ("karmada-shipped", None)):
        if mine and runs.get(other):
            who = next(i.label for i in impls if i.name == other)
            for what, field in (("every placement written", "seconds"),
                                ("every status current", "status")):
                ratio = tuple(getattr(own, field) / getattr(theirs, field)
                              for own, theirs in zip(mine, runs[other], strict=False))
                strict = target is not None and field == "seconds"
                figures.append(report.Figure(
                    f"wall time to {what}, ours / {who} (per round)", ratio, "x",
                    f"<= {target}" if strict else "-",
                    ("pass" if statistics.median(ratio) <= (target or 0) else "FAIL")
                    if strict else "recorded"))
    for result in equality:
        figures.append(report.Figure(
            f"placements equal to Karmada's (of {result.compared:,})",
            (float(result.equal),), "bindings", f"{result.compared:,}",
            "pass" if result.equal == result.compared else "FAIL"))
    return figures


async def measure(options: argparse.Namespace, karmada_binary: pathlib.Path | None
                  ) -> tuple[list[report.Figure], list[Equality]]:
    impls: list[Implementation] = [ours(options.workers)]
    if options.baseline_tree is not None:
        impls.append(dataclasses.replace(
            ours(options.workers), name="baseline", tree=options.baseline_tree,
            label=f"ours from {options.baseline_tree} ({options.workers} workers)"))
    if options.floor:
        impls.append(bare(options.workers))
    if karmada_binary is not None:
        impls.append(karmada(karmada_binary, shipped=False))
        if options.karmada_shipped:
            impls.append(karmada(karmada_binary, shipped=True))
    takeover.progress(f"pure algorithm: {options.algorithm_calls} calls x 3")
    rates = [algorithm_rate(options.clusters, options.algorithm_calls, options.workload)
             for _ in range(3)]
    runs: dict[str, list[Run]] = {impl.name: [] for impl in impls}
    equality: list[Equality] = []
    with tempfile.TemporaryDirectory(prefix="clusterhealth-bench-sched-") as tmp:
        takeover.progress(f"scheduler logs in {tmp}")
        config = environment.EnvironmentConfig(members=())
        async with environment.LocalEnvironment(config) as env, \
                env.client(max_connections=CONCURRENCY + 4) as api:
            takeover.progress(f"creating {options.clusters} Clusters and "
                              f"{options.bindings:,} bindings ({options.workload})")
            await create_workload(api, options.clusters, options.bindings, options.workload)
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
                        f"{impl.label}: every placement {run.seconds:.1f} s "
                        f"({options.bindings / run.seconds:.0f} bindings/s), first "
                        f"{run.first:.2f} s, every status {run.status:.1f} s, CPU "
                        f"{run.cpu:.1f} s, peak {run.rss_peak:.0f} MiB")
                    runs[impl.name].append(run)
                if runs["ours"] and runs.get("karmada"):
                    equality.append(compare(runs["ours"][-1], runs["karmada"][-1],
                                            options.workload))
                    takeover.progress(f"placements equal: {equality[-1].equal} of "
                                      f"{equality[-1].compared}")
            if options.placements is not None:
                dump = {impl: [{name: list(p) for name, p in sorted(run.placements.items())}
                               for run in done] for impl, done in runs.items()}
                options.placements.write_text(json.dumps(dump, indent=1))
    return (figures_for(impls, runs, options.bindings, rates, options.clusters, equality),
            equality)


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
    parser.add_argument("--bindings", type=int, default=5_000)
    parser.add_argument("--workload", choices=("mixed", "static"), default="mixed")
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
    parser.add_argument("--placements", type=pathlib.Path, default=None,
                        help="write every run's placements here (JSON)")
    parser.add_argument("--baseline-tree", type=pathlib.Path, default=None,
                        help="also run our scheduler from this checkout (before a change), "
                             "alternating, and report this tree's times over its")
    parser.add_argument("--markdown", type=pathlib.Path, default=None)
    options = parser.parse_args(args)
    runtime.baseline_tree(parser, options.baseline_tree)
    if options.clusters < SHARD or options.bindings < 1:
        parser.error(f"need at least {SHARD} clusters and 1 binding")
    binary = karmada_scheduler(options) if options.karmada else None
    figures, equality = asyncio.run(measure(options, binary))
    print(report.text_table(figures))
    differing = [f"{kind}: {len(names)} differ, e.g. {names[0]}"
                 for result in equality for kind, names in sorted(result.differing.items())]
    for line in differing:
        print(line)
    if options.markdown is not None:
        kinds = ("six placements in turns: static weights 1:2 over group a and group b; "
                 "dynamic weights (AvailableReplicas); Duplicated over group a; Duplicated "
                 "with spreadConstraints (cluster, 2 groups); Aggregated; two "
                 "clusterAffinities terms of which the first names no existing cluster "
                 "(falls through to the shard, static weights)"
                 if options.workload == "mixed" else
                 "each Divided by static weights 1:2 over its shard's group a and group b")
        notes = [
            f"Workload: {options.clusters} Clusters (Cluster objects only, apiEndpoint "
            "https://127.0.0.1:1; status: apps/v1 Deployments served, Ready and "
            "CompleteAPIEnablements True, a resource summary with 16, 32, 48 and 64 CPUs in "
            "turn), in shards of 4 (2 labelled group=a, 2 group=b); "
            f"{options.bindings:,} ResourceBindings of a {REPLICAS}-replica Deployment "
            f"requesting 2 CPUs a replica, within their shard: {kinds}; all created "
            "unscheduled before the scheduler starts.",
            "Finish line: from the scheduler process's start until a watch has seen every "
            "binding's spec.clusters written (its placement). Reported apart: until every "
            "status is current (Scheduled=True, status.schedulerObservedGeneration equal to "
            "the generation; ours writes the spec then the status, 2 writes; Karmada "
            "patches the spec and the status, recording the generation it read before its "
            "own spec patch, and catches up on a second pass over its queue), and the first "
            "placement written. Bindings are reset (spec.clusters, the applied-placement "
            "annotation and the status cleared) before every run after the first. CPU is "
            "counted until every placement; peak RSS is the larger of VmHWM and VmRSS "
            "sampled every 0.2 s, over the whole run.",
            "Placement equality: after each round, every binding's spec.clusters from ours "
            "and from Karmada's run of the same round, compared binding by binding."
            + ("".join(f" Differing: {line}." for line in differing) if differing else ""),
            "Floor: bench.bare_schedule, the scheduler's two server-side applies per binding "
            "(spec, then status) with no scheduling, 8 workers, same client.",
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
