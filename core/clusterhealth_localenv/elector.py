"""A process that campaigns for a Lease and prints when it starts/stops leading.

Used by the election tests and the take-over benchmark (``python -m
clusterhealth_localenv.elector``): several of them on one Lease show who leads.

Each line is JSON with ``time.monotonic()`` (CLOCK_MONOTONIC is shared by all
processes on the machine, so tests can compare the lines of several processes).
SIGTERM is a graceful stop: the leader's work is cancelled and the lease released.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import signal
import sys
import time

from clusterhealth_core import election
from clusterhealth_core.kube import client as kube
from clusterhealth_core.kube import config


def emit(event: str, identity: str) -> None:
    """Print one JSON event line."""
    print(json.dumps({"event": event, "id": identity, "t": time.monotonic()}), flush=True)


async def main() -> int:
    """Campaign until SIGTERM; print JSON lines."""
    parser = argparse.ArgumentParser(prog="clusterhealth-elector")
    parser.add_argument("--kubeconfig", required=True)
    parser.add_argument("--lease", required=True)
    parser.add_argument("--identity", required=True)
    parser.add_argument("--lease-duration", type=float, default=15)
    parser.add_argument("--renew-deadline", type=float, default=10)
    parser.add_argument("--retry-period", type=float, default=2)
    args = parser.parse_args()
    cfg = election.ElectionConfig(
        lease_name=args.lease, lease_namespace="default", identity=args.identity,
        lease_duration=args.lease_duration, renew_deadline=args.renew_deadline,
        retry_period=args.retry_period,
    )
    api = kube.ApiClient(config.load_kubeconfig(args.kubeconfig))

    def on_change(leading: bool) -> None:
        emit("start" if leading else "stop", args.identity)

    elector = election.LeaderElector(api, cfg, on_change=on_change)

    async def work() -> None:
        await asyncio.Event().wait()

    task = asyncio.create_task(elector.run(work))
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGTERM, task.cancel)
    emit("ready", args.identity)
    with contextlib.suppress(asyncio.CancelledError):
        await task
    emit("exit", args.identity)
    await api.close()
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
