"""The cluster-status controller: whether each member is Ready, and what it offers.

``decision`` is pure (the Ready condition from a probe result with the
success/failure thresholds and the monitor grace period, the served APIs,
the node and resource summaries); ``controller`` probes the members, keeps
per-member Node and Pod caches, and writes its own fields of
``Cluster.status`` by server-side apply; ``discovery`` reads each member's
served APIs again only when its aggregated discovery changed (``ETag``).
"""
