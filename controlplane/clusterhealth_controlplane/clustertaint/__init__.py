"""The cluster-taint controller: Ready and ClusterTaintPolicies made into Cluster taints.

``decision`` is pure (the taints a Cluster's conditions and the policies ask
for, and when the next NoExecute taint falls due); ``controller`` reads
Clusters and policies through informers and writes ``spec.taints``, the only
writer of that field in the control plane.
"""
