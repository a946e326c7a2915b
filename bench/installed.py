"""Each installed component's container memory, read from its cgroup (issue 20, item 5).

The fleet of ``tests/install`` (:func:`clusterhealth_localenv.fleet.running`: the
images built from the Dockerfiles, every chart installed with helm onto clusters
whose Nodes run containers, the ``shop`` application, its MCI and Remedy), left to
settle; then, every few seconds over a window, each container of our charts' Pods
(namespace ``clusterhealth-system`` in every cluster) is found in the memory
cgroup its kubelet made (``<cgroupRoot>/kubepods/<qos>/pod<uid>/<container id>``)
and its **working set** read as kubelet and cAdvisor compute it, the figure
``kubectl top`` shows and the eviction manager acts on:

* cgroup v1: ``memory.usage_in_bytes`` minus ``total_inactive_file`` (``memory.stat``);
* cgroup v2: ``memory.current`` minus ``inactive_file``.

Each figure pools every sample of every replica of a component (leader and
standby alike; the spread shows both).  The agent's goal is 40 MiB, as its process
target (``bench.agent``).

Run from the repository root, as root: ``python -m bench.installed [--trials N]
[--settle S] [--window S] [--every S] [--markdown docs/benchmarks.md]``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import pathlib
import statistics
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from typing import Any

from bench import foundation, report
from bench.takeover import progress
from clusterhealth_core.kube import resources
from clusterhealth_localenv import binaries as bins
from clusterhealth_localenv import environment, fleet, nodehost

SECTION_TITLE = "## Memory of each installed component, from its cgroup (issue 20)"
AGENT_GOAL_MIB = 40.0
MIB = 1024 * 1024


def memory_hierarchy() -> pathlib.Path:
    """The memory controller's hierarchy (v1) or the unified one (v2)."""
    for hierarchy in nodehost.cgroup_hierarchies():
        if (hierarchy / "memory.stat").exists() or hierarchy.name == "memory":
            return hierarchy
    raise RuntimeError("no cgroup hierarchy with the memory controller is mounted")


def working_set_bytes(folder: pathlib.Path) -> int:
    """Usage minus inactive file pages (never below 0), as kubelet computes it."""
    stat = dict(line.split() for line in (folder / "memory.stat").read_text().splitlines())
    if (folder / "memory.current").exists():
        usage, inactive = int((folder / "memory.current").read_text()), int(
            stat["inactive_file"])
    else:
        usage, inactive = int((folder / "memory.usage_in_bytes").read_text()), int(
            stat["total_inactive_file"])
    return max(0, usage - inactive)


def folders_by_name(top: pathlib.Path) -> dict[str, pathlib.Path]:
    """Every cgroup folder under ``top`` by its last name (a container's is its id)."""
    return {pathlib.Path(d).name: pathlib.Path(d) for d, _, _ in os.walk(top)}


def component(pod: Mapping[str, Any], cluster: str, container: str) -> str:
    """A row's name: the chart, the container, and the member for the agents."""
    labels = pod["metadata"].get("labels") or {}
    name = labels.get("app.kubernetes.io/name", pod["metadata"]["name"])
    if name == "clusterhealth-agent":
        return f"{name} ({cluster}): {container}"
    return f"{name}: {container}"


async def containers(the_fleet: fleet.Fleet) -> dict[str, list[str]]:
    """Every running container of our charts' Pods: its row's name -> container ids."""
    found: dict[str, list[str]] = {}
    for cluster in [environment.CONTROL_PLANE, *the_fleet.env.members]:
        async with the_fleet.env.client(cluster) as api:
            pods = (await api.list(resources.PODS, namespace=fleet.NAMESPACE))["items"]
        for pod in pods:
            for status in (pod.get("status") or {}).get("containerStatuses") or []:
                if "running" in (status.get("state") or {}) and status.get("containerID"):
                    found.setdefault(component(pod, cluster, status["name"]), []).append(
                        status["containerID"].split("://", 1)[1])
    return found


def sample(top: pathlib.Path, ids: Mapping[str, list[str]]
           ) -> tuple[dict[str, list[float]], dict[str, list[float]]]:
    """Per row: each container's working set (MiB), and its processes' RSS (MiB)."""
    folders = folders_by_name(top)
    working: dict[str, list[float]] = {}
    rss: dict[str, list[float]] = {}
    for row, container_ids in ids.items():
        for container_id in container_ids:
            folder = folders.get(container_id)
            if folder is None:
                raise RuntimeError(f"{row}: no cgroup named {container_id} under {top}")
            working.setdefault(row, []).append(working_set_bytes(folder) / MIB)
            pids = [int(p) for p in (folder / "cgroup.procs").read_text().split()]
            total = 0.0
            for pid in pids:
                with contextlib.suppress(OSError, RuntimeError):
                    total += foundation.rss_mib(pid)
            rss.setdefault(row, []).append(total)
    return working, rss


