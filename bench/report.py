"""Figures with their spread, as a plain-text table and as a section of docs/benchmarks.md.

Machines that run the benchmarks have two cores and are noisy, so a figure is
never one number: it is the median with the min and max over its trials.
"""

from __future__ import annotations

import dataclasses
import datetime
import os
import pathlib
import platform
import shlex
import statistics
import sys
from collections.abc import Sequence

COLUMNS = ("figure", "trials", "median", "min", "max", "target", "verdict")

DOC_HEADER = """# Benchmarks

Figures are measured by the modules in `bench/` on the machine named in each
section.  Each figure is the median with its spread (min and max) over the
stated number of trials; the machines are small (2 cores) and noisy, so read
the spread as well as the median.  No figure here is a timed test assertion:
the tests check behaviour, the benchmarks record how long it takes.
"""


@dataclasses.dataclass(frozen=True)
class Figure:
    """One measured quantity: its samples, unit, target and verdict."""

    name: str
    samples: tuple[float, ...]
    unit: str
    target: str = "-"
    verdict: str = "recorded"

    def cells(self) -> tuple[str, ...]:
        """The table row: name, trials, median, min, max, target, verdict."""
        values = (statistics.median(self.samples), min(self.samples), max(self.samples))
        return (
            self.name, str(len(self.samples)), *(self.format(v) for v in values),
            self.target, self.verdict,
        )

    def format(self, value: float) -> str:
        """A value with its unit (seconds to 10 ms, MiB to 1 MiB)."""
        if self.unit == "s":
            return f"{value:.2f} s"
        if self.unit == "ms":  # a tenth below 100 ms: reaction latencies differ by that
            return f"{value:.1f} ms" if abs(value) < 100 else f"{value:.0f} ms"
        if self.unit == "x":
            return f"{value:.2f}x"
        if self.unit == "ms/write":
            return f"{value:.2f} ms/write"
        return f"{value:.1f} {self.unit}"


def text_table(figures: Sequence[Figure]) -> str:
    """The figures as an aligned plain-text table."""
    rows = [COLUMNS, *(f.cells() for f in figures)]
    widths = [max(len(row[i]) for row in rows) for i in range(len(COLUMNS))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip()
             for row in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def markdown_table(figures: Sequence[Figure]) -> str:
    """The figures as a Markdown table."""
    lines = ["| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    lines += ["| " + " | ".join(f.cells()) + " |" for f in figures]
    return "\n".join(lines)


def _cpu_model() -> str:
    try:
        text = pathlib.Path("/proc/cpuinfo").read_text()
    except OSError:
        return platform.processor() or "unknown CPU"
    for line in text.splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor() or "unknown CPU"


def _memory_gib() -> float:
    try:
        text = pathlib.Path("/proc/meminfo").read_text()
    except OSError:
        return 0.0
    for line in text.splitlines():
        if line.startswith("MemTotal:"):
            return int(line.split()[1]) / (1024 * 1024)
    return 0.0


def machine() -> str:
    """One line naming the machine: CPUs, CPU model, memory, kernel, Python, date."""
    cpus = len(os.sched_getaffinity(0))
    today = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    return (
        f"{cpus} CPUs ({_cpu_model()}), {_memory_gib():.1f} GiB RAM, "
        f"Linux {platform.release()}, Python {platform.python_version()}, {today}"
    )


def command_line(module: str, argv: Sequence[str]) -> str:
    """How a benchmark run was started, with the interpreter relative to the working directory."""
    python = os.path.relpath(sys.executable) if sys.executable else "python"
    return shlex.join([python, "-m", module, *argv])


def section(title: str, figures: Sequence[Figure], notes: Sequence[str], command: str) -> str:
    """A Markdown section: title, machine, table, notes and the command that made it."""
    parts = [
        f"{title}\n",
        f"Machine: {machine()}.\n",
        markdown_table(figures) + "\n",
    ]
    if notes:
        parts.append("\n".join(f"- {note}" for note in notes) + "\n")
    parts.append(f"Command (from the repository root): `{command}`\n")
    return "\n".join(parts)


def replace_section(document: str, title: str, body: str) -> str:
    """``document`` with the section headed ``title`` replaced by ``body`` (or appended)."""
    lines = document.splitlines(keepends=True)
    start = next((i for i, line in enumerate(lines) if line.rstrip() == title), None)
    if start is None:
        return document.rstrip("\n") + "\n\n" + body
    end = next(
        (i for i in range(start + 1, len(lines)) if lines[i].startswith(("# ", "## "))),
        len(lines),
    )
    tail = "".join(lines[end:])
    return "".join(lines[:start]) + body + ("\n" + tail if tail else "")


def write_section(path: pathlib.Path, title: str, body: str) -> None:
    """Create or update ``path`` so that its section ``title`` is ``body``."""
    document = path.read_text() if path.exists() else DOC_HEADER
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(replace_section(document, title, body))
