"""The namespace sync: every control-plane namespace in every member, with its labels.

``decision`` is pure (which namespaces are propagated, the Work for each member);
``controller`` writes one Work per namespace and Cluster, as Karmada's namespace sync
controller does, so that Pod Security admission labels set on the control plane reach the
members before the workloads do.
"""
