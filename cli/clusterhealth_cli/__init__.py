"""The ``clusterhealth`` command (also ``kubectl clusterhealth``): authoring and explaining.

A user-facing tool, not a component: it reads files and a control plane, never
writes to one.  ``remedy test`` runs Remedy unit tests (fixture Clusters and the
``remedyActions`` they should get) through the remedy controller's own decision
code; ``explain cluster`` tells what the system thinks of one Cluster and why.
"""
