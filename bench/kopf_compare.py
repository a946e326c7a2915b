"""Our Remedy controller against the kopf prototype, on one API server (issue 8, section 7).

Both implementations run the workload of ``bench/remedy.py`` (its phases,
not a copy) on the same real ``LocalEnvironment``, alternating so that the
noise of the shared machine hits both:

* reaction latency: ``--blocks`` blocks per implementation of
  ``--flips``/``--blocks`` condition flips each, in the order A B B A ...;
* scale: ``--rounds`` starts per implementation on one set of 1,000 Clusters
  and 100 Remedies, each from the same reset state, converge after start,
  then ``--changes`` edits of the Remedy covering every cluster; peak RSS;
* leader election: ``--takeover-trials`` per signal and implementation, two
  replicas, the leader killed (``SIGKILL``) or stopped (``SIGTERM``): the
  time from the signal until the other replica has reacted to a condition
  flip written right after it; and two replicas started together with equal
  standing (ours: same Lease; kopf: same priority): does one of them act?

The table gives each implementation's median with min and max, the ratio
ours/kopf measured in this run, and the verdict against the figures kopf must
reach to be adopted for the control-plane controllers (1,000-cluster
convergence < 10 s, reaction p99 at most Karmada's 15.3 ms, peak RSS at most
Karmada's 55.1 MiB; see docs/decisions/0003-kopf.md).

Run: ``python -m bench.kopf_compare [--flips N] [--blocks N] [--clusters N]
[--remedies N] [--rounds N] [--changes N] [--takeover-trials N] [--markdown PATH]``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import importlib.util
import pathlib
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Sequence

import yaml

from bench import remedy, remedy_workload, report, runtime, takeover
from clusterhealth_core.kube import client as kube
from clusterhealth_core.kube import errors, resources
from clusterhealth_localenv import environment

SECTION_TITLE = "## kopf comparison (issue 8)"
CONVERGE_TARGET_S = 10.0
KARMADA_P99_MS = 15.3
KARMADA_RSS_MIB = 55.1
PEERING_CRDS = pathlib.Path(__file__).resolve().parent / "kopf_remedy" / "peering.yaml"
CLUSTER_PEERINGS = resources.Resource("kopf.dev", "v1", "clusterkopfpeerings",
                                      "ClusterKopfPeering", namespaced=False)
KOPF_LIFETIME = 60
"""kopf's default peering lifetime (seconds), used as is."""
LEASE_NAMESPACE = "default"


# --- the two controllers ------------------------------------------------------------------

KOPF_RUNTIME = ("kopf>=1.45,<1.46",)
"""kopf in a virtualenv of its own with the runtime dependencies (bench/runtime.py)."""


def _kopf(env: environment.LocalEnvironment, workers: int) -> list[str]:
    return [runtime.python(KOPF_RUNTIME), "-m", "bench.kopf_remedy",
            "--kubeconfig", str(env.kubeconfig()),
            "--workers", str(workers), "--liveness",
            f"http://127.0.0.1:{environment.free_port('127.0.0.1')}/healthz"]


KOPF = remedy.Implementation("kopf", _kopf)
IMPLEMENTATIONS = (remedy.OURS, KOPF)


def replica(kind: str, election: str, identity: str, priority: int) -> remedy.Implementation:
    """One replica with leader election on: our Lease ``election``, or kopf's peering."""
    def ours(env: environment.LocalEnvironment, workers: int) -> list[str]:
        argv = remedy.OURS.argv(env, workers)
        argv[argv.index("--leader-elect") + 1] = "true"
        return [*argv, "--leader-elect-resource-namespace", LEASE_NAMESPACE,
                "--leader-elect-resource-name", election, "--leader-elect-identity", identity]

    def kopf(env: environment.LocalEnvironment, workers: int) -> list[str]:
        return [*_kopf(env, workers), "--peering", election, "--priority", str(priority),
                "--peering-lifetime", str(KOPF_LIFETIME)]

    return remedy.Implementation(f"{kind}-{identity}", ours if kind == "ours" else kopf)


def order(index: int) -> tuple[remedy.Implementation, ...]:
    """A B, then B A, then A B ...: neither always runs first."""
    return IMPLEMENTATIONS if index % 2 == 0 else IMPLEMENTATIONS[::-1]


