"""Helpers for control-plane tests: the controller manager in-process, objects, waiting."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import pathlib
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator, Sequence
from typing import Any, TypeVar

import prometheus_client

import testkit
from clusterhealth_controlplane import app, controllers, manager, metrics, options
from clusterhealth_core import clock as clocks
from clusterhealth_core import election, members, runner
from clusterhealth_core.kube import client as kube
from clusterhealth_core.kube import errors, resources
from clusterhealth_localenv import environment, waiting

T = TypeVar("T")
PROPAGATION = ("detector", "binding", "execution", "workStatus", "bindingStatus")
"""The controllers that propagate templates (no failover)."""
WITH_NAMESPACE_SYNC = ("detector", "binding", "namespaceSync", "execution", "workStatus",
                       "bindingStatus")
"""The same, with the namespace sync (which the chart's default runs too)."""


@dataclasses.dataclass
class Running:
    """The controller manager running in-process the way the component runs it."""

    replica: runner.ElectedController
    registry: prometheus_client.CollectorRegistry

    @property
    def manager(self) -> manager.Manager:
        current = self.replica.current
        assert isinstance(current, manager.Manager)
        return current


@contextlib.asynccontextmanager
async def running_manager(cp: kube.ApiClient, names: Sequence[str], *, workers: int = 2,
                          resync_period: float = 300.0,
                          failover: options.Options | None = None,
                          member_limits: kube.Limits | None = None) -> AsyncIterator[Running]:
    """Run the selected controllers through :class:`runner.ElectedController` (no election)."""
    limits = members.LIMITS if member_limits is None else member_limits
    registry = prometheus_client.CollectorRegistry()
    leader = prometheus_client.Gauge("leader", "leader", registry=registry)
    failover_metrics = metrics.FailoverMetrics(registry)
    entries = controllers.selected(names)
    assert [e.name for e in entries] == list(names), "unknown controller names"
    replica = runner.ElectedController(
        cp, False, election.ElectionConfig("cp-test", "default"), clocks.Clock(),
        make=lambda term: manager.Manager(manager.Context(
            term, workers, resync_period, options=failover or options.Options(),
            metrics=failover_metrics, member_limits=limits), entries),
        leader_gauge=leader, metrics=runner.ProcessMetrics(registry),
        term=runner.TermSettings(app.COMPONENT))
    task = asyncio.create_task(replica.run())
    try:
        await waiting.eventually(lambda: _synced(replica), timeout=30)
        yield Running(replica, registry)
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def _synced(replica: runner.ElectedController) -> bool:
    return replica.current is not None and replica.current.synced


async def make_namespace(api: kube.ApiClient, prefix: str = "cp") -> str:
    name = testkit.unique(prefix)
    await api.create(resources.NAMESPACES, {"metadata": {"name": name}})
    return name


def deployment(name: str, namespace: str, replicas: int = 3,
               labels: dict[str, str] | None = None) -> dict[str, Any]:
    selector = {"app": name}
    return {
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name, "namespace": namespace, "labels": labels or {}},
        "spec": {"replicas": replicas, "selector": {"matchLabels": selector},
                 "template": {"metadata": {"labels": selector}, "spec": {"containers": [
                     {"name": "web", "image": "nginx:1.27",
                      "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}}}]}}},
    }


def propagation_policy(name: str, namespace: str, selectors: Sequence[dict[str, Any]],
                       placement: dict[str, Any] | None = None, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": resources.PROPAGATION_POLICIES.api_version,
            "kind": "PropagationPolicy",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"resourceSelectors": list(selectors),
                     "placement": placement or {"clusterAffinity": {
                         "clusterNames": ["member1", "member2"]}}, **spec}}


DIVIDED_1_2 = {
    "clusterAffinity": {"clusterNames": ["member1", "member2"]},
    "replicaScheduling": {
        "replicaSchedulingType": "Divided", "replicaDivisionPreference": "Weighted",
        "weightPreference": {"staticWeightList": [
            {"targetCluster": {"clusterNames": ["member1"]}, "weight": 1},
            {"targetCluster": {"clusterNames": ["member2"]}, "weight": 2}]}},
}
"""Seed 000's placement: Divided 1:2 over member1 and member2."""


@contextlib.contextmanager
def scheduler_process(env: environment.LocalEnvironment, python_env: dict[str, str],
                      log: pathlib.Path, *extra: str) -> Iterator[subprocess.Popen[bytes]]:
    """The scheduler as shipped: its own process against ``env``'s control plane."""
    argv = [sys.executable, "-m", "clusterhealth_controlplane.scheduler", "--kubeconfig",
            str(env.kubeconfig()), "--bind-address", "127.0.0.1", "--healthz-port",
            str(environment.free_port("127.0.0.1")), "--leader-elect", "false", *extra]
    with log.open("ab") as out:
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, env=python_env)
    try:
        yield proc
    finally:
        proc.terminate()
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@contextlib.asynccontextmanager
async def running(cp: kube.ApiClient, names: Sequence[str] = PROPAGATION,
                  failover: options.Options | None = None
                  ) -> AsyncIterator[runner.ElectedController]:
    """The selected controllers as the manager runs them (one term, election disabled)."""
    async with running_manager(cp, names, failover=failover) as run:
        yield run.replica


async def get_or_none(api: kube.ApiClient, resource: resources.Resource, name: str,
                      namespace: str | None = None) -> dict[str, Any] | None:
    try:
        return await api.get(resource, name, namespace=namespace)
    except errors.NotFound:
        return None
