"""Indexes that keep the controller's work proportional to what changed.

Without them every Cluster reconcile evaluated every Remedy, and every
Remedy status scanned every Cluster's decision: at 5,000 Clusters and 500
Remedies that is 2.5 million checks per pass, and a pass happens for each
change (profile in ``docs/decisions/0005-remedy-controller-at-scale.md``).
Here a Cluster finds only the Remedies that can cover it (those naming it,
and those without an affinity), and a Remedy finds the Clusters it acts on.

:class:`ClusterWrites` keeps the other side of a decision: the Cluster
status writes between a decision and the server (in flight, or held back
because they change only provenance), so that their echoes cost no reconcile
and the writes that act go first.

Pure data structures: no I/O, no clock (time is passed in); the controller
feeds them from its informer events and reconciles.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable, Mapping
from typing import Any

from clusterhealth_core.api import meta, remedy
from clusterhealth_remedy import decision


@dataclasses.dataclass
class Refusal:
    """Why the model refuses a Remedy (it acts nowhere), and whether that was told."""

    name: str
    problem: str
    told: bool = False
    """A Warning Event said it (one per problem: a new problem is a new refusal)."""


class RemedyIndex:
    """The parsed Remedies, by name and by the clusters they can cover; those refused."""

    def __init__(self) -> None:
        self.remedies: dict[str, remedy.Remedy] = {}
        """Every parsed Remedy by name."""
        self.invalid: dict[str, Refusal] = {}
        """Remedies refused by the model, and why (they act nowhere)."""
        self._everywhere: dict[str, remedy.Remedy] = {}
        """Remedies without an affinity (every cluster, also clusters created later)."""
        self._naming: dict[str, set[str]] = {}
        """Cluster name to the Remedies whose affinity names it."""

    def __len__(self) -> int:
        return len(self.remedies)

    def update(self, name: str, obj: Mapping[str, Any] | None) -> Refusal | None:
        """Index the Remedy object ``obj`` (None: deleted); return a refusal that is new.

        One the model refuses is forgotten as a Remedy and kept in :attr:`invalid`
        (the same problem again keeps its refusal, and what was told of it).
        """
        try:
            parsed = None if obj is None else remedy.Remedy.from_dict(obj)
        except meta.ValidationError as exc:
            self.remove(name)
            known = self.invalid.get(name)
            if known is not None and known.problem == str(exc):
                return None
            self.invalid[name] = Refusal(name, str(exc))
            return self.invalid[name]
        self.invalid.pop(name, None)
        if parsed is None:
            self.remove(name)
        else:
            self.put(parsed)
        return None

    def get(self, name: str) -> remedy.Remedy | None:
        """The Remedy called ``name``, if it is indexed."""
        return self.remedies.get(name)

    def put(self, r: remedy.Remedy) -> remedy.Remedy | None:
        """Index ``r`` (replacing the Remedy of that name); return the one replaced."""
        name = r.metadata.name
        before = self.remove(name)
        self.remedies[name] = r
        affinity = r.spec.cluster_affinity
        if affinity is None:
            self._everywhere[name] = r
        else:
            for cluster_name in affinity.cluster_names:
                self._naming.setdefault(cluster_name, set()).add(name)
        return before

    def remove(self, name: str) -> remedy.Remedy | None:
        """Forget the Remedy ``name``; return it (None if it was not indexed)."""
        gone = self.remedies.pop(name, None)
        if gone is None:
            return None
        self._everywhere.pop(name, None)
        affinity = gone.spec.cluster_affinity
        if affinity is not None:
            for cluster_name in affinity.cluster_names:
                names = self._naming.get(cluster_name)
                if names is not None:
                    names.discard(name)
                    if not names:
                        del self._naming[cluster_name]
        return gone

    def naming(self, cluster_name: str) -> frozenset[str]:
        """The Remedies whose affinity names ``cluster_name``."""
        return frozenset(self._naming.get(cluster_name, ()))

    def candidates(self, cluster_name: str) -> list[remedy.Remedy]:
        """Every Remedy that covers ``cluster_name`` (see :func:`decision.covers`)."""
        found = list(self._everywhere.values())
        found += [self.remedies[name] for name in self._naming.get(cluster_name, ())]
        return found

    def decide(self, cluster_name: str, conditions: Mapping[str, str]) -> decision.Decision:
        """:func:`decision.decide` over the Remedies that can cover the cluster."""
        return decision.decide(cluster_name, conditions, self.candidates(cluster_name))


class ActiveIndex:
    """Which Clusters each Remedy acts on, from the latest decision of every Cluster."""

    def __init__(self) -> None:
        self.decisions: dict[str, decision.Decision] = {}
        """Cluster name to its latest decision."""
        self._acting: dict[str, dict[str, decision.Match]] = {}
        """Remedy name to the Clusters it acts on, with the match that made it act."""

    def get(self, cluster_name: str) -> decision.Decision | None:
        """The latest decision of ``cluster_name``."""
        return self.decisions.get(cluster_name)

    def put(self, result: decision.Decision) -> decision.Decision | None:
        """Record a Cluster's decision; return the previous one."""
        previous = self.remove(result.cluster)
        self.decisions[result.cluster] = result
        for match in result.matches:
            self._acting.setdefault(match.remedy, {})[result.cluster] = match
        return previous

    def remove(self, cluster_name: str) -> decision.Decision | None:
        """Forget a Cluster's decision (it was deleted); return it."""
        previous = self.decisions.pop(cluster_name, None)
        if previous is not None:
            for match in previous.matches:
                acting = self._acting.get(match.remedy)
                if acting is not None:
                    acting.pop(cluster_name, None)
                    if not acting:
                        del self._acting[match.remedy]
        return previous

    def acting(self, remedy_name: str) -> Mapping[str, decision.Match]:
        """The Clusters ``remedy_name`` acts on (cluster name to match)."""
        return self._acting.get(remedy_name, {})

    def values(self) -> Iterable[decision.Decision]:
        """Every recorded decision."""
        return self.decisions.values()


