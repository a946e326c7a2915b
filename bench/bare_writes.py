"""The floor under the remedy scale figures: the same Cluster writes, with no controller.

Issue 13 asks that our change-convergence time grow at most 5.5x from 1,000
to 5,000 Clusters.  Part of that time is the API server's: a Cluster status
write may cost it more with 5,000 Clusters stored than with 1,000.  This
process makes exactly the writes the remedy controller makes on
``bench.remedy``'s workload, with nothing else: it knows every Cluster's
answer in advance (from the workload, not from evaluating Remedies), keeps no
cache beyond one list, sends no Events and no Remedy status.  Run as an
``Implementation`` beside the controllers, its convergence time is what the
API server, the client and the benchmark's own watch cost; a controller
cannot grow slower than it on the same machine.

* Start: one list of the Clusters, then writes for those whose status
  differs from the answer for the current ``scale-all``.
* Change: a watch of the ``scale-all`` Remedy; on each new spec, writes for
  every Cluster whose answer changes.

Writes are the controller's own: :class:`clusterhealth_core.status.StatusWriter`
with its field manager, ``--workers`` at a time, over the same aiohttp client.

The workload's size is read from the server (its Clusters and Remedies are
counted), so the process takes the same flags at every scale.

Run (by ``bench.remedy``): ``python -m bench.bare_writes --kubeconfig PATH
[--workers 4]``.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
from collections.abc import Mapping, Sequence
from typing import Any

from bench import remedy_workload
from clusterhealth_core import schema, status
from clusterhealth_core.kube import client as kube
from clusterhealth_core.kube import config, resources
from clusterhealth_remedy import controller, decision

log = logging.getLogger(__name__)


def answers(workload: remedy_workload.Workload, changed: bool) -> dict[str, dict[str, Any]]:
    """Every Cluster's owned status, in wire shape, for the base or changed ``scale-all``."""
    return {name: decision.status_patch(d) for name, d in workload.decisions(changed).items()}


async def write_all(writer: status.StatusWriter, todo: Mapping[str, Mapping[str, Any]],
                    workers: int) -> None:
    """Write every ``todo`` status, ``workers`` at a time."""
    queue = list(todo.items())

    async def worker() -> None:
        while queue:
            name, body = queue.pop()
            await writer.write(name, body)

    await asyncio.gather(*(worker() for _ in range(workers)))


async def run(kubeconfig: str, workers: int) -> None:
    """Converge at start, then after every change of ``scale-all``, until cancelled."""
    credentials = config.load_kubeconfig(kubeconfig)
    async with kube.ApiClient(credentials, http="aiohttp", max_connections=workers,
                              user_agent="clusterhealth-bare-writes") as api:
        kind = await schema.discover(api, resources.CLUSTERS)
        writer = status.StatusWriter(api, kind, controller.FIELD_MANAGER,
                                     frozenset(controller.OWNED_FIELDS))
        listing = await api.list(resources.CLUSTERS)
        remedies = await api.list(resources.REMEDIES)
        workload = remedy_workload.Workload.build(
            sum(i["metadata"]["name"].startswith("scale-") for i in listing["items"]),
            sum(i["metadata"]["name"].startswith("scale-") for i in remedies["items"]))
        targets = {False: answers(workload, False), True: answers(workload, True)}
        changed_spec = workload.changed["spec"]
        have = {i["metadata"]["name"]: controller.owned_status(i) for i in listing["items"]
                if i["metadata"]["name"] in targets[False]}
        remedy = await api.get(resources.REMEDIES, "scale-all")
        version = remedy["metadata"]["resourceVersion"]
        applied: dict[str, Any] | None = None
        while True:
            if remedy["spec"] != applied:
                target = targets[remedy["spec"] == changed_spec]
                todo = {n: body for n, body in target.items() if have.get(n) != body}
                await write_all(writer, todo, workers)
                have.update(todo)
                applied = remedy["spec"]
            async for event in api.watch(resources.REMEDIES, resource_version=version,
                                         field_selector="metadata.name=scale-all"):
                version = event.object["metadata"].get("resourceVersion", version)
                if event.type == "MODIFIED":
                    remedy = event.object
                    break


def main(argv: Sequence[str] | None = None) -> int:
    """Parse the flags and write until killed."""
    parser = argparse.ArgumentParser(prog="python -m bench.bare_writes")
    parser.add_argument("--kubeconfig", required=True)
    parser.add_argument("--workers", type=int, default=4)
    options = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO)
    asyncio.run(run(options.kubeconfig, options.workers))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
