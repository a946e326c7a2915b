"""The webhook's metric families, on an injected registry.

Served by the process's health server on ``/metrics``, beside ``/healthz`` and
``/readyz``: admission requests by policy kind and result (the results are
:data:`clusterhealth_controlplane.webhook.decision.RESULTS`), how long answering took,
and how often a rotated certificate was loaded.

The ``kind`` label takes the policy kinds the webhook serves and :data:`OTHER`, never
what a request says it is: whoever reaches the port could otherwise make a series per
string they send, and the metrics endpoint would grow without bound.
"""

from __future__ import annotations

import prometheus_client

from clusterhealth_controlplane.webhook import decision

_BUCKETS = (0.0001, 0.0003, 0.001, 0.003, 0.01, 0.03, 0.1, 0.3, 1.0)
OTHER = "other"
"""The ``kind`` of every request that is not about a kind of :data:`decision.KINDS`."""


def kind_label(kind: str) -> str:
    """``kind`` when the webhook serves it, else :data:`OTHER`."""
    return kind if kind in decision.KINDS else OTHER


class WebhookMetrics:
    """Requests by kind and result, their duration, certificate reloads."""

    def __init__(self, registry: prometheus_client.CollectorRegistry) -> None:
        self.requests = prometheus_client.Counter(
            "clusterhealth_webhook_admission_requests",
            "Admission requests answered, by policy kind (PropagationPolicy, "
            "ClusterPropagationPolicy, or other) and result: mutated (tolerations added), "
            "unchanged (it had them), ignored (not a policy CREATE/UPDATE), malformed (its "
            "fields could not be read: allowed with a warning), invalid (not an "
            "AdmissionReview: HTTP 400), too_large (over the size limit: HTTP 413).",
            ["kind", "result"], registry=registry)
        self.duration = prometheus_client.Histogram(
            "clusterhealth_webhook_admission_duration_seconds",
            "From the request read to the answer built.", registry=registry,
            buckets=_BUCKETS)
        self.certificate_reloads = prometheus_client.Counter(
            "clusterhealth_webhook_certificate_reloads",
            "Times a rotated serving certificate was loaded (new connections use it).",
            registry=registry)
        for kind in decision.KINDS:
            for result in (decision.MUTATED, decision.UNCHANGED, decision.MALFORMED):
                self.requests.labels(kind, result)
        for result in (decision.IGNORED, decision.INVALID, decision.TOO_LARGE):
            self.requests.labels(OTHER, result)

    def count(self, kind: str, result: str) -> None:
        """One request answered (``kind`` as the request says: :func:`kind_label` bounds it)."""
        self.requests.labels(kind_label(kind), result).inc()
