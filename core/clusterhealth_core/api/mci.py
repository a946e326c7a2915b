"""The ``networking.karmada.io/v1alpha1`` MultiClusterIngress (short name ``mci``).

Its spec is a ``networking.k8s.io/v1`` IngressSpec; its status adds the member
clusters behind each backend Service (``serviceLocations``) and the clusters
whose traffic must be blocked (``trafficBlockClusters``).  The MCI provider
reads both to program a load balancer that skips the blocked clusters.
"""

import dataclasses
import enum

from clusterhealth_core.api import groups, meta, wire

QUALIFIED_NAME_PATTERN = meta.CONDITION_TYPE_PATTERN
"""``foo.example.com/CamelCase`` or ``CamelCase`` (IngressPortStatus.error)."""

# Bounds of the status lists (``maxItems`` in the CRD).  A controller writing
# more than these gets 422 for the whole status, so writers cut their lists
# to these sizes and say in a condition what was left out.
MAX_CLUSTERS = 1024
"""``trafficBlockClusters`` and each ``serviceLocations[].clusters``."""
MAX_SERVICE_LOCATIONS = 256
"""``serviceLocations``: one entry per backend Service of the MCI."""
MAX_CONDITIONS = 8
"""``conditions`` (as in the Gateway API's status conditions)."""
MAX_LOAD_BALANCER_INGRESS = 16
"""``loadBalancer.ingress`` and each entry's ``ports``."""

# Bounds of the spec (networking.k8s.io's Ingress and Karmada's CRD set none): an MCI
# stays small enough to plan and program, and a longer list is refused by the API server.
MAX_RULES = 1024
"""``spec.rules`` (hosts)."""
MAX_PATHS = 1024
"""``spec.rules[].http.paths``."""
MAX_TLS = 1024
"""``spec.tls`` entries, and ``hosts`` in each."""
HOST_MAX_LENGTH = 253
"""Characters of a host name (a DNS name)."""


class PathType(enum.StrEnum):
    """networking.k8s.io/v1 PathType."""

    EXACT = "Exact"
    PREFIX = "Prefix"
    IMPLEMENTATION_SPECIFIC = "ImplementationSpecific"


class Protocol(enum.StrEnum):
    """corev1.Protocol."""

    TCP = "TCP"
    UDP = "UDP"
    SCTP = "SCTP"


@dataclasses.dataclass(frozen=True, kw_only=True)
class ServiceBackendPort(wire.Model):
    """A Service port, by name or by number (exactly one)."""

    WIRE_ATOMIC = True

    name: str | None = dataclasses.field(default=None, metadata=wire.json("name"))
    number: int | None = dataclasses.field(
        default=None, metadata=wire.json("number", fmt="int32", minimum=1, maximum=65535)
    )

    def check(self, path: str) -> None:
        """Exactly one of ``name`` and ``number``."""
        if (self.name is None) == (self.number is None):
            raise wire.ValidationError(path, "exactly one of name or number must be set")


@dataclasses.dataclass(frozen=True, kw_only=True)
class IngressServiceBackend(wire.Model):
    """A Service (in the MCI's namespace) and port to send traffic to."""

    name: str = dataclasses.field(metadata=wire.json("name", min_length=1))
    port: ServiceBackendPort = dataclasses.field(metadata=wire.json("port"))


@dataclasses.dataclass(frozen=True, kw_only=True)
class TypedLocalObjectReference(wire.Model):
    """A non-Service backend object in the MCI's namespace."""

    WIRE_ATOMIC = True

    api_group: str | None = dataclasses.field(default=None, metadata=wire.json("apiGroup"))
    kind: str = dataclasses.field(metadata=wire.json("kind", min_length=1))
    name: str = dataclasses.field(metadata=wire.json("name", min_length=1))


@dataclasses.dataclass(frozen=True, kw_only=True)
class IngressBackend(wire.Model):
    """Where matching requests go: a Service or a resource (exactly one)."""

    service: IngressServiceBackend | None = dataclasses.field(
        default=None, metadata=wire.json("service")
    )
    resource: TypedLocalObjectReference | None = dataclasses.field(
        default=None, metadata=wire.json("resource")
    )

    def check(self, path: str) -> None:
        """Exactly one of ``service`` and ``resource``."""
        if (self.service is None) == (self.resource is None):
            raise wire.ValidationError(path, "exactly one of service or resource must be set")


@dataclasses.dataclass(frozen=True, kw_only=True)
class IngressTLS(wire.Model):
    """TLS termination for some hosts."""

    hosts: tuple[str, ...] = dataclasses.field(
        default=(), metadata=wire.json("hosts", list_type="atomic", max_items=MAX_TLS,
                                       max_length=HOST_MAX_LENGTH)
    )
    secret_name: str | None = dataclasses.field(default=None, metadata=wire.json("secretName"))


