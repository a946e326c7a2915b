"""Agent benchmarks (issue 3): detection latency, footprint, and the client's import cost.

* Detection latency: a real dnsmasq is stopped (the fault) and the time until
  the control plane's Cluster shows ``ServiceDomainNameResolutionReady=False``
  is measured through a watch, with period 0.5 s and thresholds 2 s.  The
  figure is the overhead beyond threshold + period.  Recovery is measured the
  same way.
* Footprint: one agent (the leader, which does the most) at the default
  period: RSS sampled over the window, CPU from /proc/<pid>/stat over it.
* Import cost: RSS of a fresh interpreter after importing the kube client.

Run: ``python -m bench.agent [--trials N] [--window S] [--markdown docs/benchmarks.md]``.
"""

from __future__ import annotations

import argparse
import asyncio
import pathlib
import random
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Sequence

from bench import report, runtime, takeover, usage
from clusterhealth_core.kube import client as kube
from clusterhealth_core.kube import resources
from clusterhealth_localenv import dns, environment

SECTION_TITLE = "## Detection agent (issue 3)"
MEMBER = "member1"
CONDITION = "ServiceDomainNameResolutionReady"
PERIOD, THRESHOLD = 0.5, 2.0
FAST = ["--detect-period", "0.5s", "--detect-failure-threshold", "2s",
        "--detect-success-threshold", "2s", "--stale-threshold", "5s",
        "--node-heartbeat-period", "1s", "--report-period", "10s"]
RECORDS = {"kubernetes.default.svc.cluster.local": "10.96.0.1"}


def _rss_mib(pid: int) -> float:
    for line in pathlib.Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no VmRSS for {pid}")


async def _make_node(env: environment.LocalEnvironment) -> str:
    name = f"bench-{uuid.uuid4().hex[:6]}"
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    async with env.client(MEMBER) as member:
        await member.create(resources.NODES, {"metadata": {"name": name}})
        await member.patch(resources.NODES, name, {"status": {"conditions": [{
            "type": "Ready", "status": "True", "reason": "Bench", "message": "bench node",
            "lastHeartbeatTime": now, "lastTransitionTime": now}]}},
            subresource="status", patch_type="strategic")
    return name


def _start_agent(env: environment.LocalEnvironment, node: str, server: dns.DnsServer,
                 extra: Sequence[str], log: pathlib.Path,
                 module: str = "clusterhealth_agent") -> subprocess.Popen[bytes]:
    host, port = server.address
    argv = [runtime.python(), "-m", module,
            "--kubeconfig", str(env.kubeconfig(MEMBER)),
            "--karmada-kubeconfig", str(env.kubeconfig()),
            "--cluster-name", MEMBER, "--host-name", node,
            "--nameserver", f"{host}:{port}", "--bind-address", "127.0.0.1",
            "--healthz-port", str(environment.free_port("127.0.0.1")),
            "--leader-elect-resource-namespace", "default",
            "--leader-elect-resource-name", f"bench-{node}", *extra]
    with log.open("ab") as out:
        return subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT,
                                env=runtime.child_env())


async def _condition_status(cp: kube.ApiClient) -> str | None:
    obj = await cp.get(resources.CLUSTERS, MEMBER)
    for cond in (obj.get("status") or {}).get("conditions") or []:
        if cond["type"] == CONDITION:
            return str(cond["status"])
    return None


async def _wait_status(cp: kube.ApiClient, wanted: str, timeout: float = 30) -> float:
    """Follow the Cluster with a watch; return the monotonic time ``wanted`` was seen."""
    listing = await cp.list(resources.CLUSTERS, field_selector=f"metadata.name={MEMBER}")
    if await _condition_status(cp) == wanted:
        return time.monotonic()
    async with asyncio.timeout(timeout):
        async for event in cp.watch(resources.CLUSTERS,
                                    resource_version=listing["metadata"]["resourceVersion"]):
            if event.type == "BOOKMARK":
                continue  # only metadata.resourceVersion: no name, no status
            for cond in (event.object.get("status") or {}).get("conditions") or []:
                if (event.object["metadata"]["name"] == MEMBER and cond["type"] == CONDITION
                        and cond["status"] == wanted):
                    return time.monotonic()
    raise TimeoutError(f"{CONDITION} never became {wanted}")


