"""The Remedy controller: Cluster conditions in, ``Cluster.status.remedyActions`` out.

``decision`` holds the pure rules (which Remedies act on a cluster and why);
``controller`` keeps caches of Clusters and Remedies and writes only the
status fields it owns; ``app`` wires settings, leader election and serving.
"""
