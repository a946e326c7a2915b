"""The taint manager: bindings leave NoExecute-tainted clusters, at a guarded pace.

- :mod:`.decision`: pure rules (when a binding is due for eviction, the
  eviction itself, the storm guard and its condition), table-tested;
- :mod:`.controller`: informers, the decision and eviction queues, the
  pacer, the storm guard's metrics, Events and Cluster condition.
"""
