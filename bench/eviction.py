"""Eviction throughput of the taint manager (issue 10), beside Karmada's.

* Workload: ``--clusters`` Clusters (Cluster objects only, ``apiEndpoint``
  https://127.0.0.1:1; ``Ready`` True, the failed one ``Ready`` False: 1 of 10
  unhealthy, so the storm guard stays off) and ``--bindings`` ResourceBindings,
  each scheduled to the failed Cluster (2 replicas) and one healthy Cluster
  (1 replica), with no toleration, placement copied into the applied-placement
  annotation as Karmada's scheduler leaves it.
* One run: the taint manager is started and ready (its readiness probe, then
  a short settle for its caches); a NoExecute taint (``timeAdded`` now) is
  written on the failed Cluster; the time until a watch has seen every binding
  without the failed Cluster and with its graceful-eviction task is the
  figure (bindings per second, time to the first eviction).  Bindings, taint
  and readiness are reset between runs.
* Side by side: Karmada v1.18.2's taint manager (``karmada-controller-manager
  --controllers=cluster``: the taint manager is part of Karmada's ``cluster``
  controller, there is no ``taint-manager`` name), with the ``Failover``
  feature gate and ``--enable-no-execute-taint-eviction`` (both off by
  default, so nothing is evicted without them), on the same API server,
  CRDs and bindings: rate limits raised (``--resource-eviction-rate``, its
  workqueue limiter and client QPS), and as shipped (rate 0.5/s per worker,
  3 workers: measured over ``--shipped-window`` seconds, not to the end).
  The Karmada CRDs our API does not define (its resource-interpreter
  configuration, which its always-on resource detector watches, and the
  other kinds it lists) are added to the API server for it.

Run: ``python -m bench.eviction [--clusters 10] [--bindings 1000] [--rounds 3]
[--workers 4] [--no-karmada] [--shipped-window 60] [--markdown PATH]``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import datetime
import functools
import json
import pathlib
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from bench import remedy, report, runtime, takeover
from clusterhealth_controlplane.taintmanager import decision
from clusterhealth_core.kube import client as kube
from clusterhealth_core.kube import errors, resources
from clusterhealth_localenv import binaries, environment
from clusterhealth_localenv import karmada as karmada_env

SECTION_TITLE = "## Taint-manager eviction (issue 10)"
NAMESPACE = "bench-eviction"
TARGET_RATE = 100.0
"""Bindings evicted per second the issue asks for, rate limit off."""
CONCURRENCY = 32
SETTLE = 3.0
"""Seconds after the readiness probe before the taint (caches loaded)."""
RUN_TIMEOUT = 900.0
TAINT_KEY = "cluster.karmada.io/not-ready"


def cluster_name(index: int) -> str:
    return f"bench-e{index:02d}"


FAILED = cluster_name(0)


def cluster_object(index: int) -> dict[str, Any]:
    return {"apiVersion": resources.CLUSTERS.api_version, "kind": "Cluster",
            "metadata": {"name": cluster_name(index)},
            "spec": {"apiEndpoint": "https://127.0.0.1:1", "syncMode": "Push"}}


def ready_status(index: int) -> dict[str, Any]:
    ready = "False" if index == 0 else "True"
    return {"conditions": [{"type": "Ready", "status": ready, "reason": "Bench", "message": "",
                            "lastTransitionTime": "2024-01-01T00:00:00Z"}]}


def targets(index: int, clusters: int) -> list[dict[str, Any]]:
    return [{"name": FAILED, "replicas": 2},
            {"name": cluster_name(1 + index % (clusters - 1)), "replicas": 1}]


def binding_name(index: int) -> str:
    return f"web-{index:05d}-deployment"


def binding_object(index: int, clusters: int) -> dict[str, Any]:
    placement = {"clusterAffinity": {"clusterNames": [cluster_name(i) for i in range(clusters)]}}
    return {"apiVersion": resources.RESOURCE_BINDINGS.api_version, "kind": "ResourceBinding",
            "metadata": {"name": binding_name(index), "namespace": NAMESPACE, "annotations": {
                decision.APPLIED_PLACEMENT: json.dumps(placement, separators=(",", ":"))}},
            "spec": {"resource": {"apiVersion": "apps/v1", "kind": "Deployment",
                                  "namespace": NAMESPACE, "name": f"web-{index:05d}",
                                  "uid": f"00000000-0000-0000-0000-{index:012d}"},
                     "replicas": 3, "placement": placement,
                     "clusters": targets(index, clusters)}}


async def _bounded(calls: Sequence[Callable[[], Awaitable[Any]]]) -> None:
    semaphore = asyncio.Semaphore(CONCURRENCY)

    async def one(call: Callable[[], Awaitable[Any]]) -> None:
        async with semaphore:
            await call()
    await asyncio.gather(*(one(c) for c in calls))


async def set_status(api: kube.ApiClient, clusters: int) -> None:
    """Every Cluster's conditions as the workload wants them (whoever wrote them since)."""
    await _bounded([functools.partial(
        api.patch, resources.CLUSTERS, cluster_name(i), {"status": ready_status(i)},
        patch_type="merge", subresource="status") for i in range(clusters)])