async def trial(settle: float, window: float, every: float
                ) -> tuple[dict[str, list[float]], dict[str, list[float]], dict[str, float]]:
    """One fleet: installed, settled, sampled; its set-up timings."""
    working: dict[str, list[float]] = {}
    rss: dict[str, list[float]] = {}
    with tempfile.TemporaryDirectory(prefix="clusterhealth-installed-") as tmp:
        async with fleet.running(pathlib.Path(tmp)) as the_fleet:
            node_env = the_fleet.env.node_env
            assert node_env is not None and node_env.cgroups is not None
            top = memory_hierarchy() / node_env.cgroups.name
            progress("installed: " + ", ".join(f"{k} {v:.0f} s"
                                               for k, v in the_fleet.timings.items()))
            await asyncio.sleep(settle)
            ids = await containers(the_fleet)
            ends = time.monotonic() + window
            while True:
                got, got_rss = await asyncio.to_thread(sample, top, ids)
                for row, values in got.items():
                    working.setdefault(row, []).extend(values)
                for row, values in got_rss.items():
                    rss.setdefault(row, []).extend(values)
                if time.monotonic() + every > ends:
                    break
                await asyncio.sleep(every)
            if await containers(the_fleet) != ids:
                raise RuntimeError("a container restarted or moved while it was measured")
            timings = dict(the_fleet.timings)
    return working, rss, timings


async def measure(trials: int, settle: float, window: float, every: float
                  ) -> tuple[list[report.Figure], dict[str, list[float]]]:
    """Every trial's samples pooled per component."""
    await asyncio.to_thread(bins.ensure_kubernetes)
    await asyncio.to_thread(bins.ensure_workload_parts)
    await asyncio.to_thread(bins.ensure_node_parts)
    working: dict[str, list[float]] = {}
    rss: dict[str, list[float]] = {}
    timings: dict[str, list[float]] = {}
    for index in range(trials):
        got, got_rss, took = await trial(settle, window, every)
        for row, values in got.items():
            working.setdefault(row, []).extend(values)
        for row, values in got_rss.items():
            rss.setdefault(row, []).extend(values)
        for key, value in took.items():
            timings.setdefault(key, []).append(value)
        progress(f"trial {index + 1}/{trials}: " + ", ".join(
            f"{row} {statistics.median(v):.1f}" for row, v in sorted(got.items())))
    figures = []
    for row in sorted(working):
        agent = row.startswith("clusterhealth-agent") and row.endswith(": agent")
        verdict = "recorded"
        if agent:
            verdict = "met" if max(working[row]) <= AGENT_GOAL_MIB else "missed"
        figures.append(report.Figure(f"working set, {row}", tuple(working[row]), "MiB",
                                     f"<= {AGENT_GOAL_MIB:.0f} MiB" if agent else "-",
                                     verdict))
    for row in sorted(rss):
        if row.endswith(": agent"):
            figures.append(report.Figure(f"RSS of the processes, {row}", tuple(rss[row]),
                                         "MiB"))
    return figures, timings


def main(argv: Sequence[str] | None = None) -> int:
    """Measure, print the table, optionally update the Markdown section."""
    args = list(sys.argv[1:] if argv is None else argv)
    parser = argparse.ArgumentParser(prog="python -m bench.installed", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trials", type=int, default=1,
                        help="fleets installed one after the other (default 1)")
    parser.add_argument("--settle", type=float, default=60.0,
                        help="seconds after the install before measuring (default 60)")
    parser.add_argument("--window", type=float, default=60.0,
                        help="seconds over which samples are taken (default 60)")
    parser.add_argument("--every", type=float, default=5.0,
                        help="seconds between samples (default 5)")
    parser.add_argument("--markdown", type=pathlib.Path)
    options = parser.parse_args(args)
    if options.trials < 1 or options.window < 0 or options.settle < 0 or options.every <= 0:
        parser.error("--trials must be >= 1, --window and --settle >= 0, --every > 0")
    if os.geteuid() != 0:
        parser.error("Nodes that run containers need root")
    figures, timings = asyncio.run(measure(options.trials, options.settle, options.window,
                                           options.every))
    print(report.text_table(figures))
    samples = 1 + int(options.window // options.every)
    notes = [
        f"{options.trials} fleet(s) installed as `tests/install` installs them (Kubernetes "
        f"{bins.KUBERNETES_VERSION}, Debian's containerd, cgroup driver cgroupfs, the "
        "charts' defaults and the agent timers of `fleet.FleetSettings`); measured "
        f"{options.settle:.0f} s after the install, {samples} samples {options.every:.0f} s "
        "apart; each figure pools the samples of every replica (2 per Deployment, one agent "
        "per Node, 2 Nodes per member).",
        "Working set = usage minus inactive file pages of the container's own cgroup (v1: "
        "`memory.usage_in_bytes` - `total_inactive_file`; v2: `memory.current` - "
        "`inactive_file`), what kubelet reports and evicts on. It is not the processes' "
        "RSS (also given for the agent): the cgroup is charged with the anonymous memory "
        "and the page cache its processes brought in, not with file pages another "
        "container of the same image read first, which RSS counts when mapped.",
        "Install time, median: " + ", ".join(
            f"{k} {statistics.median(v):.0f} s" for k, v in timings.items()) + ".",
    ]
    if options.markdown is not None:
        command = report.command_line("bench.installed", args)
        report.write_section(options.markdown, SECTION_TITLE,
                             report.section(SECTION_TITLE, figures, notes, command))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
