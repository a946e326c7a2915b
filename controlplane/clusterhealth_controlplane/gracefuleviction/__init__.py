"""The graceful-eviction controller: tasks on bindings ended once their replacement is healthy.

``decision`` is pure (which tasks of a binding end now, why, and when to look
again); ``controller`` reads bindings through informers and writes the kept
tasks back in one guarded update.
"""
