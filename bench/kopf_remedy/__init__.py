"""The Remedy controller's behaviour on kopf: a benchmark-only prototype (issue 8, section 7).

The project's brief names kopf; issue 8 asks to decide it by measurement, not
opinion.  This package rebuilds what ``clusterhealth_remedy`` does to
``Cluster.status.remedyActions`` with kopf's own mechanisms (indexes, event
handlers, its patching, Event posting, peering) and the same rules
(:mod:`clusterhealth_remedy.decision`, imported, never copied), so that
``bench/kopf_compare.py`` can run both on one API server and compare them.

It is not a product: it is not packaged, not in the chart, and writes no
Remedy status and no metrics (see ``docs/decisions/0003-kopf.md``).
Run: ``python -m bench.kopf_remedy --kubeconfig PATH [--peering NAME --priority N]``.
"""