async def create_workload(api: kube.ApiClient, clusters: int, bindings: int) -> None:
    with contextlib.suppress(errors.Conflict):
        await api.create(resources.NAMESPACES, {"metadata": {"name": NAMESPACE}})
    await _bounded([functools.partial(api.create, resources.CLUSTERS, cluster_object(i))
                    for i in range(clusters)])
    await set_status(api, clusters)
    await _bounded([functools.partial(api.create, resources.RESOURCE_BINDINGS,
                                      binding_object(i, clusters), namespace=NAMESPACE)
                    for i in range(bindings)])


async def reset(api: kube.ApiClient, clusters: int, bindings: int) -> None:
    """No taint, the Clusters' readiness, every binding back on the failed Cluster."""
    await api.patch(resources.CLUSTERS, FAILED, {"spec": {"taints": None}}, patch_type="merge")
    await set_status(api, clusters)

    async def one(index: int) -> None:
        await api.patch(resources.RESOURCE_BINDINGS, binding_name(index),
                        {"spec": {"clusters": targets(index, clusters),
                                  "gracefulEvictionTasks": None}},
                        namespace=NAMESPACE, patch_type="merge")
    await _bounded([functools.partial(one, i) for i in range(bindings)])


async def add_karmada_crds(api: kube.ApiClient, found: binaries.KarmadaBinaries) -> list[str]:
    """Karmada's CRDs for the kinds this API server does not define; their names."""
    existing = {c["metadata"]["name"] for c in (await api.list(resources.CRDS))["items"]}
    files = sorted(p.name for p in found.crd_dir.glob("*.yaml"))
    added = []
    for doc in karmada_env.load_crds(found, files):
        if doc["metadata"]["name"] not in existing:
            await api.create(resources.CRDS, doc)
            added.append(doc["metadata"]["name"])
    await asyncio.sleep(2.0)  # established
    return added


def evicted(obj: dict[str, Any]) -> bool:
    spec = obj.get("spec") or {}
    return (all(t.get("name") != FAILED for t in spec.get("clusters") or [])
            and any(t.get("fromCluster") == FAILED
                    for t in spec.get("gracefulEvictionTasks") or []))


@dataclasses.dataclass(frozen=True)
class Run:
    """One run: bindings evicted, in how long, the first after how long."""

    evicted: int
    seconds: float
    first: float

    @property
    def rate(self) -> float:
        return self.evicted / self.seconds if self.seconds > 0 else 0.0


@dataclasses.dataclass(frozen=True)
class Implementation:
    """A taint manager this benchmark can start, and how to tell it is ready."""

    name: str
    label: str
    argv: Callable[[environment.LocalEnvironment, int], list[str]]
    probe: str
    window: float | None = None
    """Measure this many seconds after the taint, not until every binding is evicted."""
    tree: pathlib.Path | None = None
    """Another checkout whose sources the process runs (``--baseline-tree``); None: this one."""


