"""Probes: one signature for every probe type (after blackbox_exporter).

``base`` holds the contract (:class:`~clusterhealth_agent.probes.base.Probe`,
:class:`~clusterhealth_agent.probes.base.ProbeResult`, the runner with the
shared deadline); one module per probe type implements it; ``config`` loads
and validates the probe configuration file; ``registry`` builds the probes
named by ``--detectors`` and the file (an explicit table, no import-time
registration).
"""