async def install_peering(env: environment.LocalEnvironment) -> None:
    """kopf's peering CRDs (``bench/kopf_remedy/peering.yaml``), established."""
    crds = [d for d in yaml.safe_load_all(PEERING_CRDS.read_text()) if d]
    async with env.client() as api:
        for crd in crds:
            with contextlib.suppress(errors.Conflict):
                await api.create(resources.CRDS, crd)
        async with asyncio.timeout(60):
            for crd in crds:
                while not any(c.get("type") == "Established" and c.get("status") == "True"
                              for c in ((await api.get(resources.CRDS, crd["metadata"]["name"]))
                                        .get("status") or {}).get("conditions") or []):
                    await asyncio.sleep(0.1)


# --- leader election ------------------------------------------------------------------------

@dataclasses.dataclass
class Probe:
    """One Cluster and one Remedy that reacts to its DNS condition; a watch of the Cluster."""

    api: kube.ApiClient
    name: str
    seen: asyncio.Queue[tuple[float, tuple[str, ...]]] = dataclasses.field(
        default_factory=asyncio.Queue)

    async def create(self) -> None:
        """The Cluster (DNS True: no action) and its Remedy."""
        await self.api.create(resources.CLUSTERS, remedy_workload.cluster_obj(self.name))
        await remedy_workload.set_condition(self.api, self.name, "True")
        await self.api.create(resources.REMEDIES, remedy_workload.remedy_obj(
            self.name, [self.name], (remedy_workload.DNS, "Equal", "False")))

    async def follow(self) -> None:
        """Queue every remedyActions the Cluster shows (run as a task)."""
        rv = (await self.api.get(resources.CLUSTERS, self.name))["metadata"]["resourceVersion"]
        while True:
            with contextlib.suppress(errors.KubeError):
                async for event in self.api.watch(
                        resources.CLUSTERS, resource_version=rv,
                        field_selector=f"metadata.name={self.name}"):
                    rv = event.object["metadata"].get("resourceVersion", rv)
                    if event.type != "BOOKMARK":
                        self.seen.put_nowait((time.monotonic(),
                                              remedy_workload.actions_of(event.object)))

    async def flip(self, raise_tc: bool) -> None:
        """Write the condition that raises (or clears) TrafficControl."""
        while not self.seen.empty():
            self.seen.get_nowait()
        await remedy_workload.set_condition(self.api, self.name, "False" if raise_tc else "True")

    async def reacted(self, raise_tc: bool, timeout: float) -> float | None:
        """The monotonic time the expected actions were seen, None after ``timeout``."""
        wanted = tuple(remedy_workload.TC) if raise_tc else ()
        try:
            async with asyncio.timeout(timeout):
                while True:
                    at, actions = await self.seen.get()
                    if actions == wanted:
                        return at
        except TimeoutError:
            return None

    async def delete(self) -> None:
        """Remove the Remedy and the Cluster."""
        await self.api.delete(resources.REMEDIES, self.name)
        await self.api.delete(resources.CLUSTERS, self.name)


@dataclasses.dataclass(frozen=True)
class Election:
    """Figures of one implementation's leader election."""

    takeover: dict[str, tuple[float, ...]]
    """Signal name -> seconds from the signal until the other replica reacted."""
    together: str
    """What two replicas started together with equal standing did."""


async def _election_objects(api: kube.ApiClient, kind: str, name: str) -> None:
    if kind == "kopf":
        await api.create(CLUSTER_PEERINGS, {"apiVersion": "kopf.dev/v1",
                                            "kind": "ClusterKopfPeering",
                                            "metadata": {"name": name}})


async def takeover_trial(env: environment.LocalEnvironment, kind: str, sig: signal.Signals,
                         tmp: pathlib.Path, rng: random.Random) -> float:
    """Seconds from ``sig`` to the leader until the standby reacted to a flip."""
    name = f"to-{kind}-{uuid.uuid4().hex[:6]}"
    async with env.client() as api:
        probe = Probe(api, name)
        await probe.create()
        await _election_objects(api, kind, name)
        follower = asyncio.create_task(probe.follow())
        procs: list[subprocess.Popen[bytes]] = []
        try:
            await asyncio.sleep(0.5)
            leader = replica(kind, name, "a", 200).start(env, 2, tmp / f"{kind}-takeover.log")
            procs.append(leader)
            await probe.flip(True)
            if await probe.reacted(True, 60) is None:
                raise RuntimeError(f"{kind}: the first replica never acted")
            await probe.flip(False)
            if await probe.reacted(False, 30) is None:
                raise RuntimeError(f"{kind}: the first replica stopped acting")
            procs.append(replica(kind, name, "b", 100).start(env, 2, tmp / f"{kind}-takeover.log"))
            await asyncio.sleep(8 + rng.uniform(0, 8))  # the standby is up and waiting
            sent = time.monotonic()
            leader.send_signal(sig)
            await probe.flip(True)
            at = await probe.reacted(True, KOPF_LIFETIME + 90)
            if at is None:
                raise RuntimeError(f"{kind}: no take-over after {sig.name}")
            return at - sent
        finally:
            follower.cancel()
            for proc in procs:
                remedy.stop(proc)
            await probe.delete()


