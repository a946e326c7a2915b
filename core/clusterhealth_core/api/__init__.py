"""Typed models of the Karmada-compatible resources this system reads and writes.

The CRDs in ``charts/clusterhealth-crds/crds/`` and the dataclasses here describe
the same wire shape; ``tests/api`` proves that they agree field by field.
"""
