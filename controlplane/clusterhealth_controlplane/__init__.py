"""Cluster failover (cluster health, taints, eviction, scheduling, propagation).

Reserved for the failover issue; nothing is implemented here yet.
"""
