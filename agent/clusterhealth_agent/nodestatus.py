"""Publish this node's probe results as conditions on its ``Node`` (Karmada's choice).

Why the Node: the results are visible where operators look
(``kubectl describe node``), need no extra objects or CRDs in the member,
and NodeCondition has a ``lastHeartbeatTime`` that tells the leader how fresh
a result is.  The write is a strategic-merge patch of ``nodes/status``,
merged by condition ``type``, so kubelet's conditions are never touched.

Writes are rate-limited: a condition is written when its status or reason
changes, or as a heartbeat every ``heartbeat_period`` otherwise.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Mapping, Sequence

from clusterhealth_agent.probes import base
from clusterhealth_core import clock as clocks
from clusterhealth_core.kube import client as kube
from clusterhealth_core.kube import errors, resources

log = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class Written:
    """What was last written for one condition type."""

    status: str
    reason: str
    message: str
    transition: str
    at: float
    """Monotonic time of the write."""


def condition_status(result: base.ProbeResult) -> str:
    """``True`` for a passing result, ``False`` otherwise."""
    return "True" if result.ok else "False"


class NodePublisher:
    """Writes the reported result of each probe onto this node's conditions."""

    def __init__(
        self,
        api: kube.ApiClient,
        node: str,
        heartbeat_period: float,
        clock: clocks.Clock,
    ) -> None:
        self.api = api
        self.node = node
        self.heartbeat_period = heartbeat_period
        self.clock = clock
        self._written: dict[str, Written] = {}
        self._loaded = False

    async def _load(self) -> None:
        """Learn the transition times already on the Node (after a restart)."""
        obj = await self.api.get(resources.NODES, self.node)
        now = self.clock.monotonic()
        for cond in (obj.get("status") or {}).get("conditions") or []:
            self._written[cond["type"]] = Written(
                status=cond.get("status", ""), reason=cond.get("reason", ""),
                message=cond.get("message", ""),
                transition=cond.get("lastTransitionTime", ""),
                at=now - self.heartbeat_period,  # force a fresh heartbeat
            )
        self._loaded = True

    def due(self, reported: Mapping[str, base.ProbeResult]) -> dict[str, base.ProbeResult]:
        """The conditions that changed or whose heartbeat is due."""
        now = self.clock.monotonic()
        result = {}
        for ctype, probe_result in reported.items():
            last = self._written.get(ctype)
            if (
                last is None
                or last.status != condition_status(probe_result)
                or last.reason != probe_result.reason
                or now - last.at >= self.heartbeat_period
            ):
                result[ctype] = probe_result
        return result

    async def publish(self, reported: Mapping[str, base.ProbeResult]) -> Sequence[str]:
        """Write what is due; return the condition types written."""
        if not self._loaded:
            await self._load()
        due = self.due(reported)
        if not due:
            return []
        now_text = clocks.format_rfc3339(self.clock.now())
        now = self.clock.monotonic()
        conditions = []
        pending: dict[str, Written] = {}
        for ctype, probe_result in sorted(due.items()):
            status = condition_status(probe_result)
            last = self._written.get(ctype)
            transition = last.transition if last and last.status == status and last.transition \
                else now_text
            conditions.append({
                "type": ctype,
                "status": status,
                "reason": probe_result.reason,
                "message": probe_result.message[:1024],
                "lastHeartbeatTime": now_text,
                "lastTransitionTime": transition,
            })
            pending[ctype] = Written(status, probe_result.reason, probe_result.message,
                                     transition, now)
        try:
            await self.api.patch(
                resources.NODES, self.node, {"status": {"conditions": conditions}},
                subresource="status", patch_type="strategic",
            )
        except errors.NotFound as exc:
            raise errors.NotFound(404, "NotFound", f"node {self.node} does not exist") from exc
        self._written.update(pending)
        return sorted(pending)
