"""Pods of a test image on real Nodes, and commands run in them (through kubectl exec).

The image is Debian's static busybox written as a docker-archive
(:func:`clusterhealth_localenv.folderimages.busybox_image`) and loaded into every
Node's containerd: Pods name it with ``imagePullPolicy: Never``.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import pathlib
import time
from typing import Any

from clusterhealth_core.kube import client as kube
from clusterhealth_core.kube import errors, resources
from clusterhealth_localenv import environment

IMAGE = "localhost/clusterhealth/busybox:test"
MEMBER = "member1"
NAMESPACE = "nodes-tests"


def pod(name: str, namespace: str, command: str, *, node: str | None = None,
        labels: dict[str, str] | None = None) -> dict[str, Any]:
    """A busybox Pod running ``sh -c command`` (on ``node`` if given)."""
    spec: dict[str, Any] = {
        "containers": [{"name": "main", "image": IMAGE, "imagePullPolicy": "Never",
                        "command": ["sh", "-c", command]}],
        "terminationGracePeriodSeconds": 0,
    }
    if node is not None:
        spec["nodeName"] = node
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": namespace, "labels": labels or {}},
            "spec": spec}


async def wait_running(api: kube.ApiClient, name: str, namespace: str,
                       timeout: float = 60) -> dict[str, Any]:
    """Until the Pod is Running and Ready; its object."""
    deadline = time.monotonic() + timeout
    while True:
        obj = await api.get(resources.PODS, name, namespace=namespace)
        status = obj.get("status") or {}
        ready = [c for c in status.get("conditions") or [] if c.get("type") == "Ready"]
        if status.get("phase") == "Running" and ready and ready[0].get("status") == "True":
            return obj
        if status.get("phase") in ("Failed", "Succeeded") or time.monotonic() > deadline:
            raise AssertionError(f"Pod {namespace}/{name} not running: {status}")
        await asyncio.sleep(0.2)


async def node_ready(api: kube.ApiClient, name: str) -> str:
    """The status of the Node's Ready condition (``True``, ``False``, ``Unknown``)."""
    node = await api.get(resources.NODES, name)
    ready = [c for c in (node.get("status") or {}).get("conditions") or []
             if c.get("type") == "Ready"]
    return str(ready[0].get("status")) if ready else "missing"


@dataclasses.dataclass
class Result:
    """What a command in a Pod printed and returned."""

    code: int
    output: str


class Pods:
    """Run commands in the Pods of a namespace of a cluster with Nodes."""

    def __init__(self, env: environment.LocalEnvironment, kubectl: pathlib.Path,
                 namespace: str, cluster: str = MEMBER) -> None:
        self.env = env
        self.kubectl = kubectl
        self.namespace = namespace
        self.cluster = cluster

    async def exec(self, pod_name: str, *command: str, timeout: float = 30) -> Result:
        """``kubectl exec`` (API server -> kubelet -> containerd's stream server)."""
        proc = await asyncio.create_subprocess_exec(
            str(self.kubectl), f"--kubeconfig={self.env.kubeconfig(self.cluster)}",
            "-n", self.namespace, "exec", pod_name, "--", *command,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT)
        try:
            out, _ = await asyncio.wait_for(proc.communicate(), timeout)
        except TimeoutError:
            proc.kill()
            await proc.wait()
            raise
        assert proc.returncode is not None
        return Result(proc.returncode, out.decode(errors="replace"))

    async def logs(self, pod_name: str) -> str:
        """``kubectl logs`` (API server -> kubelet -> the container's log file)."""
        proc = await asyncio.create_subprocess_exec(
            str(self.kubectl), f"--kubeconfig={self.env.kubeconfig(self.cluster)}",
            "-n", self.namespace, "logs", pod_name,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT)
        out, _ = await proc.communicate()
        return out.decode(errors="replace")


async def ensure_namespace(api: kube.ApiClient, name: str) -> None:
    """Create the namespace and wait for its default ServiceAccount (Pods need it)."""
    with contextlib.suppress(errors.Conflict):
        await api.create(resources.NAMESPACES, {"metadata": {"name": name}})
    deadline = time.monotonic() + 30
    while True:
        try:
            await api.get(resources.SERVICE_ACCOUNTS, "default", namespace=name)
            return
        except errors.NotFound:
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.1)
