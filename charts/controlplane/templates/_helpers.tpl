{{/* Base name of the chart's objects: the release name, or <release>-clusterhealth-controlplane.
     Each component's objects add its name: <base>-controller-manager, <base>-scheduler. */}}
{{- define "controlplane.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{/* The components: their Deployment's name suffix, module, port and flags. */}}
{{- define "controlplane.components" -}}
controller-manager: {module: clusterhealth_controlplane, port: 10357, values: controllerManager, key: controllerManagerKey}
scheduler: {module: clusterhealth_controlplane.scheduler, port: 10351, values: scheduler, key: schedulerKey}
{{- end -}}

{{/* (list $ "scheduler") -> the component's name: Deployment, metrics Service,
     ServiceAccount, Lease, RBAC. The base is shortened so that the component's suffix
     always survives within the 63 characters of a Service name. */}}
{{- define "controlplane.name" -}}
{{- $root := index . 0 -}}
{{- $component := index . 1 -}}
{{- $base := include "controlplane.fullname" $root | trunc (int (sub 62 (len $component))) | trimSuffix "-" -}}
{{- printf "%s-%s" $base $component -}}
{{- end -}}

{{- define "controlplane.selectorLabels" -}}
{{- $root := index . 0 -}}
app.kubernetes.io/name: {{ $root.Chart.Name }}
app.kubernetes.io/instance: {{ $root.Release.Name }}
app.kubernetes.io/component: {{ index . 1 }}
{{- end -}}

{{- define "controlplane.labels" -}}
{{- $root := index . 0 -}}
{{ include "controlplane.selectorLabels" . }}
app.kubernetes.io/version: {{ $root.Chart.AppVersion | quote }}
app.kubernetes.io/part-of: clusterhealth
app.kubernetes.io/managed-by: {{ $root.Release.Service }}
helm.sh/chart: {{ printf "%s-%s" $root.Chart.Name $root.Chart.Version }}
{{- end -}}

{{/* The components rendered: the controller manager always, the scheduler when enabled. */}}
{{- define "controlplane.enabledComponents" -}}
{{- $names := list "controller-manager" -}}
{{- if .Values.scheduler.enabled -}}{{- $names = append $names "scheduler" -}}{{- end -}}
{{- join "," $names -}}
{{- end -}}

{{/* True when the components run here (not rbacOnly). */}}
{{- define "controlplane.runsHere" -}}
{{- if not .Values.rbacOnly -}}true{{- end -}}
{{- end -}}

{{/* True when the webhook is rendered: enabled, and the components run in the API server
     they manage (its MutatingWebhookConfiguration belongs where the policies are written,
     which must reach the webhook's Service: not so with kubeconfigSecret or rbacOnly). */}}
{{- define "controlplane.webhookHere" -}}
{{- if and .Values.webhook.enabled (include "controlplane.runsHere" .) (not .Values.kubeconfigSecret.name) -}}true{{- end -}}
{{- end -}}

{{/* True when the RBAC belongs in this API server: rbacOnly, or the components run
     in-cluster. With kubeconfigSecret they use another API server's identities and
     need nothing here. */}}
{{- define "controlplane.rbacHere" -}}
{{- if or .Values.rbacOnly (not .Values.kubeconfigSecret.name) -}}true{{- end -}}
{{- end -}}

{{/* A duration (<number><ms|s|m|h>, as the schema allows) in milliseconds. */}}
{{- define "controlplane.milliseconds" -}}
{{- $unit := regexFind "(ms|s|m|h)$" . -}}
{{- $factor := get (dict "ms" 1 "s" 1000 "m" 60000 "h" 3600000) $unit -}}
{{- mulf (trimSuffix $unit . | float64) $factor -}}
{{- end -}}

{{/* The controllers --controllers selects, as the controller manager computes them
     (clusterhealth_core.selection): "*" adds every known one, "-name" leaves one out. */}}
{{- define "controlplane.selectedControllers" -}}
{{- $known := list "detector" "binding" "namespaceSync" "execution" "workStatus" "bindingStatus" "clusterStatus" "clusterTaint" "taintManager" "gracefulEviction" "failback" -}}
{{- $chosen := list -}}
{{- $excluded := list -}}
{{- range splitList "," .Values.controllerManager.controllers -}}
{{- if hasPrefix "-" . -}}
{{- $excluded = append $excluded (trimPrefix "-" .) -}}
{{- else if eq . "*" -}}
{{- $chosen = concat $chosen $known -}}
{{- else -}}
{{- $chosen = append $chosen . -}}
{{- end -}}
{{- end -}}
{{- $selected := list -}}
{{- range uniq $chosen -}}
{{- if not (has . $excluded) -}}{{- $selected = append $selected . -}}{{- end -}}
{{- end -}}
{{- join "," $selected -}}
{{- end -}}

{{/* Refuse combinations the components would refuse at start, or that cannot work. */}}
{{- define "controlplane.validate" -}}
{{- $le := .Values.leaderElection -}}
{{- $lease := include "controlplane.milliseconds" $le.leaseDuration | float64 -}}
{{- $renew := include "controlplane.milliseconds" $le.renewDeadline | float64 -}}
{{- $retry := include "controlplane.milliseconds" $le.retryPeriod | float64 -}}
{{- if not (and (gt $lease $renew) (gt $renew $retry)) -}}
{{- fail (printf "leaderElection: leaseDuration (%s) > renewDeadline (%s) > retryPeriod (%s) is required" $le.leaseDuration $le.renewDeadline $le.retryPeriod) -}}
{{- end -}}
{{- if not (include "controlplane.selectedControllers" .) -}}
{{- fail (printf "controllerManager.controllers %q selects no controller" .Values.controllerManager.controllers) -}}
{{- end -}}
{{- if and .Values.kubeconfigSecret.name (not .Values.rbacOnly) .Values.crds.enabled -}}
{{- fail "kubeconfigSecret is set, so the components manage another API server: set crds.enabled=false here (the CRDs belong in that API server; a real Karmada has its own)" -}}
{{- end -}}
{{- if and .Values.kubeconfigSecret.name .Values.scheduler.enabled (eq .Values.kubeconfigSecret.controllerManagerKey .Values.kubeconfigSecret.schedulerKey) -}}
{{- fail "kubeconfigSecret: controllerManagerKey and schedulerKey must differ: each component has its own ServiceAccount (and RBAC) in the API server it manages" -}}
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
