"""The cluster-status controller's reads of each member's served APIs, parsed only when changed.

Why: reading and parsing every member's aggregated discovery (``/api`` and
``/apis``, about 25 KiB of JSON together) on every probe was half of the
controller manager's CPU in a 10-member failover (``docs/benchmarks.md``).  The
API server tags both documents (``ETag``, a hash of the document) and answers
a ``GET`` with ``If-None-Match: <that tag>`` by ``304 Not Modified`` without a
body.  So this class keeps, per member, each document's tag and the
enablements made of it:

* both documents answered 304: the last result itself (no body, no parse, no
  merge); one changed: only that one is parsed, merged with the other's
  (:func:`.decision.merged_enablements`);
* the tags are kept only for the client that read them: a member whose
  client the pool replaced (a new endpoint, CA or token) starts over, and so
  does one whose read failed or that answered without aggregated discovery;
  :meth:`Discovery.forget` drops a deleted member's;
* servers without aggregated discovery answer with the legacy documents
  (untagged), and then every served groupVersion is read, as before.

(client-go's plain discovery client sends no ``If-None-Match``; kubectl's
disk-cached one revalidates its cached answers with their tags this way.)

A read the member does not answer at all (no connection, or no answer in
time) raises :class:`Lost` instead of returning ``([], True)``: the probe that
came just before was answered, so the member was most likely cut off since,
and the controller counts it as a failed probe at once rather than after the
rest of its reads and one more period.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from typing import Any

from clusterhealth_controlplane.clusterstatus import decision
from clusterhealth_core import retry
from clusterhealth_core.kube import client as kube
from clusterhealth_core.kube import errors

log = logging.getLogger(__name__)

ACCEPT = ("application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,"
          "application/json")
"""Aggregated discovery if the server has it, the legacy documents otherwise."""
PATHS = ("/api", "/apis")
ONE_ATTEMPT = retry.Backoff(attempts=1)
UNANSWERED = (errors.Unreachable, OSError, TimeoutError)
"""What a read of a member raises when the member did not answer (not an error it answered)."""
Enablements = tuple[list[dict[str, Any]], bool]
"""The sorted ``apiEnablements`` and whether some could not be read (partial)."""


class Lost(Exception):
    """The member did not answer a read (connection failed, or no answer in time)."""


@dataclasses.dataclass(frozen=True)
class Tagged:
    """One aggregated discovery document's tag and the enablements made of it."""

    etag: str | None
    enablements: list[dict[str, Any]]
    partial: bool


@dataclasses.dataclass(frozen=True)
class Known:
    """What one member's client last read: each document and the merged result."""

    api: kube.ApiClient
    documents: dict[str, Tagged]
    result: Enablements


class Discovery:
    """Every member's served APIs, read again only when the member says they changed.

    ``timeout``: seconds one member's ``/api`` and ``/apis`` may take together
    (and each legacy document).
    """

    def __init__(self, timeout: float) -> None:
        self.timeout = timeout
        self.known: dict[str, Known] = {}

    def forget(self, name: str) -> None:
        """Drop the member's tags (deleted; or read it in full next time)."""
        self.known.pop(name, None)

    async def enablements(self, name: str, api: kube.ApiClient) -> Enablements:
        """The member's served APIs through ``api``; ``([], True)`` when none could be read.

        Raises :class:`Lost` when the member did not answer at all.
        """
        known = self.known.get(name)
        if known is not None and known.api is not api:
            self.forget(name)  # another client: another server, maybe
            known = None
        try:
            async with asyncio.timeout(self.timeout):
                answers = [await api.get_if_changed(
                    path, known.documents[path].etag if known is not None else None,
                    headers={"Accept": ACCEPT}, backoff=ONE_ATTEMPT) for path in PATHS]
        except UNANSWERED as exc:
            self.forget(name)
            raise Lost(f"discovery: {unanswered(exc, self.timeout)}") from exc
        except errors.KubeError as exc:
            self.forget(name)
            log.warning("cluster %s: discovery failed: %s", name, exc)
            return [], True
        kept = [known.documents[path] if known is not None and answer.not_modified else None
                for path, answer in zip(PATHS, answers, strict=True)]
        if known is not None and all(kept):
            return known.result
        if all(tagged is not None or decision.is_aggregated(answer.body)
               for tagged, answer in zip(kept, answers, strict=True)):
            documents = {path: tagged if tagged is not None
                         else Tagged(answer.etag, *decision.aggregated_enablements([answer.body]))
                         for path, tagged, answer in zip(PATHS, kept, answers, strict=True)}
            result = decision.merged_enablements(
                (tagged.enablements, tagged.partial) for tagged in documents.values())
            if all(tagged.etag for tagged in documents.values()):
                self.known[name] = Known(api, documents, result)
            else:
                self.forget(name)
            return result
        self.forget(name)
        if any(kept):
            # one document kept its tag, the other is no longer aggregated: read both again
            return await self.enablements(name, api)
        return await self._legacy(name, api, answers[0].body or {}, answers[1].body or {})

    async def _legacy(self, name: str, api: kube.ApiClient, core: Any, groups: Any
                      ) -> Enablements:
        """Every groupVersion's own document (servers without aggregated discovery)."""
        listed: list[dict[str, Any]] = []
        partial = False
        for group_version in decision.legacy_group_versions(core, groups):
            path = f"/apis/{group_version}" if "/" in group_version else f"/api/{group_version}"
            try:
                async with asyncio.timeout(self.timeout):
                    listed.append(decision.legacy_enablement(
                        await api.request("GET", path, backoff=ONE_ATTEMPT) or {}))
            except UNANSWERED as exc:
                raise Lost(f"discovery of {group_version}: {unanswered(exc, self.timeout)}"
                           ) from exc
            except errors.KubeError as exc:
                log.warning("cluster %s: discovery of %s failed: %s", name, group_version, exc)
                partial = True
        return sorted(listed, key=lambda e: str(e["groupVersion"])), partial


def unanswered(exc: BaseException, timeout: float) -> str:
    """Why a read got no answer, for a condition's message."""
    return str(exc) if str(exc) else f"no answer within {timeout:g}s"
