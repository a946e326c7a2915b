"""Informer benchmark (issue 8): initial sync of 10,000 objects, paged and in one request.

The control plane gets ``--objects`` ConfigMaps of about 1 KiB each.  A fresh
child process (the runtime-only virtualenv, as the image runs) starts an
informer on them and reports how long until it was synced and its peak RSS
(``VmHWM``).  Two ways of listing, alternating over ``--trials``:

* paged: the informer as shipped (``limit=500`` + ``continue``, folded into
  the cache page by page);
* one request: the same informer with a page size larger than the list, as
  the previous client listed (one body holding every object).

Run: ``python -m bench.informer [--objects N] [--trials N] [--markdown docs/benchmarks.md]``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import pathlib
import subprocess
import sys
from collections.abc import Sequence

from bench import report, runtime, takeover
from clusterhealth_core.kube import resources
from clusterhealth_localenv import environment

SECTION_TITLE = "## Informer initial sync (issue 8)"
NAMESPACE = "bench-informer"
MODES = {"paged (limit 500)": 500, "one request": 10_000_000}


async def _fill(env: environment.LocalEnvironment, count: int) -> None:
    async with env.client(max_connections=16) as api:
        await api.create(resources.NAMESPACES, {"metadata": {"name": NAMESPACE}})
        gate = asyncio.Semaphore(16)

        async def one(i: int) -> None:
            async with gate:
                await api.create(resources.CONFIGMAPS, {
                    "metadata": {"name": f"cm-{i:05d}", "namespace": NAMESPACE,
                                 "labels": {"bench": "informer", "shard": str(i % 10)}},
                    "data": {"payload": f"{i:05d}" * 180}})

        await asyncio.gather(*(one(i) for i in range(count)))


def _run_child(env: environment.LocalEnvironment, page_size: int) -> dict[str, float]:
    out = subprocess.run(
        [runtime.python(), "-m", "bench.informer_sync", str(env.kubeconfig()),
         "--namespace", NAMESPACE, "--page-size", str(page_size)],
        capture_output=True, text=True, check=True, env=runtime.child_env()).stdout
    return dict(json.loads(out.strip().splitlines()[-1]))


async def measure(objects: int, trials: int) -> list[report.Figure]:
    async with environment.LocalEnvironment(environment.EnvironmentConfig(members=())) as env:
        takeover.progress(f"creating {objects} ConfigMaps")
        await _fill(env, objects)
        seconds: dict[str, list[float]] = {mode: [] for mode in MODES}
        peak: dict[str, list[float]] = {mode: [] for mode in MODES}
        for trial in range(trials):
            for mode, page_size in MODES.items():
                result = await asyncio.to_thread(_run_child, env, page_size)
                assert result["objects"] == objects, result
                seconds[mode].append(result["seconds"])
                peak[mode].append(result["peak_mib"])
                takeover.progress(f"trial {trial + 1}/{trials} {mode}: "
                                  f"{result['seconds']:.2f} s, {result['peak_mib']:.1f} MiB")
    figures = []
    for mode in MODES:
        figures += [
            report.Figure(f"initial sync of {objects:,} objects, {mode}: time",
                          tuple(seconds[mode]), "s"),
            report.Figure(f"initial sync of {objects:,} objects, {mode}: peak RSS",
                          tuple(peak[mode]), "MiB"),
        ]
    return figures


def main(argv: Sequence[str] | None = None) -> int:
    """Measure, print the table, optionally update docs/benchmarks.md."""
    args = list(sys.argv[1:] if argv is None else argv)
    parser = argparse.ArgumentParser(prog="python -m bench.informer")
    parser.add_argument("--objects", type=int, default=10_000)
    parser.add_argument("--trials", type=int, default=3)
    parser.add_argument("--markdown", type=pathlib.Path, default=None)
    options = parser.parse_args(args)
    figures = asyncio.run(measure(options.objects, options.trials))
    print(report.text_table(figures))
    if options.markdown is not None:
        notes = [
            "Each trial is a fresh process (runtime-only virtualenv) syncing one informer on "
            "ConfigMaps of about 1 KiB; time from process start of the client to synced; peak "
            "RSS is VmHWM. The two modes alternate within each trial.",
        ]
        command = report.command_line("bench.informer", args)
        report.write_section(options.markdown, SECTION_TITLE,
                             report.section(SECTION_TITLE, figures, notes, command))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
