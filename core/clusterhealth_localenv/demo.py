"""``make demo``: the local control plane and members, and a live view of their Clusters.

It starts the environment, prints which clusters exist and their conditions,
then follows every change of a Cluster (conditions, remedy actions, taints)
and prints it as a one-line diff until Ctrl-C or ``--duration`` runs out.
Components are started as processes as they come to exist (none import this).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime
import signal
import sys
from collections.abc import Mapping, Sequence
from typing import Any

from clusterhealth_core.kube import client as kube
from clusterhealth_core.kube import errors, resources
from clusterhealth_localenv import environment


def _stamp() -> str:
    return datetime.datetime.now().strftime("%H:%M:%S")


def say(text: str) -> None:
    """Print one line of the demo's story."""
    print(f"[{_stamp()}] {text}", flush=True)


def summary(cluster: Mapping[str, Any]) -> dict[str, str]:
    """What a person wants to see of a Cluster: conditions, actions, taints."""
    st = cluster.get("status") or {}
    view = {f"condition {c['type']}": f"{c['status']} ({c.get('reason', '')})"
            for c in st.get("conditions") or []}
    view["remedyActions"] = ",".join(st.get("remedyActions") or []) or "-"
    taints = (cluster.get("spec") or {}).get("taints") or []
    view["taints"] = ",".join(f"{t['key']}:{t['effect']}" for t in taints) or "-"
    return view


def diff(before: Mapping[str, str], after: Mapping[str, str]) -> list[str]:
    """Human-readable changes between two summaries."""
    lines = []
    for key in sorted(set(before) | set(after)):
        old, new = before.get(key, "absent"), after.get(key, "absent")
        if old != new:
            lines.append(f"{key}: {old} -> {new}")
    return lines


async def print_table(api: kube.ApiClient) -> None:
    """Print the Clusters as ``kubectl get clusters`` would (server-side Table)."""
    table = await api.table(resources.CLUSTERS)
    columns = [c["name"] for c in table["columnDefinitions"] if c.get("priority", 0) == 0]
    rows = [[str(cell if cell not in (None, "") else "<none>") for cell in row["cells"]]
            for row in table["rows"]]
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h)
              for i, h in enumerate(columns)]
    print("  " + "  ".join(h.upper().ljust(w) for h, w in zip(columns, widths, strict=False)))
    for row in rows:
        print("  " + "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=False)))


async def follow(api: kube.ApiClient) -> None:
    """Print every change of every Cluster, re-listing when the watch ends."""
    known: dict[str, dict[str, str]] = {}
    while True:
        listing = await api.list(resources.CLUSTERS)
        for item in listing["items"]:
            known.setdefault(item["metadata"]["name"], summary(item))
        try:
            async for event in api.watch(
                resources.CLUSTERS, resource_version=listing["metadata"]["resourceVersion"]
            ):
                if event.type == "BOOKMARK":
                    continue
                name = event.object["metadata"]["name"]
                if event.type == "DELETED":
                    say(f"cluster {name} deleted")
                    known.pop(name, None)
                    continue
                now = summary(event.object)
                for line in diff(known.get(name, {}), now):
                    say(f"cluster {name}: {line}")
                known[name] = now
        except (errors.Gone, errors.Unreachable):
            await asyncio.sleep(1)


async def run(args: argparse.Namespace) -> int:
    """Start the environment, show it, follow it."""
    members = [f"member{i + 1}" for i in range(args.members)]
    say(f"starting a control plane and {len(members)} member clusters on real kube-apiservers")
    env = environment.LocalEnvironment(environment.EnvironmentConfig(members=members))
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    async with env:
        for name, server in env.servers.items():
            say(f"  {name:<14} {server.url}   kubeconfig {server.kubeconfig}")
        async with env.client() as api:
            say("Clusters registered in the control plane:")
            await print_table(api)
            say("following Cluster changes (Ctrl-C to stop)")
            follower = asyncio.create_task(follow(api))
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), timeout=args.duration)
            follower.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await follower
            say("final state:")
            await print_table(api)
    say("environment stopped")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``python -m clusterhealth_localenv.demo``."""
    parser = argparse.ArgumentParser(prog="clusterhealth-demo", description=__doc__)
    parser.add_argument("--members", type=int, default=2, help="number of member clusters")
    parser.add_argument("--duration", type=float, default=None,
                        help="stop after this many seconds (default: until Ctrl-C)")
    args = parser.parse_args(argv)
    try:
        return asyncio.run(run(args))
    except environment.StartError as exc:
        print(f"clusterhealth-demo: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    raise SystemExit(main())