async def latency_samples(env: environment.LocalEnvironment, trials: int, tmp: pathlib.Path
                          ) -> tuple[list[float], list[float]]:
    """Detection and recovery overheads (s) beyond threshold + period, ``trials`` of each.

    One node, one real dnsmasq and one agent (started for the block, stopped after).
    """
    node = await _make_node(env)
    server = dns.DnsServer("127.0.0.1", records=RECORDS, log_dir=tmp)
    await asyncio.to_thread(server.start)
    agent = _start_agent(env, node, server, FAST, tmp / f"latency-agent-{node}.log")
    detect: list[float] = []
    recover: list[float] = []
    try:
        async with env.client() as cp:
            await _wait_status(cp, "True", timeout=60)
            rng = random.Random(node)  # phases differ between blocks, repeatable per node
            for trial in range(trials):
                # a random phase between the fault and the probe rounds
                await asyncio.sleep(PERIOD * 2 + rng.uniform(0, PERIOD))
                watcher = asyncio.create_task(_wait_status(cp, "False"))
                await asyncio.sleep(0.3)  # the watch is open before the fault
                fault = time.monotonic()
                await asyncio.to_thread(server.stop)
                detect.append(await watcher - fault - (THRESHOLD + PERIOD))
                await asyncio.sleep(PERIOD * 2 + rng.uniform(0, PERIOD))
                watcher = asyncio.create_task(_wait_status(cp, "True"))
                await asyncio.sleep(0.3)
                fixed = time.monotonic()
                await asyncio.to_thread(server.start)
                recover.append(await watcher - fixed - (THRESHOLD + PERIOD))
                takeover.progress(f"latency trial {trial + 1}/{trials}: "
                                  f"detect +{detect[-1]:.3f}s recover +{recover[-1]:.3f}s")
    finally:
        agent.terminate()
        agent.wait(15)
        await asyncio.to_thread(server.stop)
        # A node left behind would go stale and hold a later block's condition off True.
        async with env.client(MEMBER) as member:
            await member.delete(resources.NODES, node)
    return detect, recover


DETECTION = "detection overhead beyond threshold + period (0.5 s / 2 s)"
RECOVERY = "recovery overhead beyond threshold + period (0.5 s / 2 s)"


async def measure_latency(env: environment.LocalEnvironment, trials: int, tmp: pathlib.Path
                          ) -> list[report.Figure]:
    """The detection and recovery figures of ``bench.agent``."""
    detect, recover = await latency_samples(env, trials, tmp)
    verdict = "pass" if max(detect) <= 0.5 else "FAIL"
    return [
        report.Figure(DETECTION, tuple(detect), "s", "<= 0.5 s max", verdict),
        report.Figure(RECOVERY, tuple(recover), "s", "-", "recorded"),
    ]


TRANSPORTS = {
    "httpx": "clusterhealth_agent",
    "aiohttp": "bench.agent_aiohttp",
}
"""The agent as shipped (httpx) and the same agent on aiohttp (decision 0002)."""


async def _footprint_once(env: environment.LocalEnvironment, window: float,
                          tmp: pathlib.Path, module: str) -> tuple[list[float], float]:
    node = await _make_node(env)
    server = dns.DnsServer("127.0.0.1", records=RECORDS, log_dir=tmp)
    await asyncio.to_thread(server.start)
    agent = _start_agent(env, node, server, [], tmp / f"footprint-{module}.log", module)
    try:
        await asyncio.sleep(20)  # start-up, election, first rounds and reports
        rss: list[float] = []
        cpu_start, wall_start = usage.process_cpu_seconds(agent.pid), time.monotonic()
        while time.monotonic() - wall_start < window:
            rss.append(_rss_mib(agent.pid))
            await asyncio.sleep(5)
        used = usage.process_cpu_seconds(agent.pid) - cpu_start
        cpu = used / (time.monotonic() - wall_start) * 100
        assert agent.poll() is None, "the agent died during the window"
    finally:
        agent.terminate()
        agent.wait(15)
        await asyncio.to_thread(server.stop)
    return rss, cpu


