"""``explain cluster`` against Karmada's own control plane (read only).

On Karmada's API the Cluster is served by ``karmada-aggregated-apiserver``, its
``status.conditions`` list is atomic (one writer owns the whole list), its
Remedy CRD has no status.  The command must still name who wrote the
conditions and read the rest.  The session's shared ``karmada_env`` is only
read here: nothing is written.
"""

from __future__ import annotations

import asyncio
import json
import os
import pathlib
import sys

from clusterhealth_cli import errors, explain
from clusterhealth_core.kube import resources
from clusterhealth_localenv import environment, waiting

BIN = pathlib.Path(sys.executable).parent


async def test_explain_on_karmada(karmada_env: environment.LocalEnvironment) -> None:
    async with karmada_env.client() as api:
        async def ready() -> bool:
            obj = await api.get(resources.CLUSTERS, "member1")
            return any(c.get("type") == "Ready"
                       for c in (obj.get("status") or {}).get("conditions") or [])
        await waiting.eventually(ready, timeout=60)
    proc = await asyncio.create_subprocess_exec(
        str(BIN / "clusterhealth"), "explain", "cluster", "member1", "-o", "json",
        "--kubeconfig", str(karmada_env.kubeconfig()), stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE, env=dict(os.environ))
    out, err = await asyncio.wait_for(proc.communicate(), timeout=60)
    assert (proc.returncode, err.decode()) == (errors.OK, "")
    document = json.loads(out)
    ready_condition = next(c for c in document["conditions"] if c["type"] == "Ready")
    writers = ready_condition["writers"]
    assert writers, "no writer found for Ready in managedFields"
    assert writers[0]["manager"].startswith("karmada-controller-manager"), writers
    assert writers[0]["fields"] == [explain.WHOLE_LIST]  # atomic on Karmada's Cluster API
    # Karmada's Remedy, MCI and binding CRDs are served: nothing unreadable
    assert [n for n in document["notes"] if "not served" in n or "not allowed" in n] == []
    assert document["computedRemedyActions"] is not None
    assert document["scheduledBindings"] is not None