def ours(workers: int) -> Implementation:
    def argv(env: environment.LocalEnvironment, port: int) -> list[str]:
        return [runtime.python(), "-m", "clusterhealth_controlplane",
                "--kubeconfig", str(env.kubeconfig()), "--controllers", "taintManager",
                "--eviction-rate", "0", "--eviction-workers", str(workers),
                "--bind-address", "127.0.0.1", "--healthz-port", str(port),
                "--leader-elect", "false"]
    return Implementation("ours", f"ours (rate limit off, {workers} eviction workers)", argv,
                          "readyz")


def karmada(binary: pathlib.Path, *, shipped: bool, window: float) -> Implementation:
    def argv(env: environment.LocalEnvironment, port: int) -> list[str]:
        raised = [] if shipped else [
            "--resource-eviction-rate=1000000", "--rate-limiter-qps=1000000",
            "--rate-limiter-bucket-size=1000000", "--rate-limiter-base-delay=1ns",
            "--kube-api-qps=10000", "--kube-api-burst=10000"]
        return [str(binary), f"--kubeconfig={env.kubeconfig()}", "--controllers=cluster",
                "--feature-gates=Failover=true", "--enable-no-execute-taint-eviction=true",
                "--leader-elect=false", "--metrics-bind-address=0",
                f"--health-probe-bind-address=127.0.0.1:{port}", *raised]
    if shipped:
        return Implementation("karmada-shipped",
                              "Karmada as shipped (rate 0.5/s, 3 workers, qps 40)", argv,
                              "healthz", window)
    return Implementation("karmada", "Karmada, limits raised (rate 1e6/s, qps 10000)", argv,
                          "healthz")


def _answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=1) as response:
            return bool(response.status == 200)
    except OSError:
        return False


def _tail(log: pathlib.Path, lines: int = 15) -> str:
    return "\n".join(log.read_text(errors="replace").splitlines()[-lines:])


def start(impl: Implementation, env: environment.LocalEnvironment, port: int,
          log: pathlib.Path) -> subprocess.Popen[bytes]:
    """Start one taint manager, its output appended to ``log``."""
    with log.open("ab") as out:
        return subprocess.Popen(impl.argv(env, port), stdout=out, stderr=subprocess.STDOUT,
                                env=runtime.child_env(impl.tree))


async def wait_ready(proc: subprocess.Popen[bytes], url: str, log: pathlib.Path) -> None:
    async with asyncio.timeout(120):
        while not await asyncio.to_thread(_answers, url):
            if proc.poll() is not None:
                raise RuntimeError(f"{url}: the process exited ({proc.returncode}):\n"
                                   + _tail(log))
            await asyncio.sleep(0.2)
    await asyncio.sleep(SETTLE)


async def run_once(env: environment.LocalEnvironment, api: kube.ApiClient,
                   impl: Implementation, bindings: int, log: pathlib.Path) -> Run:
    """Start ``impl``, taint the failed Cluster, wait for the evictions, stop it."""
    port = environment.free_port("127.0.0.1")
    proc = start(impl, env, port, log)
    try:
        await wait_ready(proc, f"http://127.0.0.1:{port}/{impl.probe}", log)
        first = await api.list(resources.RESOURCE_BINDINGS, namespace=NAMESPACE)
        if any(evicted(o) for o in first["items"]):
            raise RuntimeError("bindings evicted before the taint")
        version = first["metadata"]["resourceVersion"]
        finished: set[str] = set()
        all_done = asyncio.Event()
        first_at: list[float] = []

        async def follow() -> None:
            nonlocal version
            while True:
                async for event in api.watch(resources.RESOURCE_BINDINGS, namespace=NAMESPACE,
                                             resource_version=version):
                    if event.type == "BOOKMARK":
                        continue
                    version = event.object["metadata"]["resourceVersion"]
                    if event.type != "DELETED" and evicted(event.object):
                        if not first_at:
                            first_at.append(time.monotonic())
                        finished.add(event.object["metadata"]["name"])
                        if len(finished) >= bindings:
                            all_done.set()
                            return

        watcher = asyncio.create_task(follow())
        await asyncio.sleep(0.2)
        added = datetime.datetime.now(datetime.UTC).replace(microsecond=0)
        started = time.monotonic()
        await api.patch(resources.CLUSTERS, FAILED, {"spec": {"taints": [
            {"key": TAINT_KEY, "effect": "NoExecute",
             "timeAdded": decision.format_time(added)}]}}, patch_type="merge")
        try:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(impl.window or RUN_TIMEOUT):
                    await all_done.wait()
            if impl.window is None and not all_done.is_set():
                raise RuntimeError(f"{impl.label}: {len(finished)} of {bindings} evicted "
                                   f"after {RUN_TIMEOUT:.0f} s")
            elapsed = time.monotonic() - started
            count = len(finished)
        finally:
            watcher.cancel()
            await asyncio.gather(watcher, return_exceptions=True)
        return Run(count, elapsed, first_at[0] - started if first_at else elapsed)
    finally:
        remedy.stop(proc)


