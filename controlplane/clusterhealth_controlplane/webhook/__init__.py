"""The default-tolerations admission webhook: its own process beside the controller manager.

A mutating ``admission.k8s.io/v1`` webhook, served over HTTPS to the API server, that
gives every PropagationPolicy and ClusterPropagationPolicy without them NoExecute
tolerations for ``cluster.karmada.io/not-ready`` and ``cluster.karmada.io/unreachable``
(``--default-not-ready-toleration-seconds``, ``--default-unreachable-toleration-seconds``),
so that a failed cluster's workloads move only after that long:

- :mod:`.decision`: the pure answer (AdmissionReview in, JSON Patch out), table-tested;
- :mod:`.server`: HTTPS with aiohttp, the certificate re-read when its files rotate;
- :mod:`.metrics`, :mod:`.settings`, :mod:`.app`, :mod:`.__main__`: the process
  (``python -m clusterhealth_controlplane.webhook``). It needs no API client, no
  Lease and no RBAC: every replica answers.
"""
