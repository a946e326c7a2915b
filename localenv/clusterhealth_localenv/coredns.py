"""CoreDNS installed the way kubeadm installs it: the objects, as pure functions.

kubeadm v1.34's DNS add-on (``cmd/kubeadm/app/phases/addons/dns``) is a
ServiceAccount ``coredns``, a ClusterRole and ClusterRoleBinding
``system:coredns``, a ConfigMap ``coredns`` holding the Corefile, a Deployment
``coredns`` (label ``k8s-app: kube-dns``, two replicas spread over Nodes) and
the Service ``kube-dns`` at the tenth address of the Service range, all in
``kube-system``; each kubelet's ``clusterDNS`` points at that Service.
:func:`objects` returns the same objects, with two differences that follow
from the environment's rules: the image is our own build
(:mod:`.images`, no registry), and the Corefile forwards names outside the
cluster domain only to an upstream the caller names (kubeadm forwards to the
Node's ``/etc/resolv.conf``, here a machine's real resolver, which the tests may
not reach); without one, ``forward`` and ``loop`` are left out.  The caller may
also probe readiness more often than Kubernetes' default (``readiness_period``).
"""

from __future__ import annotations

from typing import Any

NAMESPACE = "kube-system"
DEPLOYMENT = "coredns"
SERVICE = "kube-dns"
LABELS = {"k8s-app": "kube-dns"}


def corefile(domain: str = "cluster.local", upstream: str | None = None) -> str:
    """kubeadm's Corefile, forwarding to ``upstream`` only when given."""
    lines = [
        ".:53 {",
        "    errors",
        "    health {",
        "       lameduck 5s",
        "    }",
        "    ready",
        f"    kubernetes {domain} in-addr.arpa ip6.arpa {{",
        "       pods insecure",
        "       fallthrough in-addr.arpa ip6.arpa",
        "       ttl 30",
        "    }",
        "    prometheus :9153",
    ]
    if upstream is not None:
        lines += [f"    forward . {upstream} {{", "       max_concurrent 1000", "    }"]
    lines += [
        "    cache 30 {",
        f"       disable success {domain}",
        f"       disable denial {domain}",
        "    }",
    ]
    if upstream is not None:
        lines.append("    loop")
    lines += ["    reload", "    loadbalance", "}", ""]
    return "\n".join(lines)


def objects(image: str, dns_ip: str, replicas: int = 2, domain: str = "cluster.local",
            upstream: str | None = None, readiness_period: int | None = None,
            ) -> list[tuple[str, dict[str, Any]]]:
    """``(kind, object)`` pairs in the order to create them.

    ``readiness_period``: seconds between readiness probes (kubeadm leaves Kubernetes'
    default, 10 s: a started replica serves about 10 s after it could).
    """
    meta = {"namespace": NAMESPACE}
    ports = [("dns", 53, "UDP"), ("dns-tcp", 53, "TCP"), ("metrics", 9153, "TCP")]
    container = {
        "name": "coredns",
        "image": image,
        "imagePullPolicy": "IfNotPresent",
        "resources": {"limits": {"memory": "170Mi"},
                      "requests": {"cpu": "100m", "memory": "70Mi"}},
        "args": ["-conf", "/etc/coredns/Corefile"],
        "volumeMounts": [{"name": "config-volume", "mountPath": "/etc/coredns",
                          "readOnly": True}],
        "ports": [*({"containerPort": port, "name": name, "protocol": protocol}
                    for name, port, protocol in ports),
                  {"containerPort": 8080, "name": "liveness-probe", "protocol": "TCP"},
                  {"containerPort": 8181, "name": "readiness-probe", "protocol": "TCP"}],
        "livenessProbe": {"httpGet": {"path": "/health", "port": "liveness-probe",
                                      "scheme": "HTTP"},
                          "initialDelaySeconds": 60, "timeoutSeconds": 5,
                          "successThreshold": 1, "failureThreshold": 5},
        "readinessProbe": {"httpGet": {"path": "/ready", "port": "readiness-probe",
                                       "scheme": "HTTP"},
                           **({"periodSeconds": readiness_period} if readiness_period else {})},
        "securityContext": {"allowPrivilegeEscalation": False,
                            "capabilities": {"add": ["NET_BIND_SERVICE"], "drop": ["ALL"]},
                            "readOnlyRootFilesystem": True},
    }
    pod_spec = {
        "priorityClassName": "system-cluster-critical",
        "serviceAccountName": "coredns",
        "affinity": {"podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [{
            "weight": 100,
            "podAffinityTerm": {"labelSelector": {"matchExpressions": [
                {"key": "k8s-app", "operator": "In", "values": ["kube-dns"]}]},
                "topologyKey": "kubernetes.io/hostname"}}]}},
        "tolerations": [{"key": "CriticalAddonsOnly", "operator": "Exists"},
                        {"key": "node-role.kubernetes.io/control-plane",
                         "effect": "NoSchedule"}],
        "nodeSelector": {"kubernetes.io/os": "linux"},
        "containers": [container],
        "dnsPolicy": "Default",
        "volumes": [{"name": "config-volume", "configMap": {
            "name": "coredns", "items": [{"key": "Corefile", "path": "Corefile"}]}}],
    }
    return [
        ("ServiceAccount", {"apiVersion": "v1", "kind": "ServiceAccount",
                            "metadata": {"name": "coredns", **meta}}),
        ("ClusterRole", {
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
            "metadata": {"name": "system:coredns"},
            "rules": [{"apiGroups": [""],
                       "resources": ["endpoints", "services", "pods", "namespaces"],
                       "verbs": ["list", "watch"]},
                      {"apiGroups": ["discovery.k8s.io"], "resources": ["endpointslices"],
                       "verbs": ["list", "watch"]}]}),
        ("ClusterRoleBinding", {
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
            "metadata": {"name": "system:coredns"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                        "name": "system:coredns"},
            "subjects": [{"kind": "ServiceAccount", "name": "coredns",
                          "namespace": NAMESPACE}]}),
        ("ConfigMap", {"apiVersion": "v1", "kind": "ConfigMap",
                       "metadata": {"name": "coredns", **meta},
                       "data": {"Corefile": corefile(domain, upstream)}}),
        ("Deployment", {
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": DEPLOYMENT, **meta, "labels": dict(LABELS)},
            "spec": {"replicas": replicas,
                     "strategy": {"type": "RollingUpdate",
                                  "rollingUpdate": {"maxUnavailable": 1}},
                     "selector": {"matchLabels": dict(LABELS)},
                     "template": {"metadata": {"labels": dict(LABELS)}, "spec": pod_spec}}}),
        ("Service", {
            "apiVersion": "v1", "kind": "Service",
            "metadata": {"name": SERVICE, **meta,
                         "labels": {**LABELS, "kubernetes.io/cluster-service": "true",
                                    "kubernetes.io/name": "CoreDNS"},
                         "annotations": {"prometheus.io/port": "9153",
                                         "prometheus.io/scrape": "true"}},
            "spec": {"clusterIP": dns_ip, "selector": dict(LABELS),
                     "ports": [{"name": name, "port": port, "protocol": protocol,
                                "targetPort": port} for name, port, protocol in ports]}}),
    ]
