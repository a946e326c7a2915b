"""End to end propagation (issue 9 §5): a template in the control plane -> Ready Pods in members.

On an environment whose members run workloads (kube-controller-manager,
kube-scheduler and kwok each), the controller manager
(``python -m clusterhealth_controlplane``) and the scheduler
(``python -m clusterhealth_controlplane.scheduler``) run as processes, as
shipped.  For each of N Deployments (3 replicas) with a PropagationPolicy
(Divided, weights 1:2 over member1 and member2, seed 000's placement), the time
from creating the template (policy first) until both members report their
share of replicas available (member1 1, member2 2), measured by polling the
members' Deployments.  The Deployments are created one after another (each
timed alone), in a namespace of their own.

Run from the repository root: ``python -m bench.propagation [--deployments 50]
[--markdown docs/benchmarks.md]``.
"""

from __future__ import annotations

import argparse
import asyncio
import pathlib
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from typing import Any

from bench import remedy, report, runtime, takeover
from clusterhealth_core.kube import client as kube
from clusterhealth_core.kube import errors, resources
from clusterhealth_localenv import environment, workloads

SECTION_TITLE = "## Propagation end to end (issue 9)"
NAMESPACE = "bench-propagation"
SHARES = {"member1": 1, "member2": 2}
PLACEMENT = {
    "clusterAffinity": {"clusterNames": list(SHARES)},
    "replicaScheduling": {
        "replicaSchedulingType": "Divided", "replicaDivisionPreference": "Weighted",
        "weightPreference": {"staticWeightList": [
            {"targetCluster": {"clusterNames": [name]}, "weight": weight}
            for name, weight in SHARES.items()]}},
}


def deployment(name: str) -> dict[str, Any]:
    """A 3-replica Deployment with small requests."""
    labels = {"app": name}
    return {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": name, "namespace": NAMESPACE},
            "spec": {"replicas": sum(SHARES.values()), "selector": {"matchLabels": labels},
                     "template": {"metadata": {"labels": labels}, "spec": {"containers": [
                         {"name": "web", "image": "nginx:1.27", "resources": {
                             "requests": {"cpu": "10m", "memory": "16Mi"}}}]}}}}


def policy(name: str) -> dict[str, Any]:
    """The PropagationPolicy selecting one Deployment by name."""
    return {"apiVersion": resources.PROPAGATION_POLICIES.api_version,
            "kind": "PropagationPolicy", "metadata": {"name": name, "namespace": NAMESPACE},
            "spec": {"resourceSelectors": [{"apiVersion": "apps/v1", "kind": "Deployment",
                                            "name": name}],
                     "placement": PLACEMENT}}


def start(argv: list[str], log: pathlib.Path) -> subprocess.Popen[bytes]:
    """One of our processes, its output appended to ``log``."""
    child = takeover.child_env()
    with log.open("ab") as out:
        return subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, env=child)


def processes(env: environment.LocalEnvironment) -> list[list[str]]:
    """The controller manager's and the scheduler's command lines."""
    common = ["--kubeconfig", str(env.kubeconfig()), "--bind-address", "127.0.0.1",
              "--leader-elect", "false"]
    return [
        [runtime.python(), "-m", "clusterhealth_controlplane", *common,
         "--healthz-port", str(environment.free_port("127.0.0.1"))],
        [runtime.python(), "-m", "clusterhealth_controlplane.scheduler", *common,
         "--healthz-port", str(environment.free_port("127.0.0.1"))],
    ]


async def available(member: kube.ApiClient, name: str, replicas: int) -> bool:
    """Whether the member's Deployment has ``replicas`` available (and wants that many)."""
    try:
        obj = await member.get(resources.DEPLOYMENTS, name, namespace=NAMESPACE)
    except errors.NotFound:
        return False
    status = obj.get("status") or {}
    return (obj["spec"].get("replicas") == replicas
            and status.get("availableReplicas") == replicas)


