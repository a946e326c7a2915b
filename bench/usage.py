"""What a step of a benchmark cost: the requests an API server counted, the CPU processes used.

Both are read before and after the step and subtracted, as are our processes'
event-loop pauses (:class:`Pauses`: what held the loop in the step).  Requests come from the
API server's ``apiserver_request_total`` (``/metrics``), keyed ``VERB
resource[/subresource]``; CPU seconds from the process's CPU clock (user plus system
time of the process and its threads, its children excluded, to the nanosecond).  ``bench.remedy``
reads them over a change of a Remedy, ``bench.failover_peer`` over a failover.
"""

from __future__ import annotations

import dataclasses
import math
import re
import time
import urllib.request
from collections import Counter
from collections.abc import Iterable, Mapping

from prometheus_client import parser

from clusterhealth_core.kube import client as kube

_REQUEST_LINE = re.compile(r'^apiserver_request_total\{([^}]*)\} ([0-9.e+]+)$', re.M)
_LABEL = re.compile(r'(\w+)="([^"]*)"')
WRITE_VERBS = ("POST", "PATCH", "APPLY", "PUT")


def parse_request_counts(text: str) -> Counter[str]:
    """``apiserver_request_total`` of a ``/metrics`` text by ``VERB resource[/subresource]``.

    A request the server refused is keyed apart with its code (``PUT resourcebindings
    [409]``: a write that lost a race, which its writer then reads and sends again).  The
    other labels (group, version, scope, a success's code...) are summed over.
    """
    counts: Counter[str] = Counter()
    for labels, value in _REQUEST_LINE.findall(text):
        label = dict(_LABEL.findall(labels))
        what = label.get("resource", "") + (f"/{label['subresource']}"
                                             if label.get("subresource") else "")
        code = label.get("code", "")
        refused = f" [{code}]" if code.isdigit() and int(code) >= 400 else ""
        counts[f"{label.get('verb', '?')} {what}{refused}"] += int(float(value))
    return counts


async def request_counts(api: kube.ApiClient) -> Counter[str]:
    """The API server's ``apiserver_request_total`` now (:func:`parse_request_counts`)."""
    return parse_request_counts(str(await api.request("GET", "/metrics")))


def sent(before: Mapping[str, int], after: Mapping[str, int]) -> Counter[str]:
    """The requests counted between two readings, kinds without any left out."""
    difference = Counter(after)
    difference.subtract(before)
    return +difference


def writes_of(counts: Mapping[str, int], resource: str) -> int:
    """The writes (create, update, patch, apply) of ``resource`` among ``counts``."""
    return sum(n for key, n in counts.items()
               if key.split(" ")[0] in WRITE_VERBS and key.split(" ")[1] == resource)


def process_cpu_seconds(pid: int | None) -> float:
    """CPU seconds a process has used, to the nanosecond; 0 once gone.

    Linux's process-wide CPU clock of another process (``CPUCLOCK_SCHED`` of the
    thread group: every thread, those gone too), read with ``clock_gettime`` on the
    clock id ``clock_getcpuclockid`` would give.  ``/proc/PID/stat`` counts in
    clock ticks (10 ms): too coarse for a block of 50 flips of a few ms each.
    """
    if pid is None:
        return 0.0
    try:
        return time.clock_gettime(((~pid) << 3) | 2)
    except OSError:
        return 0.0


def cpu_reading(pids: Iterable[int]) -> dict[int, float]:
    """Every process's CPU seconds now, by pid."""
    return {pid: process_cpu_seconds(pid) for pid in pids}


def cpu_used(before: Mapping[int, float], after: Mapping[int, float]) -> float:
    """CPU seconds the processes of ``before`` used until ``after``.

    A process gone in between (it reads 0, or is missing from ``after``) is left out:
    what it used before it ended is not known.
    """
    return sum(after[pid] - start for pid, start in before.items()
               if pid in after and after[pid] >= start)


LAG = "clusterhealth_event_loop_lag_seconds"
GC_PAUSE = "clusterhealth_gc_pause_seconds"


@dataclasses.dataclass(frozen=True)
class Pauses:
    """One of our processes' pause histograms (``clusterhealth_core.pauses``), or a difference."""

    lags: Mapping[float, float]
    """Event-loop lags no longer than each bucket's bound (cumulative, ``+Inf`` included)."""
    full_collections: float = 0.0
    full_collection_seconds: float = 0.0
    collection_seconds: float = 0.0
    """Every generation's collections."""

    def over(self, bound: float) -> int:
        """Lags longer than ``bound`` (a bucket's bound)."""
        return int(self.lags.get(math.inf, 0.0) - self.lags.get(bound, 0.0))

    def longest(self) -> float:
        """The bound the longest lag is within (0 when none was sampled)."""
        total = self.lags.get(math.inf, 0.0)
        return min((le for le, n in self.lags.items() if n >= total), default=0.0) if total \
            else 0.0

    def since(self, before: Pauses) -> Pauses:
        return Pauses({le: n - before.lags.get(le, 0.0) for le, n in self.lags.items()},
                      self.full_collections - before.full_collections,
                      self.full_collection_seconds - before.full_collection_seconds,
                      self.collection_seconds - before.collection_seconds)


def parse_pauses(text: str) -> Pauses:
    """The pause histograms of a ``/metrics`` text (empty when the process has none)."""
    lags: dict[float, float] = {}
    full = full_seconds = seconds = 0.0
    for family in parser.text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == f"{LAG}_bucket":
                lags[float(sample.labels["le"])] = sample.value
            elif sample.name == f"{GC_PAUSE}_sum":
                seconds += sample.value
                if sample.labels.get("generation") == "2":
                    full_seconds = sample.value
            elif sample.name == f"{GC_PAUSE}_count" and sample.labels.get("generation") == "2":
                full = sample.value
    return Pauses(lags, full, full_seconds, seconds)


def pauses_of(url: str) -> Pauses:
    """A process's pauses now, from its ``/metrics`` ``url`` (blocking)."""
    with urllib.request.urlopen(url, timeout=10) as response:
        return parse_pauses(response.read().decode())
