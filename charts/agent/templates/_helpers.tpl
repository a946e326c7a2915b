{{/* Name of the chart's objects: the release name, or <release>-clusterhealth-agent. */}}
{{- define "agent.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{/* The Cluster this agent reports for; every target needs it. */}}
{{- define "agent.clusterName" -}}
{{- required "clusterName is required: the name of this member's Cluster in the control plane (--set clusterName=<name>)" .Values.clusterName -}}
{{- end -}}

{{- define "agent.selectorLabels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "agent.labels" -}}
{{ include "agent.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/component: agent
app.kubernetes.io/part-of: clusterhealth
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{/* The Lease the agents elect their leader with (the leases Role is restricted to it). */}}
{{- define "agent.leaseName" -}}
{{- include "agent.fullname" . -}}
{{- end -}}

{{/* True when some probe needs to read kube-system Services and EndpointSlices. */}}
{{- define "agent.needsKubeSystem" -}}
{{- if has "coredns" .Values.detectors -}}true{{- end -}}
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