def figures_for(impls: Sequence[Implementation], runs: dict[str, list[Run]], bindings: int,
                clusters: int) -> list[report.Figure]:
    figures: list[report.Figure] = []
    for impl in impls:
        done = runs[impl.name]
        if not done:
            continue
        mine = impl.name == "ours"
        rate = tuple(r.rate for r in done)
        what = (f"bindings evicted per second over the first {impl.window:.0f} s"
                if impl.window else f"bindings evicted per second ({bindings:,} bindings, "
                f"{clusters} Clusters)")
        figures.append(report.Figure(
            f"{impl.label}: {what}", rate, "bindings/s",
            f">= {TARGET_RATE:.0f}" if mine else "-",
            ("pass" if statistics.median(rate) >= TARGET_RATE else "FAIL") if mine
            else "recorded"))
        if impl.window:
            figures.append(report.Figure(f"{impl.label}: bindings evicted in the window",
                                         tuple(float(r.evicted) for r in done), "bindings"))
        else:
            figures.append(report.Figure(f"{impl.label}: taint to every binding evicted",
                                         tuple(r.seconds for r in done), "s"))
        figures.append(report.Figure(f"{impl.label}: taint to the first eviction",
                                     tuple(r.first for r in done), "s"))
    if runs.get("ours") and runs.get("baseline"):
        figures.append(runtime.before_after(
            "taint to every binding evicted", [r.seconds for r in runs["ours"]],
            [r.seconds for r in runs["baseline"]]))
    return figures


async def measure(options: argparse.Namespace, karmada_dir: binaries.KarmadaBinaries | None
                  ) -> tuple[list[report.Figure], list[str], dict[str, str]]:
    impls = [ours(options.workers)]
    if options.baseline_tree is not None:
        impls.append(dataclasses.replace(
            ours(options.workers), name="baseline", tree=options.baseline_tree,
            label=f"ours from {options.baseline_tree} ({options.workers} eviction workers)"))
    if karmada_dir is not None:
        impls.append(karmada(karmada_dir.controller_manager, shipped=False, window=0))
        if options.shipped_window > 0:
            impls.append(karmada(karmada_dir.controller_manager, shipped=True,
                                 window=options.shipped_window))
    runs: dict[str, list[Run]] = {impl.name: [] for impl in impls}
    failures: dict[str, str] = {}
    added: list[str] = []
    with tempfile.TemporaryDirectory(prefix="clusterhealth-bench-evict-") as tmp:
        takeover.progress(f"logs in {tmp}")
        async with environment.LocalEnvironment(environment.EnvironmentConfig(members=())) \
                as env, env.client(max_connections=CONCURRENCY + 4) as api:
            if karmada_dir is not None:
                added = await add_karmada_crds(api, karmada_dir)
                takeover.progress(f"Karmada CRDs added for it: {', '.join(added)}")
            takeover.progress(f"creating {options.clusters} Clusters and "
                              f"{options.bindings:,} bindings")
            await create_workload(api, options.clusters, options.bindings)
            dirty = False
            for index in range(options.rounds):
                order = impls if index % 2 == 0 else list(reversed(impls))
                for impl in order:
                    if impl.name in failures or (impl.window and index > 0):
                        continue  # the shipped rate: one window is enough
                    if dirty:
                        await reset(api, options.clusters, options.bindings)
                    takeover.progress(f"{impl.label}, round {index + 1}/{options.rounds}")
                    log = pathlib.Path(tmp) / f"{impl.name}-{index}.log"
                    try:
                        run = await run_once(env, api, impl, options.bindings, log)
                    except RuntimeError as exc:
                        failures[impl.name] = str(exc)
                        takeover.progress(f"{impl.label} failed: {exc}")
                        dirty = True
                        continue
                    dirty = True
                    takeover.progress(f"{impl.label}: {run.evicted} evicted in "
                                      f"{run.seconds:.2f} s ({run.rate:.0f}/s), first "
                                      f"{run.first:.2f} s")
                    runs[impl.name].append(run)
    return figures_for(impls, runs, options.bindings, options.clusters), added, failures


