"""The scheduler: which member clusters a binding goes to, with how many replicas.

Karmada-compatible (v1.18.2) scheduling. The decisions are pure, with no I/O and no
asyncio, so that every rule is tested with tables:

- :mod:`.framework`: the views the plugins see (own frozen dataclasses), the filter and
  score plugin protocols, and ``--plugins '*,-name'`` selection from a registry;
- :mod:`.plugins`: the in-tree filters and scores, and ``default_registry()``;
- :mod:`.spread`: spread constraints (cluster, region, zone, provider; min/max groups);
- :mod:`.assignment`: replica assignment (Duplicated, static weights by the Webster
  method, dynamic weights, Aggregated; scale up and down from the previous result);
- :mod:`.algorithm`: filters, then scores, then spread selection, then assignment;
- :mod:`.errors`: the typed reasons a binding cannot be scheduled.

The process (``python -m clusterhealth_controlplane.scheduler``, its own Lease) only
adapts the API models to them and writes the results:

- :mod:`.adapt`: API models to the views, available replicas, the applied placement;
- :mod:`.controller`: informers, when to (re)schedule, ``spec.clusters`` and the
  ``Scheduled`` condition;
- :mod:`.metrics`, :mod:`.settings`, :mod:`.app`, :mod:`.__main__`: the process.
"""