@dataclasses.dataclass(frozen=True, kw_only=True)
class HTTPIngressPath(wire.Model):
    """A path and the backend serving it."""

    path: str | None = dataclasses.field(default=None, metadata=wire.json("path"))
    path_type: PathType = dataclasses.field(metadata=wire.json("pathType"))
    backend: IngressBackend = dataclasses.field(metadata=wire.json("backend"))

    def check(self, path: str) -> None:
        """A set path is absolute; only ImplementationSpecific may omit it."""
        if self.path is None:
            if self.path_type is not PathType.IMPLEMENTATION_SPECIFIC:
                raise wire.ValidationError(
                    f"{path}.path", f"required when pathType is {self.path_type.value}"
                )
        elif not self.path.startswith("/"):
            raise wire.ValidationError(f"{path}.path", "must be an absolute path (start with /)")


@dataclasses.dataclass(frozen=True, kw_only=True)
class HTTPIngressRuleValue(wire.Model):
    """The HTTP paths of one rule."""

    paths: tuple[HTTPIngressPath, ...] = dataclasses.field(
        metadata=wire.json("paths", list_type="atomic", max_items=MAX_PATHS)
    )


@dataclasses.dataclass(frozen=True, kw_only=True)
class IngressRule(wire.Model):
    """Paths for one host (or for every host when ``host`` is absent)."""

    host: str | None = dataclasses.field(
        default=None, metadata=wire.json("host", max_length=HOST_MAX_LENGTH)
    )
    http: HTTPIngressRuleValue | None = dataclasses.field(default=None, metadata=wire.json("http"))


@dataclasses.dataclass(frozen=True, kw_only=True)
class IngressSpec(wire.Model):
    """networking.k8s.io/v1 IngressSpec."""

    ingress_class_name: str | None = dataclasses.field(
        default=None, metadata=wire.json("ingressClassName")
    )
    default_backend: IngressBackend | None = dataclasses.field(
        default=None, metadata=wire.json("defaultBackend")
    )
    tls: tuple[IngressTLS, ...] = dataclasses.field(
        default=(), metadata=wire.json("tls", list_type="atomic", max_items=MAX_TLS)
    )
    rules: tuple[IngressRule, ...] = dataclasses.field(
        default=(), metadata=wire.json("rules", list_type="atomic", max_items=MAX_RULES)
    )

    def check(self, path: str) -> None:
        """Kubernetes requires rules or a default backend."""
        if not self.rules and self.default_backend is None:
            raise wire.ValidationError(path, "either defaultBackend or rules must be specified")


@dataclasses.dataclass(frozen=True, kw_only=True)
class IngressPortStatus(wire.Model):
    """The state of one load-balancer port."""

    port: int = dataclasses.field(metadata=wire.json("port", fmt="int32", minimum=1, maximum=65535))
    protocol: Protocol = dataclasses.field(metadata=wire.json("protocol"))
    error: str | None = dataclasses.field(
        default=None, metadata=wire.json("error", pattern=QUALIFIED_NAME_PATTERN, max_length=316)
    )


@dataclasses.dataclass(frozen=True, kw_only=True)
class IngressLoadBalancerIngress(wire.Model):
    """One load-balancer ingress point."""

    ip: str | None = dataclasses.field(default=None, metadata=wire.json("ip"))
    hostname: str | None = dataclasses.field(default=None, metadata=wire.json("hostname"))
    ports: tuple[IngressPortStatus, ...] = dataclasses.field(
        default=(),
        metadata=wire.json("ports", list_type="atomic", max_items=MAX_LOAD_BALANCER_INGRESS),
    )


@dataclasses.dataclass(frozen=True, kw_only=True)
class IngressLoadBalancerStatus(wire.Model):
    """The load balancer's ingress points."""

    ingress: tuple[IngressLoadBalancerIngress, ...] = dataclasses.field(
        default=(),
        metadata=wire.json("ingress", list_type="atomic", max_items=MAX_LOAD_BALANCER_INGRESS),
    )


@dataclasses.dataclass(frozen=True, kw_only=True)
class ServiceLocation(wire.Model):
    """The member clusters running one backend Service."""

    name: str = dataclasses.field(metadata=wire.json("name", min_length=1))
    clusters: tuple[str, ...] = dataclasses.field(
        default=(), metadata=wire.json("clusters", max_items=MAX_CLUSTERS)
    )


@dataclasses.dataclass(frozen=True, kw_only=True)
class MultiClusterIngressStatus(wire.Model):
    """IngressStatus plus where backends run and which clusters are blocked."""

    load_balancer: IngressLoadBalancerStatus = dataclasses.field(
        default_factory=IngressLoadBalancerStatus, metadata=wire.json("loadBalancer")
    )
    traffic_block_clusters: tuple[str, ...] = dataclasses.field(
        default=(), metadata=wire.json("trafficBlockClusters", max_items=MAX_CLUSTERS)
    )
    service_locations: tuple[ServiceLocation, ...] = dataclasses.field(
        default=(),
        metadata=wire.json("serviceLocations", list_type="map", list_map_keys=("name",),
                           max_items=MAX_SERVICE_LOCATIONS),
    )
    conditions: tuple[meta.Condition, ...] = meta.conditions(max_items=MAX_CONDITIONS)


@dataclasses.dataclass(frozen=True, kw_only=True)
class MultiClusterIngress(meta.Object, resource=groups.MCI):
    """networking.karmada.io/v1alpha1 MultiClusterIngress (namespaced)."""

    spec: IngressSpec = meta.spec()
    status: MultiClusterIngressStatus = meta.status(MultiClusterIngressStatus)