async def together_trial(env: environment.LocalEnvironment, kind: str, tmp: pathlib.Path,
                         wait: float = 20.0) -> str:
    """Start two replicas at once with equal standing; flip; who acts, how soon."""
    name = f"eq-{kind}-{uuid.uuid4().hex[:6]}"
    async with env.client() as api:
        probe = Probe(api, name)
        await probe.create()
        await _election_objects(api, kind, name)
        follower = asyncio.create_task(probe.follow())
        procs = [replica(kind, name, identity, 0).start(env, 2, tmp / f"{kind}-together.log")
                 for identity in ("a", "b")]
        try:
            await asyncio.sleep(10)  # both up, each has seen the other
            sent = time.monotonic()
            await probe.flip(True)
            at = await probe.reacted(True, wait)
        finally:
            follower.cancel()
            for proc in procs:
                remedy.stop(proc)
            await probe.delete()
    if at is None:
        return f"none acts ({wait:.0f} s)"
    return f"one acts ({(at - sent) * 1000:.0f} ms)"


async def measure_election(env: environment.LocalEnvironment, trials: int, tmp: pathlib.Path
                           ) -> dict[str, Election]:
    """Take-over trials per signal, alternating implementations, then equal standing."""
    rng = random.Random(8)
    times: dict[str, dict[str, list[float]]] = {
        impl.name: {sig.name: [] for sig in (signal.SIGKILL, signal.SIGTERM)}
        for impl in IMPLEMENTATIONS}
    for index in range(trials):
        for sig in (signal.SIGKILL, signal.SIGTERM):
            for impl in order(index):
                elapsed = await takeover_trial(env, impl.name, sig, tmp, rng)
                takeover.progress(f"{impl.name}: take-over after {sig.name}: {elapsed:.2f} s")
                times[impl.name][sig.name].append(elapsed)
    result = {}
    for impl in IMPLEMENTATIONS:
        together = await together_trial(env, impl.name, tmp)
        takeover.progress(f"{impl.name}: two replicas with equal standing: {together}")
        result[impl.name] = Election({s: tuple(v) for s, v in times[impl.name].items()},
                                     together)
    return result


# --- the table ----------------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class Side:
    """One implementation's figure: headline value, spread, trials, and the value judged."""

    value: float
    low: float
    high: float
    trials: int
    judged: float


def _side(samples: Sequence[float], headline: float | None = None,
          spread: Sequence[float] | None = None, judged: float | None = None) -> Side:
    spread = samples if spread is None else spread
    value = statistics.median(samples) if headline is None else headline
    return Side(value, min(spread), max(spread), len(samples),
                max(samples) if judged is None else judged)


@dataclasses.dataclass(frozen=True)
class Row:
    """One line of the comparison."""

    name: str
    unit: str
    ours: Side
    kopf: Side
    target: str = "-"
    limit: float | None = None
    """The judged value must be at most this (None: recorded only)."""

    def _fmt(self, value: float) -> str:
        return report.Figure(self.name, (value,), self.unit).format(value)

    def _bare(self, value: float) -> str:
        return self._fmt(value).removesuffix(f" {self.unit}")

    def _cell(self, side: Side) -> str:
        return f"{self._fmt(side.value)} ({self._bare(side.low)}-{self._bare(side.high)}, " \
            f"n={side.trials})"

    def _verdict(self, side: Side) -> str:
        if self.limit is None:
            return "recorded"
        return "pass" if side.judged <= self.limit else "FAIL"

    def cells(self) -> tuple[str, ...]:
        """figure, ours, kopf, ours/kopf, target, ours verdict, kopf verdict."""
        ratio = self.ours.value / self.kopf.value if self.kopf.value else float("nan")
        return (self.name, self._cell(self.ours), self._cell(self.kopf), f"{ratio:.2f}",
                self.target, self._verdict(self.ours), self._verdict(self.kopf))


COLUMNS = ("figure", "ours: median (min-max, n)", "kopf: median (min-max, n)", "ours/kopf",
           "target", "ours", "kopf")


@dataclasses.dataclass(frozen=True)
class Results:
    """Everything measured in one run."""

    latency: dict[str, list[list[float]]]
    """Implementation -> blocks of flip latencies (ms)."""
    scale: dict[str, list[remedy.ScaleRun]]
    workload: remedy_workload.Workload
    election: dict[str, Election]


