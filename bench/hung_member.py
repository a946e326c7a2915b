"""One hung member among ten healthy ones: how long do the others' Works take to apply?

A member that accepts connections and then answers a byte a second
(``clusterhealth_localenv.hung.TricklingServer``, a real TCP server on
loopback speaking TLS) is registered beside ten real members (kube-apiservers
of ``clusterhealth_localenv``).  The controller manager runs as shipped
(``python -m clusterhealth_controlplane --controllers execution``, default
flags: 4 workers, a 30 s deadline per member request, 2 requests at once per
member); only the execution controller runs, so nothing marks the hung
member not Ready and its Works are tried again and again: the worst case.

Each round creates 3 Works for each healthy member (30 ConfigMaps) and times
until all 30 report ``Applied=True``.  Rounds alternate between "alone" (no
Work for the hung member) and "beside the hung member" (8 Works for it, twice
the workers, created first so they reach the workers first).  A last round
runs a second controller manager with the limits lifted
(``--member-request-timeout 1h --member-concurrent-requests 64``: what every
member request had before issue 19), for contrast.

Run from the repository root: ``python -m bench.hung_member [--rounds 5]
[--markdown docs/benchmarks.md]``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import pathlib
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Sequence
from typing import Any

from bench import remedy, report, runtime, takeover
from clusterhealth_core import members
from clusterhealth_core.kube import client as kube
from clusterhealth_core.kube import errors, resources
from clusterhealth_localenv import environment, hung

SECTION_TITLE = "## One hung member among ten (issue 19)"
HEALTHY = tuple(f"member{i}" for i in range(1, 11))
STUCK = "hung"
PER_MEMBER = 3
HUNG_WORKS = 8
UNLIMITED = ("--member-request-timeout", "1h", "--member-concurrent-requests", "64")


def execution_namespace(cluster: str) -> str:
    """Where the Works for ``cluster`` live (Karmada's ``karmada-es-<cluster>``)."""
    return f"karmada-es-{cluster}"


def work(name: str, cluster: str) -> dict[str, Any]:
    """A Work carrying one ConfigMap."""
    return {"apiVersion": resources.WORKS.api_version, "kind": "Work",
            "metadata": {"name": name, "namespace": execution_namespace(cluster)},
            "spec": {"workload": {"manifests": [{
                "apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": name, "namespace": "default"}, "data": {"a": "1"}}]}}}


def manager(env: environment.LocalEnvironment, log: pathlib.Path,
            extra: Sequence[str] = ()) -> subprocess.Popen[bytes]:
    """The controller manager as shipped, with the execution controller only."""
    argv = [runtime.python(), "-m", "clusterhealth_controlplane", "--kubeconfig",
            str(env.kubeconfig()), "--bind-address", "127.0.0.1", "--leader-elect", "false",
            "--healthz-port", str(environment.free_port("127.0.0.1")),
            "--controllers", "execution", *extra]
    with log.open("ab") as out:
        return subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT,
                                env=takeover.child_env())


def applied(obj: dict[str, Any]) -> str | None:
    """The status of the Work's Applied condition, if any."""
    for condition in (obj.get("status") or {}).get("conditions") or []:
        if condition.get("type") == "Applied":
            return str(condition.get("status"))
    return None


async def all_applied(cp: kube.ApiClient, works: list[tuple[str, str]], until: float) -> bool:
    """Whether every Work reports Applied=True before ``until`` (``time.monotonic``)."""
    waiting = set(works)
    while waiting:
        if time.monotonic() > until:
            return False
        for cluster, name in sorted(waiting):
            obj = await cp.get(resources.WORKS, name, namespace=execution_namespace(cluster))
            if applied(obj) == "True":
                waiting.discard((cluster, name))
        if waiting:
            await asyncio.sleep(0.05)
    return True


async def remove(cp: kube.ApiClient, works: list[tuple[str, str]]) -> None:
    """Delete Works without waiting for their finalizers (the hung member's never go)."""
    for cluster, name in works:
        namespace = execution_namespace(cluster)
        with contextlib.suppress(errors.NotFound):
            await cp.patch(resources.WORKS, name, {"metadata": {"finalizers": None}},
                           namespace=namespace)
        await cp.delete(resources.WORKS, name, namespace=namespace, missing_ok=True)


async def one_round(cp: kube.ApiClient, members: dict[str, kube.ApiClient], beside: bool,
                    timeout: float) -> tuple[float | None, list[str]]:
    """Seconds for the healthy members' Works, and the hung member's Works' messages."""
    tag = uuid.uuid4().hex[:6]
    stuck = [(STUCK, f"stuck-{tag}-{i}") for i in range(HUNG_WORKS)] if beside else []
    healthy = [(m, f"ok-{tag}-{m}-{i}") for m in HEALTHY for i in range(PER_MEMBER)]
    for cluster, name in stuck:
        await cp.create(resources.WORKS, work(name, cluster))
    began = time.monotonic()  # the creates are in the figure
    for cluster, name in healthy:
        await cp.create(resources.WORKS, work(name, cluster))
    done = await all_applied(cp, healthy, began + timeout)
    took = time.monotonic() - began if done else None
    messages = []
    for cluster, name in stuck:
        obj = await cp.get(resources.WORKS, name, namespace=execution_namespace(cluster))
        for condition in (obj.get("status") or {}).get("conditions") or []:
            if condition.get("type") == "Applied":
                messages.append(str(condition.get("message")))
    await remove(cp, stuck + healthy)
    for cluster, name in healthy:
        await members[cluster].delete(resources.CONFIGMAPS, name, namespace="default",
                                      missing_ok=True)
    return took, messages


