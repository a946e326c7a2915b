"""Agreement check: our scheduler algorithms against Karmada v1.18.2's own Go code.

Builds two small Go programs (``assign/``: ``core.AssignReplicas``; ``spread/``:
``spreadconstraint.SelectBestClusters``) from the Go module proxy, feeds them and
``clusterhealth_controlplane.scheduler`` the same random cases and counts differences.
Not part of the pytest suite (it needs Go and the module proxy); run it after changing
``assignment.py`` or ``spread.py``::

    PYTHONPATH=controlplane python scripts/scheduler-agreement/agreement.py --cases 3000

Cases stay inside what Karmada accepts (weights >= 1, spread limits that its webhook
admits, cluster and region spreading only) and use Steady assignment.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import random
import subprocess
import sys
import tempfile
from typing import Any

from clusterhealth_controlplane.scheduler import assignment, errors, spread

HERE = pathlib.Path(__file__).resolve().parent


def assign_cases(rng: random.Random, count: int) -> list[dict[str, Any]]:
    cases = []
    for _ in range(count):
        n = rng.randint(1, 8)
        names = rng.sample([f"member{i}" for i in range(12)], n)
        allocatable = [rng.choice([0, 1, 2, 3, 5, 8, 10, 20, 100, rng.randint(0, 1000)])
                       for _ in names]
        weights = {name: rng.choice([1, 2, 3, 10, rng.randint(1, 100000)])
                   for name in names if rng.random() < 0.8}
        previous = [{"name": name, "replicas": rng.randint(0, 20)}
                    for name in rng.sample([*names, "gone"], n + 1) if rng.random() < 0.4]
        cases.append({
            "strategy": rng.choice(["StaticWeight", "DynamicWeight", "Aggregated"]),
            "replicas": rng.randint(1, 120), "names": names, "allocatable": allocatable,
            "weights": weights, "previous": previous,
            "uid": rng.choice(["", f"{rng.getrandbits(64):x}-uid"]),
        })
    return cases


def ours_assign(case: dict[str, Any]) -> dict[str, Any]:
    candidates = [assignment.Candidate(n, a) for n, a in zip(case["names"], case["allocatable"],
                                                             strict=True)]
    previous = [assignment.TargetCluster(p["name"], p["replicas"]) for p in case["previous"]]
    try:
        targets = assignment.assign(assignment.Strategy(case["strategy"]), case["replicas"],
                                    candidates, previous, weights=case["weights"],
                                    uid=case["uid"])
    except errors.ScheduleError as error:
        return {"error": str(error)}
    return {"result": {t.name: t.replicas for t in targets}}


def spread_cases(rng: random.Random, count: int) -> list[dict[str, Any]]:
    cases = []
    for _ in range(count):
        regions = ["r1", "r2", "r3", "r4"][: rng.randint(1, 4)]
        clusters = [{
            "name": f"m{i}", "score": rng.choice([0, 0, 100, rng.randint(0, 200)]),
            "available": rng.choice([0, 1, 3, 5, 10, 50, rng.randint(0, 100)]),
            "region": rng.choice(regions), "assigned": rng.choice([0, 0, 0, 2, 5]),
        } for i in range(rng.randint(1, 9))]
        cluster_min = rng.randint(1, 3)
        cluster_max = rng.randint(cluster_min, 5)
        constraints = [{"spreadByField": "cluster", "minGroups": cluster_min,
                        "maxGroups": cluster_max}]
        if rng.random() < 0.6:
            region_min = rng.randint(1, min(3, cluster_max))
            constraints.insert(0, {"spreadByField": "region", "minGroups": region_min,
                                   "maxGroups": rng.randint(region_min, 4)})
        cases.append({"clusters": clusters, "constraints": constraints,
                      "replicas": rng.randint(1, 60), "duplicated": rng.random() < 0.5})
    return cases


def ours_spread(case: dict[str, Any]) -> dict[str, Any]:
    scored = [spread.ScoredCluster(c["name"], c["score"], c["available"] + c["assigned"],
                                   region=c["region"]) for c in case["clusters"]]
    constraints = [spread.SpreadConstraint(c["spreadByField"], c["minGroups"], c["maxGroups"])
                   for c in case["constraints"]]
    try:
        selected = spread.select(scored, constraints, replicas=case["replicas"],
                                 duplicated=case["duplicated"])
    except errors.ScheduleError as error:
        return {"error": str(error)}
    return {"result": [c.name for c in selected]}


def compare(binary: pathlib.Path, cases: list[dict[str, Any]], ours: Any) -> int:
    run = subprocess.run([binary], input=json.dumps(cases), capture_output=True, text=True,
                         check=True)
    theirs = json.loads(run.stdout)
    mismatches = errors_seen = 0
    for case, karmada in zip(cases, theirs, strict=True):
        mine = ours(case)
        errors_seen += "error" in karmada
        if ("error" in karmada) != ("error" in mine) or karmada.get("result") != mine.get("result"):
            mismatches += 1
            if mismatches <= 3:
                print(f"  differs: {case}\n    Karmada: {karmada}\n    ours:    {mine}")
    print(f"{binary.name}: {len(cases)} cases ({errors_seen} unschedulable), "
          f"{mismatches} differ")
    return mismatches


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=3000)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    with tempfile.TemporaryDirectory() as out:
        subprocess.run(["go", "build", "-o", out + "/", "./..."], cwd=HERE, check=True)
        bad = compare(pathlib.Path(out, "assign"), assign_cases(rng, args.cases), ours_assign)
        bad += compare(pathlib.Path(out, "spread"), spread_cases(rng, args.cases), ours_spread)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