def rows(results: Results) -> list[Row]:
    """The numeric rows of the table."""
    def pooled(name: str) -> list[float]:
        return [s for block in results.latency[name] for s in block]

    def latency(name: str, q: float) -> Side:
        blocks = results.latency[name]
        value = remedy.percentile(pooled(name), q)
        return _side(pooled(name), value, [remedy.percentile(b, q) for b in blocks], value)

    def scale(name: str, field: str) -> list[float]:
        runs = results.scale[name]
        if field == "after_change":
            return [s for run in runs for s in run.after_change]
        return [float(getattr(run, field)) for run in runs]

    converge = f"< {CONVERGE_TARGET_S:.0f} s"
    out = [
        Row(f"converge after start ({results.workload.label}), s", "s",
            _side(scale("ours", "after_start")), _side(scale("kopf", "after_start")),
            converge, CONVERGE_TARGET_S),
        Row(f"converge after a change ({results.workload.writes:,} writes), s", "s",
            _side(scale("ours", "after_change")), _side(scale("kopf", "after_change")),
            converge, CONVERGE_TARGET_S),
        Row("reaction latency p50 (pooled; spread over blocks)", "ms",
            latency("ours", 0.5), latency("kopf", 0.5)),
        Row("reaction latency p99 (pooled; spread over blocks)", "ms",
            latency("ours", 0.99), latency("kopf", 0.99),
            f"<= {KARMADA_P99_MS} ms (Karmada)", KARMADA_P99_MS),
        Row("peak RSS in the scale run (VmHWM, 0.2 s VmRSS)", "MiB",
            _side(scale("ours", "rss_peak")), _side(scale("kopf", "rss_peak")),
            f"<= {KARMADA_RSS_MIB} MiB (Karmada)", KARMADA_RSS_MIB),
    ]
    for sig in ("SIGKILL", "SIGTERM"):
        ours, kopf = (results.election[n].takeover.get(sig, ()) for n in ("ours", "kopf"))
        if ours and kopf:
            out.append(Row(f"take-over after {sig} of the leader, until the standby acted",
                           "s", _side(ours), _side(kopf)))
    return out


def text_rows(results: Results) -> list[tuple[str, ...]]:
    """The leader-election rows in words (and the measured equal-standing outcome)."""
    return [
        ("leader election", "Lease (coordination.k8s.io), client-go timing 15/10/2 s",
         f"peering: ClusterKopfPeering status, priority, keep-alive every "
         f"{KOPF_LIFETIME - 10}-{KOPF_LIFETIME - 5} s, lifetime {KOPF_LIFETIME} s",
         "-", "-", "-", "-"),
        ("two replicas, equal standing (measured)", results.election["ours"].together,
         results.election["kopf"].together, "-", "-", "-", "-"),
    ]


def text_table(results: Results) -> str:
    """The comparison as aligned plain text."""
    lines = [COLUMNS, *(r.cells() for r in rows(results)), *text_rows(results)]
    widths = [max(len(line[i]) for line in lines) for i in range(len(COLUMNS))]
    out = ["  ".join(c.ljust(w) for c, w in zip(line, widths, strict=True)).rstrip()
           for line in lines]
    out.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(out)


