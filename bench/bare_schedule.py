"""The floor under the scheduler's throughput: the scheduler's writes with no scheduler.

Issue 9 asks for at least 200 bindings scheduled per second on 2 cores.  A
scheduled binding costs two writes, as in Karmada: ``spec.clusters`` (with the
applied-placement annotation) on the binding, then its status (the
``Scheduled`` condition and ``schedulerObservedGeneration``), a separate
subresource.  This process makes exactly those two server-side applies per
binding, with the same field manager, client library and 8 workers, and no
scheduling at all (every binding gets the same two clusters).  Run by
``bench.scheduler`` as a third implementation, its rate is what the API
server, etcd and the benchmark's own watch allow on this machine: no scheduler
that writes what Karmada's writes can be faster.

Run (by ``bench.scheduler``): ``python -m bench.bare_schedule --kubeconfig PATH
--namespace NS [--workers 8]``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
from collections.abc import Sequence
from typing import Any

from clusterhealth_core.kube import client as kube
from clusterhealth_core.kube import config, resources

FIELD_MANAGER = "clusterhealth-scheduler"
APPLIED_PLACEMENT = "policy.karmada.io/applied-placement"


async def schedule(api: kube.ApiClient, obj: dict[str, Any]) -> None:
    """The scheduler's two writes for one binding."""
    meta = obj["metadata"]
    ident = {"name": meta["name"], "namespace": meta["namespace"],
             "annotations": {APPLIED_PLACEMENT: json.dumps(obj["spec"].get("placement") or {},
                                                           separators=(",", ":"))}}
    replicas = int(obj["spec"].get("replicas") or 0)
    written = await api.apply(resources.RESOURCE_BINDINGS, {"metadata": ident, "spec": {
        "clusters": [{"name": "bare-a", "replicas": replicas // 3},
                     {"name": "bare-b", "replicas": replicas - replicas // 3}]}},
        field_manager=FIELD_MANAGER, force=True)
    generation = written["metadata"]["generation"]
    await api.apply(resources.RESOURCE_BINDINGS, {
        "metadata": {"name": meta["name"], "namespace": meta["namespace"]},
        "status": {"schedulerObservedGeneration": generation,
                   "lastScheduledTime": "2026-01-01T00:00:00Z",
                   "conditions": [{"type": "Scheduled", "status": "True", "reason": "Success",
                                   "message": "Binding has been scheduled successfully.",
                                   "observedGeneration": generation,
                                   "lastTransitionTime": "2026-01-01T00:00:00Z"}]}},
        field_manager=FIELD_MANAGER, subresource="status", force=True)


async def run(kubeconfig: str, namespace: str, workers: int) -> None:
    """List the bindings once, write every one, then wait to be stopped."""
    async with kube.ApiClient(config.load_kubeconfig(kubeconfig), http="aiohttp",
                              max_connections=workers,
                              user_agent="clusterhealth-bare-schedule") as api:
        pending = (await api.list(resources.RESOURCE_BINDINGS, namespace=namespace))["items"]

        async def worker() -> None:
            while pending:
                await schedule(api, pending.pop())

        await asyncio.gather(*(worker() for _ in range(workers)))
        await asyncio.Event().wait()  # the benchmark stops the process


def main(argv: Sequence[str] | None = None) -> int:
    """Parse the flags and write until killed."""
    parser = argparse.ArgumentParser(prog="python -m bench.bare_schedule")
    parser.add_argument("--kubeconfig", required=True)
    parser.add_argument("--namespace", required=True)
    parser.add_argument("--workers", type=int, default=8)
    options = parser.parse_args(argv)
    asyncio.run(run(options.kubeconfig, options.namespace, options.workers))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
