"""A process that campaigns for a Lease and prints when it starts/stops leading.

Used by the election tests and benchmarks (``python -m
clusterhealth_localenv.elector``): several of them on one Lease show who leads.

Each line is JSON with ``time.monotonic()`` (CLOCK_MONOTONIC is shared by all
processes on the machine, so tests can compare the lines of several processes).
SIGTERM is a graceful stop: the leader's work is cancelled and the lease released.

The leader's work runs as a component's does (``runner.run_elected``): it
writes through the elector's fenced client, and work that does not stop after
leadership is lost ends the process with ``runner.EXIT_WORK_STUCK``.  With
``--write-configmap`` the work patches that ConfigMap every
``--write-interval`` seconds (a ``wrote`` line after each write, ``refused``
when the fence refused one); with ``--ignore-cancel`` it swallows its
cancellation (an ``ignored-cancel`` line) to show the bounded stop.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import signal
import sys
import time

from clusterhealth_core import clock as clocks
from clusterhealth_core import election, runner
from clusterhealth_core.kube import client as kube
from clusterhealth_core.kube import config, errors, resources

IDLE_INTERVAL = 3600.0


def emit(event: str, identity: str, **extra: object) -> None:
    """Print one JSON event line."""
    print(json.dumps({"event": event, "id": identity, "t": time.monotonic(), **extra}),
          flush=True)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The command line."""
    parser = argparse.ArgumentParser(prog="clusterhealth-elector")
    parser.add_argument("--kubeconfig", required=True)
    parser.add_argument("--lease", required=True)
    parser.add_argument("--namespace", default="default", help="of the Lease and ConfigMap")
    parser.add_argument("--identity", required=True)
    parser.add_argument("--lease-duration", type=float, default=15)
    parser.add_argument("--renew-deadline", type=float, default=10)
    parser.add_argument("--retry-period", type=float, default=2)
    parser.add_argument("--stop-timeout", type=float, default=None)
    parser.add_argument("--write-configmap", default="",
                        help="while leading, patch this ConfigMap through the fenced client")
    parser.add_argument("--write-interval", type=float, default=0.1)
    parser.add_argument("--ignore-cancel", action="store_true",
                        help="the leader's work ignores its cancellation")
    return parser.parse_args(argv)


async def main() -> int:
    """Campaign until SIGTERM; print JSON lines."""
    args = parse_args()
    cfg = election.ElectionConfig(
        lease_name=args.lease, lease_namespace=args.namespace, identity=args.identity,
        lease_duration=args.lease_duration, renew_deadline=args.renew_deadline,
        retry_period=args.retry_period, stop_timeout=args.stop_timeout,
    )
    api = kube.ApiClient(config.load_kubeconfig(args.kubeconfig),
                         user_agent=f"clusterhealth-elector/{args.identity}")

    def on_change(leading: bool) -> None:
        emit("start" if leading else "stop", args.identity)

    async def write_once(fenced: kube.ApiClient, count: int) -> None:
        try:
            await fenced.patch(resources.CONFIGMAPS, args.write_configmap,
                               {"data": {"writer": args.identity, "count": str(count)}},
                               namespace=args.namespace)
        except errors.NotLeader as exc:
            emit("refused", args.identity, reason=str(exc))
        except (errors.KubeError, OSError) as exc:
            emit("write-failed", args.identity, reason=str(exc))
        else:
            emit("wrote", args.identity, count=count)

    async def work(fenced: kube.ApiClient) -> None:
        count = 0
        interval = args.write_interval if args.write_configmap else IDLE_INTERVAL
        while True:
            try:
                if args.write_configmap:
                    count += 1
                    await write_once(fenced, count)
                await asyncio.sleep(interval)
            except asyncio.CancelledError:
                if not args.ignore_cancel:
                    raise
                emit("ignored-cancel", args.identity)

    task = asyncio.create_task(runner.run_elected(api, True, cfg, work, on_change,
                                                  clocks.Clock()))
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