@dataclasses.dataclass
class _Held:
    since: float
    """When the write was first held back (monotonic seconds)."""
    live: Mapping[str, Any]
    """Our fields as they stay on the Cluster meanwhile (their echo is no disturbance)."""
    quiet: bool = False
    """Held for the quiet time only: it comes back by its own timer, not by :meth:`release`."""


class ClusterWrites:
    """The Cluster status writes between a decision and the server: in flight, or held back.

    Our fields on a Cluster may differ from its latest decision without anybody
    having disturbed them: while the write is in flight (its echo often
    arrives before its answer), and while a write that changes only
    ``remedyActionSources`` waits (:meth:`hold`).

    The hold: a provenance-only write waits while other Clusters are queued
    or a write that acts is in flight (:meth:`busy`: the writes that act go
    first, as Karmada's controller, which writes no provenance, sends only
    those), and for ``quiet`` seconds after a write that acts was answered
    (the next change's writes that act may be about to follow, as for
    Events), at most ``hold_max`` seconds from when it was first held.  Once
    the queue drained, :meth:`release` names the held Clusters to queue
    again; queued that way they do not count as waiting (:meth:`waiting`),
    else they would hold each other back.  One then held for the quiet time
    comes back by its own timer: released again by every reconcile that ends
    meanwhile, it would go round the queue until the quiet time is over.
    """

    def __init__(self, hold_max: float, quiet: float = 0.0) -> None:
        self.hold_max = hold_max
        self.quiet = quiet
        self._writing: dict[str, Mapping[str, Any]] = {}
        self._acting: set[str] = set()
        """Clusters whose write in flight changes their actions."""
        self._held: dict[str, _Held] = {}
        self._released: set[str] = set()
        """Held Clusters queued again by :meth:`release`, not yet taken by a worker."""
        self._acted_at: float | None = None
        """When the latest write that acts was answered (monotonic seconds)."""

    def start(self, name: str, status: Mapping[str, Any], acts: bool) -> None:
        """A write of ``status`` to the Cluster ``name`` begins (``acts``: it changes actions)."""
        self._writing[name] = status
        if acts:
            self._acting.add(name)

    def finish(self, name: str, now: float) -> None:
        """The write to ``name`` is answered (or failed) at ``now``."""
        del self._writing[name]
        if name in self._acting:
            self._acting.discard(name)
            self._acted_at = now

    def acted_within(self, window: float, now: float) -> bool:
        """Whether a write that acts is in flight, or one was answered ``window`` before ``now``.

        Events wait meanwhile: the next change's write that acts may be about to follow.
        """
        return bool(self._acting) or self._since_acted(now) < window

    def expected(self, name: str, owned: Mapping[str, Any]) -> bool:
        """Whether ``owned`` (our fields on the Cluster) is a write in flight or held back."""
        held = self._held.get(name)
        return owned == self._writing.get(name) or (held is not None and owned == held.live)

    def waiting(self, queued: int) -> bool:
        """Whether Clusters other than released held ones wait among ``queued`` in the queue."""
        return queued > len(self._released)

    def busy(self, queued: int) -> bool:
        """Whether :meth:`waiting`, or a write that acts is in flight: provenance waits then."""
        return self.waiting(queued) or bool(self._acting)

    def hold(self, name: str, live: Mapping[str, Any], queued: int, now: float) -> float | None:
        """Seconds the provenance-only write of ``name`` waits, or None: write it now.

        Call when a worker took ``name`` (no longer among ``queued``); it
        waits while :meth:`busy` (the rest of the bound: :meth:`release`
        queues it again once that is over), then for what is left of the
        quiet time after the latest write that acts, until ``hold_max`` after
        it was first held.
        """
        self._released.discard(name)
        held = self._held.setdefault(name, _Held(now, live))
        held.live = live
        left = held.since + self.hold_max - now
        if left > 0 and self.busy(queued):
            held.quiet = False
            return left
        quiet = self._quiet_left(now)
        if left <= 0 or quiet <= 0:
            self.forget(name)
            return None
        held.quiet = True
        return min(left, quiet)

    def _since_acted(self, now: float) -> float:
        """Seconds since the latest write that acts was answered (infinite: none yet)."""
        return math.inf if self._acted_at is None else now - self._acted_at

    def _quiet_left(self, now: float) -> float:
        """Seconds until ``quiet`` has passed since the latest write that acts was answered."""
        return self.quiet - self._since_acted(now)

    def forget(self, name: str) -> None:
        """``name`` holds nothing back (written, no provenance-only change, or gone)."""
        self._held.pop(name, None)
        self._released.discard(name)

    def release(self) -> list[str]:
        """The held Clusters to queue again (the queue drained); each named once.

        Those held for the quiet time only are not named: their timer brings them back.
        """
        names = [name for name, held in self._held.items()
                 if name not in self._released and not held.quiet]
        self._released.update(names)
        return names
