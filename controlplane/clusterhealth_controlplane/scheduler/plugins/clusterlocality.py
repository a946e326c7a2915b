"""ClusterLocality score: clusters already running the binding are preferred (100, else 0).

Karmada's ``clusterlocality`` plugin. This score is what keeps a Duplicated binding on
its healthy clusters when it is scheduled again: the current targets rank first when
spread constraints take the best clusters.
"""

from __future__ import annotations

from clusterhealth_controlplane.scheduler import framework

NAME = "ClusterLocality"
"""The plugin's name in the registry and in ``--plugins``."""


class ClusterLocality:
    """Scores the clusters in the binding's current result highest."""

    name = NAME

    def score(self, cycle: framework.Cycle, cluster: framework.ClusterView) -> int:
        """``MAX_SCORE`` for a current target, else ``MIN_SCORE``."""
        if cluster.name in cycle.target_names:
            return framework.MAX_SCORE
        return framework.MIN_SCORE
