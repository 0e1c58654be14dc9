{{- define "celgate.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "celgate.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else if contains (include "celgate.name" .) .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name (include "celgate.name" .) | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}

{{- define "celgate.selectorLabels" -}}
app.kubernetes.io/name: {{ include "celgate.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "celgate.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{ include "celgate.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{- define "celgate.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "celgate.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/* The Secret holding the serving certificate. */}}
{{- define "celgate.tlsSecret" -}}
{{- if eq .Values.certificates.mode "existingSecret" }}
{{- required "certificates.existingSecret.name is required with mode existingSecret" .Values.certificates.existingSecret.name }}
{{- else }}
{{- printf "%s-tls" (include "celgate.fullname" .) }}
{{- end }}
{{- end }}

{{/* The names the serving certificate is valid for: the Service's DNS names. */}}
{{- define "celgate.dnsNames" -}}
{{- $svc := include "celgate.fullname" . -}}
{{- list $svc (printf "%s.%s" $svc .Release.Namespace) (printf "%s.%s.svc" $svc .Release.Namespace) (printf "%s.%s.svc.cluster.local" $svc .Release.Namespace) | toJson }}
{{- end }}

{{/* The image, which must be given: celgate publishes none yet. */}}
{{- define "celgate.image" -}}
{{- $tag := .Values.image.tag | default .Chart.AppVersion }}
{{- $hint := printf `image.repository is required: celgate publishes no image yet. Build and push one from the repository's Dockerfile, then install with it:
  docker build -t REGISTRY/celgate:%s .
  docker push REGISTRY/celgate:%s
  helm install celgate charts/celgate --namespace celgate-system --create-namespace --set image.repository=REGISTRY/celgate` $tag $tag }}
{{- printf "%s:%s" (required $hint .Values.image.repository) $tag }}
{{- end }}

{{/*
"true" once celgate has been seen ready: its Deployment, as the cluster has it when the chart
is rendered, has an available replica (ready through /readyz, which needs the first complete
snapshot). Empty on a first install, and wherever the chart is rendered without a cluster
(helm template, --dry-run), where lookup answers nothing.
*/}}
{{- define "celgate.rolledOut" -}}
{{- $dep := lookup "apps/v1" "Deployment" .Release.Namespace (include "celgate.fullname" .) }}
{{- if and $dep $dep.status (gt (int ($dep.status.availableReplicas | default 0)) 0) }}true{{ end }}
{{- end }}

{{/*
The failurePolicy registered now for a webhook whose own is the second of the list: see
webhook.failOpenUntilReady in values.yaml (it holds for the mutating webhook too).
*/}}
{{- define "celgate.failurePolicyOf" -}}
{{- $root := index . 0 }}
{{- if eq $root.Values.mode "observe" }}Ignore
{{- else if and $root.Values.webhook.failOpenUntilReady (not (include "celgate.rolledOut" $root)) }}Ignore{{ else }}{{ index . 1 }}{{ end }}
{{- end }}

{{/* The validating webhook's failurePolicy now. */}}
{{- define "celgate.failurePolicy" -}}
{{- include "celgate.failurePolicyOf" (list . .Values.webhook.failurePolicy) }}
{{- end }}

{{/*
A webhook's timeout (the second of the list): in observe mode at most 2 s, so that celgate
never slows a write.
*/}}
{{- define "celgate.timeoutSecondsOf" -}}
{{- if eq (index . 0).Values.mode "observe" }}{{ min (index . 1) 2 }}{{ else }}{{ index . 1 }}{{ end }}
{{- end }}

{{/* The validating webhook's timeout. */}}
{{- define "celgate.timeoutSeconds" -}}
{{- include "celgate.timeoutSecondsOf" (list . .Values.webhook.timeoutSeconds) }}
{{- end }}

{{/*
The namespaces in which celgate reads namespaced param kinds (its --param-namespaces), comma
separated: those that the rbac.paramResources entries with `namespaces` list. celgate watches
every namespaced param kind in one set of namespaces, so such entries must all list the same
ones: a kind granted in fewer would be refused in the others and never listed. Empty: every
namespace.
*/}}
{{- define "celgate.paramNamespaces" -}}
{{- $sets := list }}
{{- range .Values.rbac.paramResources }}
{{- with .namespaces }}
{{- $sets = append $sets (. | uniq | sortAlpha | join ",") }}
{{- end }}
{{- end }}
{{- $sets = $sets | uniq }}
{{- if gt (len $sets) 1 }}
{{- fail (printf "rbac.paramResources: the entries with namespaces list different ones (%s). celgate reads every namespaced param kind in the same namespaces (its --param-namespaces flag), so give each entry with namespaces the same list" (join " / " $sets)) }}
{{- end }}
{{- first $sets | default "" }}
{{- end }}

{{/*
The policies volume's source (a ConfigMap or a Secret, which Kubernetes swaps atomically on
a change), or nothing when celgate reads the cluster's own policies.
*/}}
{{- define "celgate.policiesVolume" -}}
{{- with .Values.policies }}
{{- if and .fromConfigMap .fromSecret }}
{{- fail "policies: set fromConfigMap or fromSecret, not both" }}
{{- else if .fromConfigMap }}
configMap:
  name: {{ .fromConfigMap }}
{{- else if .fromSecret }}
secret:
  secretName: {{ .fromSecret }}
{{- end }}
{{- end }}
{{- end }}
