"""Load-balancer providers of the MultiClusterIngress controller.

The controller turns each MultiClusterIngress into a Kubernetes-free
:class:`~clusterhealth_mci.providers.base.LoadBalancerSpec` (routes, backends
with every located endpoint, the clusters to block) and hands it to a
provider, which makes a load balancer serve it.  Karmada's own provider
interface has the same four calls per MCI; ours adds ``resync`` so that a
restarted load balancer (or a restarted controller) converges to exactly the
desired set.

- :mod:`~clusterhealth_mci.providers.base` -- the contract and its data types;
- :mod:`~clusterhealth_mci.providers.plan` -- the pure route table and
  weights both providers share;
- :mod:`~clusterhealth_mci.providers.fake` -- in memory, for the
  controller's unit tests;
- :mod:`~clusterhealth_mci.providers.haproxy` -- a real HAProxy driven
  through its runtime API.
"""
