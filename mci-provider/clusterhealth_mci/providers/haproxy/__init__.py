"""The HAProxy provider: a real load balancer driven through its runtime API.

- :mod:`~clusterhealth_mci.providers.haproxy.config` renders the fixed
  ``haproxy.cfg`` (frontend, route maps, backend slots) the provider expects;
- :mod:`~clusterhealth_mci.providers.haproxy.runtime` talks to HAProxy's
  admin socket and parses its replies;
- :mod:`~clusterhealth_mci.providers.haproxy.provider` keeps the desired
  state and converges HAProxy to it (blocking by draining, restart recovery).

``docs/mci-haproxy.md`` explains the layout, the limits and why the
settings make blocking lossless.
"""
