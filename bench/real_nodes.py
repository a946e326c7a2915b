"""Clusters whose Nodes run containers (issue 20): what they cost to start and to keep.

``EnvironmentConfig(nodes=...)`` gives member1 Nodes with kubelet,
containerd, runc, a CNI bridge and kube-proxy each, plus a controller manager,
a scheduler and CoreDNS (:mod:`clusterhealth_localenv.nodes`).  Measured with
cached binaries, trials of the kinds interleaved:

1. start-up time of the environment: bare (control plane + member1, API
   servers only: the baseline), member1 with 2 Nodes, and the same plus a
   host cluster (the control plane with 1 Node); ``start()`` returns once every
   Node is Ready and every CoreDNS Deployment is available;
2. after a settle time, over a window: CPU (user + system seconds per second,
   from ``/proc/<pid>/stat``) and resident memory of each Node's processes
   (its init, containerd, kubelet, kube-proxy, the shims and the containers:
   one CoreDNS replica per Node), and of the cluster's controller manager and
   scheduler;
3. the time ``stop()`` takes (every Node killed, cgroups, links and kernel
   settings undone).

Run from the repository root, as root: ``python -m bench.real_nodes
[--trials N] [--settle S] [--window S] [--markdown docs/benchmarks.md]``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import pathlib
import statistics
import sys
import time
from collections.abc import Sequence

from bench import foundation, report, usage
from bench.takeover import progress
from clusterhealth_localenv import binaries as bins
from clusterhealth_localenv import environment, nodes

SECTION_TITLE = "## Clusters whose Nodes run containers (issue 20)"
KINDS = ("bare", "nodes", "nodes+host")


def config(kind: str) -> environment.EnvironmentConfig:
    """The environment of one kind of trial."""
    if kind == "bare":
        return environment.EnvironmentConfig(members=("member1",))
    return environment.EnvironmentConfig(members=("member1",), nodes=nodes.NodeSettings(
        nodes=2, control_plane_nodes=1 if kind == "nodes+host" else 0))


def cpu_seconds(pids: Sequence[int]) -> float:
    """CPU seconds the processes have used so far (gone ones count 0)."""
    return sum(map(usage.process_cpu_seconds, pids))


PARTS = ("kubelet", "containerd", "kube-proxy", "coredns", "containerd-shim")
"""Processes reported on their own (by ``comm``); the rest (init, nsenter, pause) as "other"."""


def rss_by_part(named: dict[int, str]) -> dict[str, float]:
    """RSS (MiB) of a Node's processes summed by part."""
    parts: dict[str, float] = {}
    for pid, name in named.items():
        part = name if name in PARTS else "other"
        with contextlib.suppress(OSError, RuntimeError):
            parts[part] = parts.get(part, 0.0) + foundation.rss_mib(pid)
    return parts


async def node_costs(cluster: nodes.NodeCluster, window: float
                     ) -> tuple[list[float], list[dict[str, float]], float, float]:
    """Per Node: CPU (cores) over ``window`` and RSS by part (MiB); the controllers' too."""
    node_pids = [sorted(node.pids()) for node in cluster.nodes]
    control = [p.pid for p, _ in cluster.controllers if p.pid is not None]
    start = [cpu_seconds(pids) for pids in node_pids] + [cpu_seconds(control)]
    began = time.monotonic()
    await asyncio.sleep(window)
    elapsed = time.monotonic() - began
    node_pids = [sorted(set(pids) | set(node.pids()))
                 for pids, node in zip(node_pids, cluster.nodes, strict=True)]
    end = [cpu_seconds(pids) for pids in node_pids] + [cpu_seconds(control)]
    cpu = [(e - s) / elapsed for s, e in zip(start, end, strict=True)]
    rss = [rss_by_part(node.pids()) for node in cluster.nodes]
    control_rss = sum(foundation.rss_mib(pid) for pid in control)
    return cpu[:-1], rss, cpu[-1], control_rss


async def trial(kind: str, settle: float, window: float) -> dict[str, list[float]]:
    """One timed start and stop; with Nodes, their idle CPU and RSS."""
    env = environment.LocalEnvironment(config(kind))
    samples: dict[str, list[float]] = {}
    began = time.monotonic()
    try:
        await env.start()
        samples["start"] = [time.monotonic() - began]
        if kind != "bare":
            await asyncio.sleep(settle)
            cpu, rss, control_cpu, control_rss = await node_costs(
                env.node_cluster("member1"), window)
            samples |= {"node_cpu": cpu, "node_rss": [sum(r.values()) for r in rss],
                        "control_cpu": [control_cpu], "control_rss": [control_rss]}
            for part in (*PARTS, "other"):
                samples[f"rss {part}"] = [r.get(part, 0.0) for r in rss]
    finally:
        began = time.monotonic()
        await env.stop()
        samples["stop"] = [time.monotonic() - began]
    return samples