def markdown_table(results: Results) -> str:
    """The comparison as a Markdown table."""
    lines = [COLUMNS, *(r.cells() for r in rows(results)), *text_rows(results)]
    md = ["| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    md += ["| " + " | ".join(line) + " |" for line in lines[1:]]
    return "\n".join(md)


# --- the run ------------------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class Options:
    """What to measure and how often."""

    flips: int
    blocks: int
    clusters: int
    remedies: int
    rounds: int
    changes: int
    takeover_trials: int


async def measure(options: Options) -> Results:
    """All phases on one fresh local environment."""
    latency: dict[str, list[list[float]]] = {i.name: [] for i in IMPLEMENTATIONS}
    scale: dict[str, list[remedy.ScaleRun]] = {i.name: [] for i in IMPLEMENTATIONS}
    per_block = max(2, options.flips // max(1, options.blocks))
    with tempfile.TemporaryDirectory(prefix="clusterhealth-kopf-") as folder:
        tmp = pathlib.Path(folder)
        takeover.progress(f"logs in {tmp} (removed at the end)")
        async with environment.LocalEnvironment(environment.EnvironmentConfig(members=())) as env:
            await install_peering(env)
            for block in range(options.blocks):
                for impl in order(block):
                    takeover.progress(f"{impl.name}: latency block {block + 1}/{options.blocks} "
                                      f"({per_block} flips)")
                    latency[impl.name].append(await remedy.latency_samples(
                        env, impl, per_block, tmp, tag=f"lat-{impl.name}-{block}"))
            workload = remedy_workload.Workload.build(options.clusters, options.remedies)
            takeover.progress(f"creating {workload.label}")
            async with env.client(max_connections=16) as api:
                await workload.create(api)
            for index in range(options.rounds):
                for impl in order(index):
                    takeover.progress(f"{impl.name}: scale round {index + 1}/{options.rounds}")
                    run = await remedy.scale_run(env, workload, impl, tmp, options.changes)
                    takeover.progress(
                        f"{impl.name}: start {run.after_start:.2f} s, changes "
                        f"{', '.join(f'{c:.2f}' for c in run.after_change)} s, "
                        f"peak {run.rss_peak:.1f} MiB")
                    scale[impl.name].append(run)
            election = await measure_election(env, options.takeover_trials, tmp)
    return Results(latency, scale, workload, election)


def notes(options: Options, results: Results) -> list[str]:
    """What the figures mean (for the Markdown section)."""
    per_block = max(2, options.flips // max(1, options.blocks))
    return [
        "Both controllers run on the same LocalEnvironment (etcd + kube-apiserver, "
        "loopback), alternating A B / B A; the machine is shared with other work and noisy, "
        "so read the spread and the ratio (measured in this run) more than any single value.",
        f"Latency: {options.blocks} blocks x {per_block} flips per implementation, each block "
        "a fresh controller process with a warm-up flip; p50/p99 over all flips, the spread "
        "is the same percentile per block. Ours runs 2 workers; kopf runs one task per "
        "object (its design).",
        f"Scale: {results.workload.label} (bench/remedy.py's workload), {options.rounds} "
        f"starts per implementation from the same reset state, then {options.changes} "
        "edits of the Remedy covering every cluster; 4 workers (ours) / 4 concurrent "
        "writes after a Remedy change (kopf). Verdicts judge the worst trial (pooled p99 "
        "for latency).",
        "kopf prototype: bench/kopf_remedy (indexes for Remedies and Clusters, "
        "@kopf.on.event on both, the handler's patch for the handled Cluster and kopf's "
        "patching for the others, Events via kopf.warn/info posted by 4 workers, liveness "
        "endpoint on, CRD scanning off; see its __main__ for the settings). Ours "
        "additionally keeps each Remedy's status, Prometheus metrics "
        "and a 300 s resync.",
        "kopf's default registry probes for the official `kubernetes` client when kopf "
        "is imported, and imports it if installed ("
        + ("installed here: kopf's figures include it" if importlib.util.find_spec("kubernetes")
           else "not installed here") + ").",
        f"Take-over: two replicas ({options.takeover_trials} trial(s) per signal), the "
        "leader gets the signal, a flip is written at once; the time runs until the "
        f"standby's write is seen. kopf peering lifetime {KOPF_LIFETIME} s (its default), "
        "priorities 200/100; ours: Lease 15 s / renew 10 s / retry 2 s. Equal standing: "
        "two replicas started together (ours: one Lease; kopf: priority 0 both).",
    ]


def main(argv: Sequence[str] | None = None) -> int:
    """Measure, print the table, optionally update docs/benchmarks.md."""
    args = list(sys.argv[1:] if argv is None else argv)
    parser = argparse.ArgumentParser(prog="python -m bench.kopf_compare")
    parser.add_argument("--flips", type=int, default=100, help="per implementation")
    parser.add_argument("--blocks", type=int, default=4, help="latency blocks per implementation")
    parser.add_argument("--clusters", type=int, default=1000)
    parser.add_argument("--remedies", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=2, help="scale starts per implementation")
    parser.add_argument("--changes", type=int, default=4, help="Remedy edits per scale round")
    parser.add_argument("--takeover-trials", type=int, default=1,
                        help="per signal (SIGKILL, SIGTERM) and implementation")
    parser.add_argument("--markdown", type=pathlib.Path, default=None)
    ns = parser.parse_args(args)
    options = Options(ns.flips, ns.blocks, ns.clusters, ns.remedies, ns.rounds, ns.changes,
                      ns.takeover_trials)
    results = asyncio.run(measure(options))
    print(text_table(results))
    if ns.markdown is not None:
        command = report.command_line("bench.kopf_compare", args)
        body = "\n".join([
            f"{SECTION_TITLE}\n",
            f"Machine: {report.machine()}.\n",
            markdown_table(results) + "\n",
            "\n".join(f"- {note}" for note in notes(options, results)) + "\n",
            f"Command (from the repository root): `{command}`\n",
        ])
        report.write_section(ns.markdown, SECTION_TITLE, body)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
