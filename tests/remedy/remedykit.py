"""End-to-end kit for the Remedy controller: test Clusters, conditions, controller processes."""

from __future__ import annotations

import dataclasses
import functools
import pathlib
import signal
import subprocess
import sys
import urllib.request
from collections.abc import Sequence
from typing import Any

from prometheus_client import parser

import testkit
from clusterhealth_core.kube import client as kube
from clusterhealth_core.kube import resources
from clusterhealth_localenv import conditions, environment, waiting

DNS = "ServiceDomainNameResolutionReady"
WRITER = "test-condition-writer"
FAST_ELECTION = ["--leader-elect-lease-duration", "3s", "--leader-elect-renew-deadline", "2s",
                 "--leader-elect-retry-period", "0.5s"]


async def set_condition(cp: kube.ApiClient, cluster: str, value: str, ctype: str = DNS,
                        manager: str = WRITER) -> None:
    """Set one condition as another writer would (other writers' conditions stay)."""
    await conditions.set_condition(cp, cluster, ctype, value, manager=manager)


async def make_remedy(cp: kube.ApiClient, name: str, clusters: Sequence[str] | None,
                      match: tuple[str, str, str] | None = (DNS, "Equal", "False")) -> None:
    spec: dict[str, Any] = {"actions": ["TrafficControl"]}
    if clusters is not None:
        spec["clusterAffinity"] = {"clusterNames": list(clusters)}
    if match is not None:
        spec["decisionMatches"] = [{"clusterConditionMatch": {
            "conditionType": match[0], "operator": match[1], "conditionStatus": match[2]}}]
    await cp.create(resources.REMEDIES, {"apiVersion": resources.REMEDIES.api_version,
                                         "kind": "Remedy", "metadata": {"name": name},
                                         "spec": spec})


async def actions(cp: kube.ApiClient, cluster: str) -> list[str]:
    obj = await cp.get(resources.CLUSTERS, cluster)
    return list((obj.get("status") or {}).get("remedyActions") or [])


eventually = functools.partial(waiting.eventually, timeout=15.0)


@dataclasses.dataclass
class Controller:
    proc: subprocess.Popen[bytes]
    port: int
    log: pathlib.Path

    def stop(self, sig: int = signal.SIGTERM) -> None:
        testkit.stop_process(self.proc, sig)

    def metrics(self) -> str:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/metrics", timeout=2) as r:
            return str(r.read().decode())

    def samples(self, name: str) -> dict[frozenset[tuple[str, str]], float]:
        """The exported samples called ``name``, by their labels."""
        return {frozenset(s.labels.items()): s.value
                for family in parser.text_string_to_metric_families(self.metrics())
                for s in family.samples if s.name == name}

    def is_leader(self) -> bool:
        try:
            return "clusterhealth_remedy_is_leader 1.0" in self.metrics()
        except OSError:
            return False


def start_controller(env: environment.LocalEnvironment, python_env: dict[str, str],
                     lease: str, log: pathlib.Path, extra: Sequence[str] = ()) -> Controller:
    port = environment.free_port("127.0.0.1")
    argv = [sys.executable, "-m", "clusterhealth_remedy", "--kubeconfig",
            str(env.kubeconfig()), "--bind-address", "127.0.0.1", "--healthz-port", str(port),
            "--leader-elect-resource-namespace", "default",
            "--leader-elect-resource-name", lease, *FAST_ELECTION, *extra]
    with log.open("ab") as out:
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, env=python_env)
    return Controller(proc, port, log)