async def measure(trials: int, settle: float, window: float) -> list[report.Figure]:
    """Interleaved trials of every kind."""
    await asyncio.to_thread(bins.ensure_kubernetes)
    await asyncio.to_thread(bins.ensure_workload_parts)
    await asyncio.to_thread(bins.ensure_node_parts)
    results: dict[str, dict[str, list[float]]] = {kind: {} for kind in KINDS}
    for index in range(trials):
        for kind in KINDS:
            samples = await trial(kind, settle, window)
            for key, values in samples.items():
                results[kind].setdefault(key, []).extend(values)
            progress(f"{kind} {index + 1}/{trials}: " + ", ".join(
                f"{key} {statistics.median(values):.2f}" for key, values in samples.items()
                if not key.startswith("rss ")))
    nodes_, host = results["nodes"], results["nodes+host"]
    figures = [
        report.Figure("env start-up, control plane + member1, bare API servers",
                      tuple(results["bare"]["start"]), "s"),
        report.Figure("env start-up, member1 with 2 Nodes (Ready, CoreDNS available)",
                      tuple(nodes_["start"]), "s"),
        report.Figure("env start-up, member1 with 2 Nodes + host cluster with 1 Node",
                      tuple(host["start"]), "s"),
        report.Figure("start-up, 2 Nodes / bare (medians)",
                      (statistics.median(nodes_["start"])
                       / statistics.median(results["bare"]["start"]),), "x"),
        report.Figure(f"idle CPU of one Node, {settle:.0f} s after start, over {window:.0f} s "
                      "(init, containerd, kubelet, kube-proxy, shims, 1 CoreDNS)",
                      tuple(100 * c for c in nodes_["node_cpu"] + host["node_cpu"]),
                      "% of a core"),
        report.Figure("RSS of one Node, all its processes",
                      tuple(nodes_["node_rss"] + host["node_rss"]), "MiB"),
        *(report.Figure(f"RSS of one Node: {part}" + (
            " (init, nsenter, pause)" if part == "other" else ""),
            tuple(nodes_[f"rss {part}"] + host[f"rss {part}"]), "MiB")
          for part in (*PARTS, "other")),
        report.Figure("idle CPU of member1's controller manager + scheduler",
                      tuple(100 * c for c in nodes_["control_cpu"] + host["control_cpu"]),
                      "% of a core"),
        report.Figure("RSS of member1's controller manager + scheduler",
                      tuple(nodes_["control_rss"] + host["control_rss"]), "MiB"),
        report.Figure("env stop, member1 with 2 Nodes (everything undone)",
                      tuple(nodes_["stop"]), "s"),
        report.Figure("env stop, bare", tuple(results["bare"]["stop"]), "s"),
    ]
    return figures


def main(argv: Sequence[str] | None = None) -> int:
    """Measure, print the table, optionally update the Markdown section."""
    args = list(sys.argv[1:] if argv is None else argv)
    parser = argparse.ArgumentParser(prog="python -m bench.real_nodes", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trials", type=int, default=3, help="trials of each kind (default 3)")
    parser.add_argument("--settle", type=float, default=20.0,
                        help="seconds after start-up before measuring (default 20)")
    parser.add_argument("--window", type=float, default=30.0,
                        help="seconds over which idle CPU is measured (default 30)")
    parser.add_argument("--markdown", type=pathlib.Path)
    options = parser.parse_args(args)
    if options.trials < 1 or options.window <= 0 or options.settle < 0:
        parser.error("--trials must be >= 1, --window > 0, --settle >= 0")
    if os.geteuid() != 0:
        parser.error("Nodes that run containers need root")
    figures = asyncio.run(measure(options.trials, options.settle, options.window))
    print(report.text_table(figures))
    notes = [
        f"Kubernetes {bins.KUBERNETES_VERSION} (kube-apiserver, kube-controller-manager, "
        f"kube-scheduler, kubelet, kube-proxy built from the Go module proxy), CoreDNS "
        f"{bins.COREDNS_VERSION} (built likewise), Debian's containerd, runc and CNI plugins; "
        "kube-proxy in nftables mode; trials of the three kinds alternate.",
        "Per-Node figures cover every process of the Node: its init (pause), containerd, "
        "kubelet, kube-proxy, the containerd shims, and the Pods it runs (one CoreDNS "
        "replica per Node); they are member1's Nodes in both kinds with Nodes.",
    ]
    if options.markdown is not None:
        command = report.command_line("bench.real_nodes", args)
        report.write_section(options.markdown, SECTION_TITLE,
                             report.section(SECTION_TITLE, figures, notes, command))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