async def reported(cp: kube.ApiClient, names: list[str], timeout: float) -> None:
    """Wait until the controller manager reported every member's served APIs.

    A template placed before that is scheduled onto the members reported so far
    (all 3 replicas on one, as Karmada would), and stays there.
    """
    async with asyncio.timeout(timeout):
        while True:
            complete = 0
            for name in names:
                status = (await cp.get(resources.CLUSTERS, name)).get("status") or {}
                complete += any(c.get("type") == "CompleteAPIEnablements"
                                and c.get("status") == "True"
                                for c in status.get("conditions") or [])
            if complete == len(names):
                return
            await asyncio.sleep(0.1)


async def one(cp: kube.ApiClient, members: dict[str, kube.ApiClient], name: str,
              timeout: float) -> float:
    """Seconds from policy + template created until every member runs its share."""
    began = time.monotonic()
    await cp.create(resources.PROPAGATION_POLICIES, policy(name), namespace=NAMESPACE)
    await cp.create(resources.DEPLOYMENTS, deployment(name), namespace=NAMESPACE)
    async with asyncio.timeout(timeout):
        waiting = dict(SHARES)
        while waiting:
            for member, replicas in list(waiting.items()):
                if await available(members[member], name, replicas):
                    del waiting[member]
            if waiting:
                await asyncio.sleep(0.02)
    return time.monotonic() - began


async def measure(count: int, timeout: float, tmp: pathlib.Path) -> list[float]:
    """Times for ``count`` Deployments, one after another."""
    config = environment.EnvironmentConfig(members=tuple(SHARES),
                                           workloads=workloads.WorkloadSettings())
    async with environment.LocalEnvironment(config) as env:
        async with env.client() as cp:
            await cp.create(resources.NAMESPACES, {"metadata": {"name": NAMESPACE}})
        procs = [start(argv, tmp / f"process-{i}.log") for i, argv in enumerate(processes(env))]
        samples: list[float] = []
        try:
            async with env.client() as cp, env.client("member1") as m1, \
                    env.client("member2") as m2:
                members = {"member1": m1, "member2": m2}
                takeover.progress("waiting for the cluster-status controller to report the "
                                  "members")
                await reported(cp, list(SHARES), 120)
                takeover.progress("warm-up Deployment (not recorded)")
                await one(cp, members, "warm-up", 120)
                for index in range(count):
                    samples.append(await one(cp, members, f"d{index:03d}", timeout))
                    takeover.progress(f"{index + 1}/{count}: {samples[-1]:.2f} s")
        finally:
            for proc in procs:
                remedy.stop(proc)
    return samples


def main(argv: Sequence[str] | None = None) -> int:
    """Measure, print the table, optionally update the Markdown section."""
    args = list(sys.argv[1:] if argv is None else argv)
    parser = argparse.ArgumentParser(prog="python -m bench.propagation", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--deployments", type=int, default=50)
    parser.add_argument("--timeout", type=float, default=60.0,
                        help="seconds one Deployment may take before the run fails")
    parser.add_argument("--markdown", type=pathlib.Path)
    options = parser.parse_args(args)
    if options.deployments < 1:
        parser.error("--deployments must be >= 1")
    with tempfile.TemporaryDirectory(prefix="clusterhealth-bench-") as tmp:
        samples = asyncio.run(measure(options.deployments, options.timeout, pathlib.Path(tmp)))
    p99 = remedy.percentile(samples, 0.99)
    figures = [report.Figure(f"template + policy created -> Pods available in both members "
                             f"(p99 {p99:.2f} s)", tuple(samples), "s")]
    print(report.text_table(figures))
    if options.markdown is not None:
        notes = [
            "Members run kube-controller-manager, kube-scheduler and kwok (2 Nodes each); "
            "the controller manager and the scheduler run as processes with default flags "
            "(leader election off). Each Deployment has 3 replicas, Divided 1:2 over "
            "member1 and member2; timed until member1 has 1 and member2 has 2 available. "
            "The controller manager's cluster-status controller reports the members' APIs "
            "and resources; timing starts once it has reported both.",
        ]
        command = report.command_line("bench.propagation", args)
        report.write_section(options.markdown, SECTION_TITLE,
                             report.section(SECTION_TITLE, figures, notes, command))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
