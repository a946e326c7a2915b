"""One informer's initial sync in a fresh process: ``bench.informer`` runs it as a child.

Separate from ``bench.informer`` so that the child imports only the shipped
core (it runs in the runtime-only virtualenv, which has no test packages).
Prints one JSON line: seconds until synced, peak RSS (VmHWM, MiB), objects.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import pathlib
import sys
import time
from collections.abc import Sequence

from clusterhealth_core.kube import client as kube
from clusterhealth_core.kube import config, informer, resources


def _peak_mib() -> float:
    for line in pathlib.Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmHWM")


async def sync(kubeconfig: str, namespace: str, page_size: int) -> dict[str, float]:
    """Sync one informer on the ConfigMaps of ``namespace``; the figures."""
    started = time.monotonic()
    async with kube.ApiClient(config.load_kubeconfig(kubeconfig)) as api:
        cache = informer.Informer(api, resources.CONFIGMAPS, namespace=namespace,
                                  settings=informer.InformerSettings(page_size=page_size))
        task = asyncio.create_task(cache.run())
        await cache.wait_synced()
        elapsed = time.monotonic() - started
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    return {"seconds": elapsed, "peak_mib": _peak_mib(), "objects": len(cache.store)}


def main(argv: Sequence[str] | None = None) -> int:
    """Parse, sync, print the JSON line."""
    parser = argparse.ArgumentParser(prog="python -m bench.informer_sync")
    parser.add_argument("kubeconfig")
    parser.add_argument("--namespace", required=True)
    parser.add_argument("--page-size", type=int, required=True)
    options = parser.parse_args(sys.argv[1:] if argv is None else argv)
    print(json.dumps(asyncio.run(sync(options.kubeconfig, options.namespace,
                                      options.page_size))))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
