{{/* Name of the chart's objects: the release name, or <release>-clusterhealth-remedy. */}}
{{- define "remedy.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "remedy.selectorLabels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "remedy.labels" -}}
{{ include "remedy.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/component: remedy-controller
app.kubernetes.io/part-of: clusterhealth
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{/* The Lease the replicas elect their leader with (the leases Role is restricted to it). */}}
{{- define "remedy.leaseName" -}}
{{- include "remedy.fullname" . -}}
{{- end -}}

{{/* True when the controller runs here (not rbacOnly). */}}
{{- define "remedy.runsHere" -}}
{{- if not .Values.rbacOnly -}}true{{- end -}}
{{- end -}}

{{/* True when the RBAC belongs in this API server: rbacOnly, or the controller runs
     in-cluster. With kubeconfigSecret the controller uses another API server's
     identity and needs nothing here. */}}
{{- define "remedy.rbacHere" -}}
{{- if or .Values.rbacOnly (not .Values.kubeconfigSecret.name) -}}true{{- end -}}
{{- end -}}

{{/* A duration (<number><ms|s|m|h>, as the schema allows) in milliseconds. */}}
{{- define "remedy.milliseconds" -}}
{{- $unit := regexFind "(ms|s|m|h)$" . -}}
{{- $factor := get (dict "ms" 1 "s" 1000 "m" 60000 "h" 3600000) $unit -}}
{{- mulf (trimSuffix $unit . | float64) $factor -}}
{{- end -}}

{{/* Refuse combinations the controller would refuse at start, or that cannot work. */}}
{{- define "remedy.validate" -}}
{{- $le := .Values.leaderElection -}}
{{- $lease := include "remedy.milliseconds" $le.leaseDuration | float64 -}}
{{- $renew := include "remedy.milliseconds" $le.renewDeadline | float64 -}}
{{- $retry := include "remedy.milliseconds" $le.retryPeriod | float64 -}}
{{- if not (and (gt $lease $renew) (gt $renew $retry)) -}}
{{- fail (printf "leaderElection: leaseDuration (%s) > renewDeadline (%s) > retryPeriod (%s) is required" $le.leaseDuration $le.renewDeadline $le.retryPeriod) -}}
{{- end -}}
{{- if and .Values.kubeconfigSecret.name (not .Values.rbacOnly) .Values.crds.enabled -}}
{{- fail "kubeconfigSecret is set, so the controller manages another API server: set crds.enabled=false here (the CRDs belong in that API server; a real Karmada has its own)" -}}
{{- end -}}
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
