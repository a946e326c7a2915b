"""The MultiClusterIngress controllers and their load-balancer providers.

``plan`` turns an MCI, where its Services run and which clusters are blocked
into the desired load-balancer state (pure); ``members`` watches Services and
EndpointSlices in the member clusters; ``controller`` keeps MCI status
(``serviceLocations``, ``trafficBlockClusters``, ``loadBalancer``) and drives a
``providers`` implementation (HAProxy, or a fake for tests).
"""