async def measure(rounds: int, timeout: float, tmp: pathlib.Path
                  ) -> tuple[list[float], list[float], float | None, list[str]]:
    """Alone and beside-the-hung-member times, the unlimited round, the hung Works' messages."""
    config = environment.EnvironmentConfig(members=HEALTHY)
    takeover.progress(f"starting {len(HEALTHY)} members")
    async with environment.LocalEnvironment(config) as env, \
            hung.TricklingServer(env.ca, interval=1.0) as member:
        async with env.client() as cp:
            await member.register(cp, STUCK)
            for cluster in (*HEALTHY, STUCK):
                with contextlib.suppress(errors.Conflict):
                    await cp.create(resources.NAMESPACES,
                                    {"metadata": {"name": execution_namespace(cluster)}})
        clients = {name: env.client(name) for name in HEALTHY}
        alone: list[float] = []
        beside: list[float] = []
        messages: list[str] = []
        proc = manager(env, tmp / "manager.log")
        try:
            async with env.client() as cp:
                takeover.progress("warm-up round (not recorded)")
                await one_round(cp, clients, False, timeout)
                for index in range(rounds):
                    for is_beside, into in ((False, alone), (True, beside)):
                        took, said = await one_round(cp, clients, is_beside, timeout)
                        if took is None:
                            raise RuntimeError(f"round {index}: the healthy Works did not apply "
                                               f"within {timeout:g}s")
                        into.append(took)
                        messages += said
                        takeover.progress(f"round {index + 1}/{rounds} "
                                          f"{'beside' if is_beside else 'alone '}: {took:.2f} s")
            remedy.stop(proc)
            takeover.progress("the same, with the limits lifted (one round)")
            proc = manager(env, tmp / "unlimited.log", UNLIMITED)
            async with env.client() as cp:
                await one_round(cp, clients, False, timeout)  # warm-up
                lifted, _ = await one_round(cp, clients, True, timeout)
        finally:
            remedy.stop(proc)
            for api in clients.values():
                await api.close()
    return alone, beside, lifted, messages


def main(argv: Sequence[str] | None = None) -> int:
    """Measure, print the table, optionally update the Markdown section."""
    args = list(sys.argv[1:] if argv is None else argv)
    parser = argparse.ArgumentParser(prog="python -m bench.hung_member", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--timeout", type=float, default=90.0,
                        help="seconds a round's healthy Works may take")
    parser.add_argument("--markdown", type=pathlib.Path)
    options = parser.parse_args(args)
    if options.rounds < 1:
        parser.error("--rounds must be >= 1")
    with tempfile.TemporaryDirectory(prefix="clusterhealth-bench-") as tmp:
        alone, beside, lifted, messages = asyncio.run(
            measure(options.rounds, options.timeout, pathlib.Path(tmp)))
    ratios = tuple(b / a for a, b in zip(alone, beside, strict=True))
    figures = [
        report.Figure("30 Works in 10 healthy members applied, alone", tuple(alone), "s"),
        report.Figure(f"the same beside a hung member with {HUNG_WORKS} Works", tuple(beside),
                      "s"),
        report.Figure("ratio beside / alone (same round pair)", ratios, "x"),
    ]
    print(report.text_table(figures))
    deadline = sum("request deadline" in m for m in messages)
    saturated = sum("at once" in m for m in messages)
    lifted_text = ("did not apply within the round's timeout" if lifted is None
                   else f"applied after {lifted:.1f} s")
    print(f"hung member's Works: {len(messages)} Applied=False ({deadline} naming the request "
          f"deadline, {saturated} the limit of requests at once); limits lifted: {lifted_text}")
    if options.markdown is not None:
        notes = [
            f"{len(HEALTHY)} members are kube-apiservers of the local environment; the hung "
            "member is a TCP server on loopback that completes TLS, reads the request and "
            "answers one byte a second. The controller manager runs as a process with its "
            "default flags and `--controllers execution` (nothing marks the hung member not "
            "Ready, so its Works are tried again and again).",
            f"Each round: {HUNG_WORKS} Works for the hung member (beside rounds only, created "
            f"first), then {PER_MEMBER} for each healthy member; timed from the first healthy "
            "Work created until all 30 report Applied=True. Rounds alternate alone / beside; "
            "each beside round starts a fresh hang (its Works are new), the worst case: the "
            "first requests to the hung member hold its 2 slots for the 30 s deadline, the "
            "next ones wait for a slot until those have been stuck for "
            f"{members.STALL_AFTER:g} s, then fail at once.",
            f"Hung member's Works after the rounds: {len(messages)} with Applied=False, "
            f"{deadline} naming the request deadline, {saturated} the limit of requests at once.",
            f"Limits lifted (`{' '.join(UNLIMITED)}`, one round): the healthy Works "
            f"{lifted_text} ({options.timeout:g} s): every worker waits on the hung member.",
        ]
        command = report.command_line("bench.hung_member", args)
        report.write_section(options.markdown, SECTION_TITLE,
                             report.section(SECTION_TITLE, figures, notes, command))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
