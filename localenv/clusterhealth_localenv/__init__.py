"""A local multi-cluster world on real parts, for tests, the demo and benchmarks.

Real ``kube-apiserver``/``etcd`` (built from the Go module proxy), dnsmasq,
HAProxy, HTTP backends and network-namespace test hosts, all on this machine;
no component imports this package (they run as processes).
"""
