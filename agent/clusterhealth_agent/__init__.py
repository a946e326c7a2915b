"""The detection agent: a DaemonSet pod per node probes cluster components.

Every pod probes on its own node and publishes its (hysteresis-filtered)
results as conditions on its ``Node``; the Lease-elected leader aggregates the
nodes and writes one condition per probe onto the member's ``Cluster`` in the
control plane (``ServiceDomainNameResolutionReady`` and friends).
"""
