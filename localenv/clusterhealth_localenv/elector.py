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

:func:`grant_identities` gives each elector process its own ServiceAccount
(and a kubeconfig with a TokenRequest token), so that the API server's audit
log tells the processes apart by ``user.username``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import pathlib
import signal
import sys
import time
from collections.abc import Sequence

import yaml

from clusterhealth_core import clock as clocks
from clusterhealth_core import election, runner
from clusterhealth_core.kube import client as kube
from clusterhealth_core.kube import config, errors, resources

IDLE_INTERVAL = 3600.0
_RBAC = "rbac.authorization.k8s.io"
ROLES = resources.Resource(_RBAC, "v1", "roles", "Role", namespaced=True)
ROLE_BINDINGS = resources.Resource(_RBAC, "v1", "rolebindings", "RoleBinding", namespaced=True)
AUDIENCE = "https://kubernetes.default.svc"


def username(namespace: str, account: str) -> str:
    """The user name the API server (and its audit log) gives a ServiceAccount."""
    return f"system:serviceaccount:{namespace}:{account}"


async def grant_identities(
    api: kube.ApiClient, server_url: str, ca_file: pathlib.Path, namespace: str,
    lease: str, configmap: str, accounts: Sequence[str], directory: pathlib.Path,
    *, watch: bool = True,
) -> dict[str, pathlib.Path]:
    """One ServiceAccount and kubeconfig per elector; the RBAC the charts give, plus watch.

    The Role allows creating Leases, get/update(/watch unless ``watch`` is
    false) of ``lease`` and get/patch of ``configmap`` in ``namespace``
    (created if missing).  Returns each account's kubeconfig (a bearer token
    from the TokenRequest API).
    """
    with contextlib.suppress(errors.Conflict):
        await api.create(resources.NAMESPACES, {"metadata": {"name": namespace}})
    role = f"elector-{lease}" + ("" if watch else "-nowatch")
    lease_verbs = ["get", "update", "watch"] if watch else ["get", "update"]
    await api.create(ROLES, {
        "apiVersion": f"{_RBAC}/v1", "kind": "Role",
        "metadata": {"name": role, "namespace": namespace},
        "rules": [
            {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"],
             "verbs": ["create"]},
            {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"],
             "resourceNames": [lease], "verbs": lease_verbs},
            {"apiGroups": [""], "resources": ["configmaps"],
             "resourceNames": [configmap], "verbs": ["get", "patch"]},
        ],
    })
    await api.create(ROLE_BINDINGS, {
        "apiVersion": f"{_RBAC}/v1", "kind": "RoleBinding",
        "metadata": {"name": role, "namespace": namespace},
        "roleRef": {"apiGroup": _RBAC, "kind": "Role", "name": role},
        "subjects": [{"kind": "ServiceAccount", "name": a, "namespace": namespace}
                     for a in accounts],
    })
    kubeconfigs = {}
    for account in accounts:
        with contextlib.suppress(errors.Conflict):
            await api.create(resources.SERVICE_ACCOUNTS,
                             {"metadata": {"name": account, "namespace": namespace}})
        token = await service_account_token(api, namespace, account)
        path = directory / f"{namespace}-{account}.kubeconfig"
        path.write_text(yaml.safe_dump({
            "apiVersion": "v1", "kind": "Config", "current-context": account,
            "clusters": [{"name": "api", "cluster": {
                "server": server_url, "certificate-authority": str(ca_file)}}],
            "users": [{"name": account, "user": {"token": token}}],
            "contexts": [{"name": account, "context": {"cluster": "api", "user": account}}],
        }))
        kubeconfigs[account] = path
    return kubeconfigs


async def service_account_token(api: kube.ApiClient, namespace: str, account: str,
                                seconds: int = 3600) -> str:
    """A bearer token for ServiceAccount ``namespace/account`` (the TokenRequest API)."""
    answer = await api.request(
        "POST", resources.SERVICE_ACCOUNTS.path(account, namespace=namespace,
                                                subresource="token"),
        body={"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
              "spec": {"audiences": [AUDIENCE], "expirationSeconds": seconds}})
    return str(answer["status"]["token"])


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