def main(argv: Sequence[str] | None = None) -> int:
    """Measure, print the table, optionally update docs/benchmarks.md."""
    args = list(sys.argv[1:] if argv is None else argv)
    parser = argparse.ArgumentParser(prog="python -m bench.eviction")
    parser.add_argument("--clusters", type=int, default=10)
    parser.add_argument("--bindings", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--workers", type=int, default=4, help="our --eviction-workers")
    parser.add_argument("--no-karmada", dest="karmada", action="store_false",
                        help="measure our taint manager alone")
    parser.add_argument("--shipped-window", type=float, default=60.0,
                        help="seconds to measure Karmada as shipped over (0: not at all)")
    parser.add_argument("--baseline-tree", type=pathlib.Path, default=None,
                        help="also run our taint manager from this checkout (before a change), "
                             "alternating, and report this tree's times over its")
    parser.add_argument("--markdown", type=pathlib.Path, default=None)
    options = parser.parse_args(args)
    runtime.baseline_tree(parser, options.baseline_tree)
    if options.clusters < 2 or options.bindings < 1:
        parser.error("need at least 2 clusters and 1 binding")
    karmada_dir = None
    if options.karmada:
        takeover.progress("Karmada v1.18.2 controller-manager from the module proxy (cached)")
        karmada_dir = binaries.ensure_karmada()
    figures, added, failures = asyncio.run(measure(options, karmada_dir))
    print(report.text_table(figures))
    for name, why in failures.items():
        print(f"{name} did not run to the end: {why}")
    if options.markdown is not None:
        notes = [
            f"Workload: {options.clusters} Clusters (Cluster objects only, apiEndpoint "
            "https://127.0.0.1:1; Ready True, the failed one Ready False, so the storm guard "
            f"is off); {options.bindings:,} ResourceBindings, each on the failed Cluster "
            "(2 replicas) and one healthy Cluster (1 replica), no toleration, the placement "
            "also in the applied-placement annotation (Karmada's taint manager reads only "
            "that). Time: from the NoExecute taint written on the failed Cluster (the taint "
            "manager started, ready and settled 3 s before) until a watch has seen every "
            "binding without the failed Cluster and with its graceful-eviction task "
            "(one update per binding). Bindings, taint and readiness are reset between runs.",
            "Ours: python -m clusterhealth_controlplane --controllers taintManager "
            f"--eviction-rate 0 --eviction-workers {options.workers}, no leader election.",
            "Karmada: karmada-controller-manager v1.18.2 (built from the Go module proxy), "
            "--controllers=cluster (its taint manager is part of the cluster controller; "
            "there is no taint-manager name), --feature-gates=Failover=true "
            "--enable-no-execute-taint-eviction=true (both off by default), no leader "
            "election, on the same API server and CRDs; for it the Karmada CRDs of kinds "
            f"our API does not define were added ({', '.join(added) or 'none'}). Limits "
            "raised: --resource-eviction-rate=1000000 (0 would stop it: 1800 s per item), "
            "--rate-limiter-qps/--rate-limiter-bucket-size 1000000, --rate-limiter-base-delay "
            "1ns, --kube-api-qps/--kube-api-burst 10000; its 3 eviction workers are fixed in "
            "its code. As shipped (rate 0.5/s paced per worker, qps 40): measured over "
            f"{options.shipped_window:.0f} s, not to the end."
            if karmada_dir is not None else "Karmada was not measured (--no-karmada).",
            *[f"{name} did not complete: {why}" for name, why in failures.items()],
        ]
        command = report.command_line("bench.eviction", args)
        body = report.section(SECTION_TITLE, figures, notes, command)
        report.write_section(options.markdown, SECTION_TITLE, body)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
