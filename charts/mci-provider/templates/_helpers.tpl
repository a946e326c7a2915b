{{/* Name of the chart's objects: the release name, or <release>-clusterhealth-mci-provider. */}}
{{- define "mci.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "mci.selectorLabels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "mci.labels" -}}
{{ include "mci.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/component: mci-controller
app.kubernetes.io/part-of: clusterhealth
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{/* The Lease the replicas elect their leader with (the leases Role is restricted to it). */}}
{{- define "mci.leaseName" -}}
{{- include "mci.fullname" . -}}
{{- end -}}

{{/* The port serving /metrics, /healthz and /readyz (--healthz-port). */}}
{{- define "mci.healthzPort" -}}10360{{- end -}}

{{/* True when the controller runs here (target=controlPlane, not rbacOnly). */}}
{{- define "mci.runsHere" -}}
{{- if and (eq .Values.target "controlPlane") (not .Values.rbacOnly) -}}true{{- end -}}
{{- end -}}

{{/* True when the control-plane RBAC and the IngressClass belong in this API server:
     rbacOnly, or the controller runs in-cluster. With kubeconfigSecret the controller
     works on another API server and needs nothing here. */}}
{{- define "mci.managedHere" -}}
{{- if and (eq .Values.target "controlPlane") (or .Values.rbacOnly (not .Values.kubeconfigSecret.name)) -}}true{{- end -}}
{{- end -}}

{{/* The only namespace whose Secrets the controller reads: its own read-only member
     credentials (memberCredentials.mode readonly), or the Clusters' secretRef (cluster). */}}
{{- define "mci.secretNamespace" -}}
{{- if eq .Values.memberCredentials.mode "readonly" -}}
{{- .Values.memberCredentials.namespace -}}
{{- else -}}
{{- .Values.clusterSecretNamespace -}}
{{- end -}}
{{- end -}}

{{/* True when haproxy.socket is a UNIX socket path (else host:port). */}}
{{- define "mci.unixSocket" -}}
{{- if hasPrefix "/" (include "mci.socketPath" .) -}}true{{- end -}}
{{- end -}}

{{/* haproxy.socket without the optional unix@ prefix. */}}
{{- define "mci.socketPath" -}}
{{- trimPrefix "unix@" .Values.haproxy.socket -}}
{{- end -}}

{{/* True when the HAProxy sidecar runs in the pod. */}}
{{- define "mci.sidecar" -}}
{{- if and (eq .Values.provider "haproxy") .Values.haproxy.sidecar.enabled -}}true{{- end -}}
{{- end -}}

{{/* The sidecar's shared emptyDir and its HAProxy config. */}}
{{- define "mci.socketDir" -}}/var/run/haproxy{{- end -}}
{{- define "mci.haproxyConfigDir" -}}/usr/local/etc/haproxy{{- end -}}
{{/* The map files' directory: the provider's HAProxyLayout.map_dir (the runtime API
     names a map by its path, so it must be the same). */}}
{{- define "mci.haproxyMapDir" -}}/etc/haproxy/mci{{- end -}}

{{/* A duration (<number><ms|s|m|h>, as the schema allows) in milliseconds. */}}
{{- define "mci.milliseconds" -}}
{{- $unit := regexFind "(ms|s|m|h)$" . -}}
{{- $factor := get (dict "ms" 1 "s" 1000 "m" 60000 "h" 3600000) $unit -}}
{{- mulf (trimSuffix $unit . | float64) $factor -}}
{{- end -}}

{{/* Refuse combinations the controller would refuse at start, or that cannot work. */}}
{{- define "mci.validate" -}}
{{- $le := .Values.leaderElection -}}
{{- $lease := include "mci.milliseconds" $le.leaseDuration | float64 -}}
{{- $renew := include "mci.milliseconds" $le.renewDeadline | float64 -}}
{{- $retry := include "mci.milliseconds" $le.retryPeriod | float64 -}}
{{- if not (and (gt $lease $renew) (gt $renew $retry)) -}}
{{- fail (printf "leaderElection: leaseDuration (%s) > renewDeadline (%s) > retryPeriod (%s) is required" $le.leaseDuration $le.renewDeadline $le.retryPeriod) -}}
{{- end -}}
{{- if and (eq .Values.target "member") .Values.crds.enabled -}}
{{- fail "target=member renders the RBAC of a member cluster, which needs none of the CRDs: set crds.enabled=false" -}}
{{- end -}}
{{- if and .Values.kubeconfigSecret.name (not .Values.rbacOnly) .Values.crds.enabled -}}
{{- fail "kubeconfigSecret is set, so the controller manages another API server: set crds.enabled=false here (the CRDs belong in that API server; a real Karmada has its own)" -}}
{{- end -}}
{{- $sidecar := .Values.haproxy.sidecar -}}
{{- if include "mci.sidecar" . -}}
{{- if ne (dir (include "mci.socketPath" .)) (include "mci.socketDir" .) -}}
{{- fail (printf "haproxy.sidecar.enabled: haproxy.socket must be a UNIX socket in %s, the directory the sidecar shares with the controller (it is %s); to drive your own HAProxy, set haproxy.sidecar.enabled=false" (include "mci.socketDir" .) .Values.haproxy.socket) -}}
{{- end -}}
{{- if .Values.haproxy.socketVolume -}}
{{- fail "haproxy.sidecar.enabled: the sidecar shares its socket through an emptyDir; leave haproxy.socketVolume empty (or set haproxy.sidecar.enabled=false to use your own HAProxy)" -}}
{{- end -}}
{{- if eq (int $sidecar.frontendPort) (int (include "mci.healthzPort" .)) -}}
{{- fail (printf "haproxy.sidecar.frontendPort must not be %s, the controller's metrics port in the same pod" (include "mci.healthzPort" .)) -}}
{{- end -}}
{{- end -}}
{{- if and .Values.haproxy.socketVolume (not (include "mci.unixSocket" .)) -}}
{{- fail (printf "haproxy.socketVolume is for a UNIX socket; haproxy.socket is %s (host:port)" .Values.haproxy.socket) -}}
{{- end -}}
{{- end -}}

{{/* The sidecar's haproxy.cfg: line for line what
     clusterhealth_mci.providers.haproxy.config.render() writes for
     HAProxyLayout(bind_port=frontendPort, admin_socket=socket, slots, servers_per_slot)
     with every other setting at its default. Change both together. */}}
{{- define "mci.haproxyConfig" -}}
{{- $haproxy := .Values.haproxy -}}
{{- $socket := include "mci.socketPath" . -}}
{{- if not (contains "/" $socket) -}}{{- $socket = printf "ipv4@%s" $socket -}}{{- end -}}
{{- $exact := printf "%s/exact.map" (include "mci.haproxyMapDir" .) -}}
{{- $prefix := printf "%s/prefix.map" (include "mci.haproxyMapDir" .) -}}
{{- $slots := printf "%s/slots.map" (include "mci.haproxyMapDir" .) -}}
{{- $unset := "if !{ var(txn.mci_be) -m found }" -}}
# Rendered by clusterhealth_mci.providers.haproxy.config -- the MCI provider
# drives this layout through the runtime API; do not edit by hand.
global
    stats socket {{ $socket }} mode 600 level admin expose-fd listeners
    stats timeout 2m

defaults
    mode http
    no log
    timeout connect 3s
    timeout client 60s
    timeout server 60s
    timeout http-request 10s
    timeout http-keep-alive 10s
    timeout queue 10s
    # Per-request balancing, keep-alive on both sides; a pooled server
    # connection is only reused for the server the balancer picked.
    option http-keep-alive
    no option prefer-last-server
    http-reuse safe
    # A connection refused by a just-removed endpoint is retried elsewhere.
    retries 3
    option redispatch 1
    retry-on conn-failure
    option forwardfor

frontend mci
    bind 0.0.0.0:{{ $haproxy.sidecar.frontendPort }}
    # Keys: <host><path> (host lower case, port dropped), *.<domain><path>, <path>.
    http-request set-var(txn.mci_path) path
    http-request set-var(txn.mci_host) req.fhdr(host),lower,regsub(:[0-9]+$,)
    http-request set-var(txn.mci_wild) var(txn.mci_host),regsub(^[^.]+,*)
    http-request set-var(txn.mci_k1) var(txn.mci_host),concat(,txn.mci_path,)
    http-request set-var(txn.mci_k2) var(txn.mci_wild),concat(,txn.mci_path,)
    # The first match wins: host, wildcard host, any host; exact before longest prefix.
    http-request set-var(txn.mci_be) var(txn.mci_k1),map_str({{ $exact }})
    http-request set-var(txn.mci_be) var(txn.mci_k1),map_beg({{ $prefix }}) {{ $unset }}
    http-request set-var(txn.mci_be) var(txn.mci_k2),map_str({{ $exact }}) {{ $unset }}
    http-request set-var(txn.mci_be) var(txn.mci_k2),map_beg({{ $prefix }}) {{ $unset }}
    http-request set-var(txn.mci_be) path,map_str({{ $exact }}) {{ $unset }}
    http-request set-var(txn.mci_be) path,map_beg({{ $prefix }}) {{ $unset }}
    use_backend %[var(txn.mci_be)] if { var(txn.mci_be) -m found }
    default_backend mci_default

backend mci_default
    http-request return status 503 content-type text/plain string "no MultiClusterIngress route for this host and path\n"

# Never used for routing: the map only has to exist for the runtime API.
backend mci_bookkeeping
    http-request set-var(txn.mci_owner) str(),map_str({{ $slots }})
{{- range $index := until (int $haproxy.slots) }}

backend mci_slot_{{ $index }}
    balance roundrobin
    server-template s 1-{{ $haproxy.serversPerSlot }} 0.0.0.0:1 disabled
{{- end }}
{{- end -}}

{{/* The image reference of an image block ({registry, repository, tag, digest}), the same
     helper in every clusterhealth chart (tests/charts/test_charts.py checks they agree):
     global.imageRegistry, when set, replaces image.registry (one mirror for every image of
     an offline install); the tag is image.tag, else global.imageTag, else the chart's
     appVersion; a digest (sha256:...) pins the image: <registry>/<repository>@<digest>.
     Call: include "clusterhealth.image" (dict "image" .Values.image "root" .) */}}
{{- define "clusterhealth.image" -}}
{{- $global := .root.Values.global | default dict -}}
{{- $registry := $global.imageRegistry | default .image.registry | default "" | trimSuffix "/" -}}
{{- $name := ternary (printf "%s/%s" $registry .image.repository) .image.repository (ne $registry "") -}}
{{- if .image.digest -}}
{{- printf "%s@%s" $name .image.digest -}}
{{- else -}}
{{- printf "%s:%s" $name (.image.tag | default $global.imageTag | default .root.Chart.AppVersion) -}}
{{- end -}}
{{- end -}}
