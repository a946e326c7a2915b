"""Karmada control-plane mode benchmark (issue 12): what Karmada's own parts cost.

The environment's Karmada mode (``EnvironmentConfig(control_plane="karmada")``)
adds ``karmada-aggregated-apiserver`` behind an APIService, Karmada's CRDs and
``karmada-controller-manager`` to the control plane.  Measured in one run, with
cached binaries, trials of both modes interleaved so that the machine's noise
falls on both alike:

1. start-up time of our mode and of Karmada mode (control plane + two members;
   Karmada mode's ``start()`` returns once Karmada reports both members Ready);
2. resident memory, some seconds after start-up, of Karmada's two processes and
   of the control-plane kube-apiserver in each mode;
3. the add-ons' latency on each control plane, both environments up at once
   and blocks of trials alternating between them: the agent's detection and
   recovery overhead (``bench.agent``'s trial: a real dnsmasq stopped and
   started, the Cluster followed by a watch) and the remedy controller's
   reaction latency (``bench.remedy``'s flips).  On Karmada's API the
   conditions are an atomic list that ``karmada-controller-manager`` rewrites
   every status update, so the agent's writes are guarded read-modify-writes
   there, and a write can meet a conflict.

Run from the repository root: ``python -m bench.karmada_env [--quick]
[--latency-rounds N] [--markdown docs/benchmarks.md]``.  The table goes to
stdout, progress to stderr.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import pathlib
import statistics
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence

from bench import agent, foundation, remedy, report
from bench.takeover import progress
from clusterhealth_localenv import binaries as bins
from clusterhealth_localenv import environment

SECTION_TITLE = "## Karmada control-plane mode (issue 12)"
MEMBERS = ("member1", "member2")
MODES: tuple[environment.ControlPlane, ...] = ("ours", "karmada")


@dataclasses.dataclass(frozen=True)
class Options:
    """How many trials, how long to settle before reading memory, how much latency."""

    trials: int
    settle: float
    markdown: pathlib.Path | None
    latency_rounds: int = 2
    """Blocks per mode of the latency phase (alternating); 0 leaves it out."""
    agent_trials: int = 5
    """Agent outages per block."""
    flips: int = 25
    """Remedy condition flips per block."""


def mode_pids(env: environment.LocalEnvironment) -> dict[str, int]:
    """The control-plane kube-apiserver's pid and, in Karmada mode, Karmada's processes."""
    pid = env.servers[environment.CONTROL_PLANE].process.pid
    if pid is None:
        raise RuntimeError("the control-plane kube-apiserver is not running after start")
    named = {"kube-apiserver control plane": pid}
    if env.karmada is not None:
        karmada = env.karmada.pids()
        if len(karmada) != 2:
            raise RuntimeError(f"Karmada's processes not running after start: {karmada}")
        named |= karmada
    return named


async def trial(mode: environment.ControlPlane, settle: float) -> tuple[float, dict[str, float]]:
    """One timed ``start()`` in ``mode``; then RSS by process after ``settle`` seconds."""
    config = environment.EnvironmentConfig(members=MEMBERS, control_plane=mode)
    env = environment.LocalEnvironment(config)
    try:
        began = time.monotonic()
        await env.start()
        elapsed = time.monotonic() - began
        await asyncio.sleep(settle)
        rss = {name: foundation.rss_mib(pid) for name, pid in mode_pids(env).items()}
    finally:
        await env.stop()
    return elapsed, rss


async def measure(options: Options) -> tuple[list[report.Figure], list[str]]:
    """Interleaved trials of both modes: start-up times and RSS figures, and notes."""
    await asyncio.to_thread(bins.ensure_kubernetes)  # cached binaries are the premise
    await asyncio.to_thread(bins.ensure_karmada)
    times: dict[str, list[float]] = {mode: [] for mode in MODES}
    memory: dict[tuple[str, str], list[float]] = {}
    for index in range(options.trials):
        for mode in MODES:
            elapsed, rss = await trial(mode, options.settle)
            progress(f"{mode} {index + 1}/{options.trials}: start-up {elapsed:.2f} s, "
                     + ", ".join(f"{name} {mib:.0f} MiB" for name, mib in rss.items()))
            times[mode].append(elapsed)
            for name, mib in rss.items():
                memory.setdefault((mode, name), []).append(mib)
    label = {"ours": "our control plane", "karmada": "Karmada control plane"}
    figures = [report.Figure(
        f"env start-up, {label[mode]} + {len(MEMBERS)} members (cached binaries)",
        tuple(times[mode]), "s") for mode in MODES]
    figures += [report.Figure(
        f"RSS {name} ({label[mode]}), {options.settle:.0f} s after start", tuple(samples), "MiB")
        for (mode, name), samples in memory.items()]
    settings = environment.EnvironmentConfig().karmada
    notes = [
        f"Karmada {settings.version} (karmada-aggregated-apiserver, karmada-controller-manager "
        f"with --controllers={','.join(settings.controllers)}) beside kube-apiserver "
        f"{bins.KUBERNETES_VERSION}; trials of the two modes alternate.",
        "Karmada mode's start-up includes installing Karmada's CRDs, the aggregated apiserver "
        "becoming ready, the APIService becoming Available, the controller-manager's health "
        "probe, and Karmada writing Ready=True on both members (status update every "
        f"{settings.status_update_frequency:g} s).",
    ]
    return figures, notes


LATENCY_MEMBER = agent.MEMBER
LABEL = {"ours": "our control plane", "karmada": "Karmada control plane"}


async def latency(options: Options, tmp: pathlib.Path) -> tuple[list[report.Figure], list[str]]:
    """The agent's and the remedy controller's latency on both control planes, interleaved."""
    detect: dict[str, list[float]] = {mode: [] for mode in MODES}
    recover: dict[str, list[float]] = {mode: [] for mode in MODES}
    react: dict[str, list[float]] = {mode: [] for mode in MODES}
    envs = {mode: environment.LocalEnvironment(environment.EnvironmentConfig(
        members=(LATENCY_MEMBER,), control_plane=mode)) for mode in MODES}
    try:
        for env in envs.values():
            await env.start()
        for index in range(options.latency_rounds):
            for mode in MODES:
                progress(f"latency {mode} {index + 1}/{options.latency_rounds}: agent")
                found, cleared = await agent.latency_samples(
                    envs[mode], options.agent_trials, tmp)
                detect[mode] += found
                recover[mode] += cleared
                progress(f"latency {mode} {index + 1}/{options.latency_rounds}: remedy")
                react[mode] += await remedy.latency_samples(
                    envs[mode], remedy.OURS, options.flips, tmp, tag=f"latency-{index}")
    finally:
        for env in envs.values():
            await env.stop()
    figures: list[report.Figure] = []
    for mode in MODES:
        figures += [
            report.Figure(f"agent {agent.DETECTION}, {LABEL[mode]}", tuple(detect[mode]), "s"),
            report.Figure(f"agent {agent.RECOVERY}, {LABEL[mode]}", tuple(recover[mode]), "s"),
            report.Figure(f"remedy reaction latency, condition write -> remedyActions, "
                          f"{LABEL[mode]} (p99 {remedy.percentile(react[mode], 0.99):.0f} ms)",
                          tuple(react[mode]), "ms"),
        ]
    totals: dict[str, list[float]] = {
        m: [v + agent.THRESHOLD + agent.PERIOD for v in detect[m]] for m in MODES}
    reactions: dict[str, list[float]] = dict(react)
    notes = [
        f"Latency: both environments (control plane + {LATENCY_MEMBER}) up at once; "
        f"{options.latency_rounds} blocks per mode, alternating: {options.agent_trials} DNS "
        f"outages of one agent (period {agent.PERIOD:g} s, thresholds {agent.THRESHOLD:g} s) "
        f"and {options.flips} remedy flips each. Ratios Karmada / ours (medians): " + ", ".join(
            f"{what} {_ratio(samples):.2f}" for what, samples in (
                ("detection (threshold + period + overhead)", totals),
                ("remedy reaction", reactions)))
        + ".",
    ]
    return figures, notes


def _ratio(samples: Mapping[str, list[float]]) -> float:
    return statistics.median(samples["karmada"]) / statistics.median(samples["ours"])


async def measure_all(options: Options) -> tuple[list[report.Figure], list[str]]:
    """Start-up and memory, then (unless ``--latency-rounds 0``) the add-ons' latency."""
    figures, notes = await measure(options)
    if options.latency_rounds > 0:
        with tempfile.TemporaryDirectory(prefix="clusterhealth-bench-") as tmp:
            more, said = await latency(options, pathlib.Path(tmp))
        figures += more
        notes += said
    return figures, notes


