"""Run the kopf prototype: ``python -m bench.kopf_remedy --kubeconfig PATH``.

Settings are kopf's own (``kopf.OperatorSettings``), chosen as a kopf user
running this in production would: watch requests bounded like ours (300 s),
no CRD scanning (the two resources are fixed), quiet keep-alives, and Event
posting bounded to 4 workers (kopf's default of one poster per object peaked
at about 155 MiB instead of about 115 MiB with 1,000 Events at once).
kopf's per-object workers keep its defaults: a ``queueing.worker_limit``
below the number of objects never finishes indexing (measured: no handler
ran in 300 s with a limit of 32 and 1,100 objects).  Without
``--peering`` the operator is standalone (no leader election, as ours runs
with ``--leader-elect false`` in the benchmark); with it, kopf's peering
(``ClusterKopfPeering`` NAME, mandatory) pauses every replica that sees a peer
of higher or equal priority.
"""

from __future__ import annotations

import argparse
import logging
import os
import pathlib
from collections.abc import Sequence

import kopf

from bench.kopf_remedy import handlers


def configure(settings: kopf.OperatorSettings, options: argparse.Namespace) -> None:
    """kopf's settings for this controller."""
    settings.watching.server_timeout = 300  # like our informers' watch requests
    settings.watching.connect_timeout = 10
    settings.networking.connect_timeout = 10
    settings.networking.request_timeout = 30
    settings.scanning.disabled = True  # fixed resources: no CRD/namespace watch
    settings.posting.enabled = options.events
    settings.posting.reporting_component = "kopf-remedy"
    if options.chunk_size:
        settings.watching.chunk_size = options.chunk_size
    settings.queueing.idle_timeout = options.queue_idle
    if options.queue_workers:
        settings.queueing.worker_limit = options.queue_workers
    if options.posting_workers:
        settings.posting.worker_limit = options.posting_workers
        settings.posting.idle_timeout = options.posting_idle
    settings.peering.lifetime = options.peering_lifetime
    settings.peering.stealth = True


def main(argv: Sequence[str] | None = None) -> int:
    """Parse the flags and run the operator until SIGTERM/SIGINT."""
    parser = argparse.ArgumentParser(prog="python -m bench.kopf_remedy")
    parser.add_argument("--kubeconfig", type=pathlib.Path, required=True)
    parser.add_argument("--workers", type=int, default=4,
                        help="concurrent Cluster writes after a Remedy changed")
    parser.add_argument("--peering", default=None,
                        help="ClusterKopfPeering to elect through (default: standalone)")
    parser.add_argument("--priority", type=int, default=0, help="peering priority")
    parser.add_argument("--peering-lifetime", type=int, default=60,
                        help="seconds a silent peer is still taken as alive (kopf: 60)")
    parser.add_argument("--liveness", default=None,
                        help="kopf's liveness endpoint, e.g. http://127.0.0.1:8080/healthz")
    parser.add_argument("--no-events", dest="events", action="store_false",
                        help="do not post Events for action changes")
    parser.add_argument("--posting-workers", type=int, default=4,
                        help="Event-posting workers at once (0: kopf's default, one per "
                             "object, unbounded: about 40 MiB more at 1,000 Events)")
    parser.add_argument("--posting-idle", type=float, default=0.05,
                        help="seconds an idle Event-posting worker stays (kopf: 1; with a "
                             "worker limit, a long idle time holds the slots)")
    parser.add_argument("--queue-idle", type=float, default=5.0,
                        help="seconds an idle per-object worker stays (kopf: 5)")
    parser.add_argument("--queue-workers", type=int, default=0,
                        help="per-object workers at once (0: kopf's default, unlimited; a "
                             "limit below the number of objects deadlocks with indexes)")
    parser.add_argument("--chunk-size", type=int, default=0,
                        help="page size of the initial lists (0: kopf's default, one page)")
    parser.add_argument("--log-level", default="INFO")
    options = parser.parse_args(argv)
    logging.basicConfig(level=options.log_level.upper(),
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    os.environ["KUBECONFIG"] = str(options.kubeconfig)  # read by kopf.login_with_kubeconfig
    settings = kopf.OperatorSettings()
    configure(settings, options)
    shared = handlers.Shared(settings=settings, workers=options.workers, events=options.events)
    kopf.run(
        registry=handlers.make_registry(), settings=settings, memo=shared, clusterwide=True,
        standalone=options.peering is None, peering_name=options.peering,
        priority=options.priority, liveness_endpoint=options.liveness,
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
