"""The failback controller: replicas brought back to a recovered cluster, when a policy asks.

``decision`` is pure (the opt-in, the evictions a binding records, whether a
cluster has been healthy long enough and still fits the placement, when a
binding is rebalanced); ``controller`` reads bindings, policies and Clusters
through informers and writes the record and the reschedule trigger.
"""