def parse_args(argv: Sequence[str]) -> Options:
    """Options from the command line (``--quick`` means 2 trials of each mode)."""
    parser = argparse.ArgumentParser(prog="python -m bench.karmada_env", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="smoke run: 2 trials per mode")
    parser.add_argument("--trials", type=int, help="trials per mode (default 5)")
    parser.add_argument("--settle", type=float, default=10.0,
                        help="seconds after start-up before reading RSS (default 10)")
    parser.add_argument("--latency-rounds", type=int, default=2,
                        help="latency blocks per mode, alternating (default 2; 0: none)")
    parser.add_argument("--markdown", type=pathlib.Path,
                        help="write/update this benchmark's section of this Markdown file")
    args = parser.parse_args(argv)
    options = Options(trials=args.trials or (2 if args.quick else 5), settle=args.settle,
                      markdown=args.markdown, latency_rounds=args.latency_rounds,
                      agent_trials=2 if args.quick else 5, flips=10 if args.quick else 25)
    if options.trials < 1:
        parser.error("--trials must be >= 1")
    if options.latency_rounds < 0:
        parser.error("--latency-rounds must be >= 0")
    return options


def main(argv: Sequence[str] | None = None) -> int:
    """Measure, print the table, optionally update the Markdown section."""
    args = list(sys.argv[1:] if argv is None else argv)
    options = parse_args(args)
    figures, notes = asyncio.run(measure_all(options))
    print(report.text_table(figures))
    for note in notes:
        print(f"* {note}")
    if options.markdown is not None:
        command = report.command_line("bench.karmada_env", args)
        body = report.section(SECTION_TITLE, figures, notes, command)
        report.write_section(options.markdown, SECTION_TITLE, body)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