async def measure_footprint(env: environment.LocalEnvironment, window: float,
                            tmp: pathlib.Path, rounds: int = 2) -> list[report.Figure]:
    """Each transport in turn (alternating, ``rounds`` times), leader at default settings."""
    rss: dict[str, list[float]] = {name: [] for name in TRANSPORTS}
    cpu: dict[str, list[float]] = {name: [] for name in TRANSPORTS}
    for round_ in range(rounds):
        for name, module in TRANSPORTS.items():
            takeover.progress(f"footprint round {round_ + 1}/{rounds}: {name}")
            samples, used = await _footprint_once(env, window, tmp, module)
            rss[name] += samples
            cpu[name].append(used)
    limit = 40 * 1e6 / 2**20
    figures = []
    for name in TRANSPORTS:
        shipped = " (shipped)" if name == "httpx" else ""
        figures += [
            report.Figure(f"agent RSS at steady state, {name}{shipped} (leader, 5 s period)",
                          tuple(rss[name]), "MiB", "<= 40 MB",
                          "pass" if max(rss[name]) <= limit else "FAIL"),
            report.Figure(f"agent CPU per {window:.0f} s window, {name}{shipped}",
                          tuple(cpu[name]), "%", "<= 1 % of a core",
                          "pass" if max(cpu[name]) <= 1 else "FAIL"),
        ]
    ratio = statistics.median(rss["aiohttp"]) / statistics.median(rss["httpx"])
    figures.append(report.Figure("agent RSS ratio aiohttp / httpx (medians, same run)",
                                 (ratio,), "x"))
    return figures


def measure_imports(runs: int = 5) -> list[report.Figure]:
    code = ("import importlib,sys\n"
            "for m in sys.argv[1:]: importlib.import_module(m)\n"
            "print([l for l in open('/proc/self/status') if l.startswith('VmRSS')][0].split()[1])")
    figures = []
    for label, modules in (("bare interpreter", []),
                           ("asyncio + ssl", ["asyncio", "ssl"]),
                           ("httpx", ["httpx"]),
                           ("aiohttp", ["aiohttp"]),
                           ("kube client (clusterhealth_core.kube.client)",
                            ["clusterhealth_core.kube.client"]),
                           ("whole agent (clusterhealth_agent.app)", ["clusterhealth_agent.app"])):
        samples = tuple(
            int(subprocess.run([runtime.python(), "-c", code, *modules], capture_output=True,
                               text=True, check=True, env=runtime.child_env()).stdout) / 1024
            for _ in range(runs))
        figures.append(report.Figure(f"RSS after import: {label}", samples, "MiB"))
    return figures


async def measure(trials: int, window: float, rounds: int) -> list[report.Figure]:
    with tempfile.TemporaryDirectory(prefix="clusterhealth-bench-") as tmp:
        async with environment.LocalEnvironment(
                environment.EnvironmentConfig(members=(MEMBER,))) as env:
            figures = measure_imports()
            takeover.progress("detection latency")
            figures += await measure_latency(env, trials, pathlib.Path(tmp))
            takeover.progress(f"footprint over {window:.0f} s")
            figures += await measure_footprint(env, window, pathlib.Path(tmp), rounds)
    return figures


def main(argv: Sequence[str] | None = None) -> int:
    """Measure, print the table, optionally update docs/benchmarks.md."""
    args = list(sys.argv[1:] if argv is None else argv)
    parser = argparse.ArgumentParser(prog="python -m bench.agent")
    parser.add_argument("--trials", type=int, default=20)
    parser.add_argument("--window", type=float, default=60.0, help="footprint window (s)")
    parser.add_argument("--rounds", type=int, default=2,
                        help="footprint rounds per transport (alternating)")
    parser.add_argument("--markdown", type=pathlib.Path, default=None)
    options = parser.parse_args(args)
    figures = asyncio.run(measure(options.trials, options.window, options.rounds))
    print(report.text_table(figures))
    if options.markdown is not None:
        notes = [
            "Latency: the fault is stopping the node's dnsmasq (recovery: starting it); the "
            "time is taken when a watch on the control plane delivers the Cluster with the new "
            "status, minus threshold + period (2.5 s). Negative values: the fault happened "
            "just before a probe round.",
            "Footprint: one agent on one node, leader (it probes, publishes its Node "
            "condition and reports); RSS sampled every 5 s; CPU = (utime+stime) / wall time. "
            "The same agent runs on each HTTP library in turn (httpx as shipped; aiohttp "
            "through clusterhealth_core.kube.aiohttp_transport, swapped in by "
            "bench/agent_aiohttp.py), alternating, in one environment. Agents "
            "and import figures run in a virtualenv holding only the runtime dependencies "
            "(bench/runtime.py), as the image does.",
        ]
        command = report.command_line("bench.agent", args)
        body = report.section(SECTION_TITLE, figures, notes, command)
        report.write_section(options.markdown, SECTION_TITLE, body)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
