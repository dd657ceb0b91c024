{{/* The app.kubernetes.io/name label: the chart name unless overridden. */}}
{{- define "sidecar-injector.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* The name of every object: the release name when it already says sidecar-injector. */}}
{{- define "sidecar-injector.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* What selectors match: the same single label as the kustomize manifests. */}}
{{- define "sidecar-injector.selectorLabels" -}}
app.kubernetes.io/name: {{ include "sidecar-injector.name" . }}
{{- end -}}

{{/* Every object's labels: the selector label plus Helm's usual ones. */}}
{{- define "sidecar-injector.labels" -}}
{{ include "sidecar-injector.selectorLabels" . }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{- define "sidecar-injector.certManager" -}}
{{- if eq .Values.certificates.mode "cert-manager" -}}true{{- end -}}
{{- end -}}

{{- define "sidecar-injector.image" -}}
{{- if .Values.image.digest -}}
{{ .Values.image.repository }}@{{ .Values.image.digest }}
{{- else -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}
{{- end -}}

{{/* The ConfigMap the templates are mounted from. */}}
{{- define "sidecar-injector.templatesConfigMap" -}}
{{- .Values.templates.existingConfigMap | default (printf "%s-templates" (include "sidecar-injector.fullname" .)) -}}
{{- end -}}

{{/*
One webhook. Arguments: root (the chart context), name, path, failurePolicy, mutating (bool),
scope ("pod" or "namespace"). The selectors follow manifests/base/webhooks.yaml: pod scope sends pods
labelled "true" from namespaces that did not opt in; namespace scope sends every pod not labelled
"false" from namespaces labelled "true". The two namespaceSelectors are complementary, so a pod
reaches at most one webhook of each configuration.
*/}}
{{- define "sidecar-injector.webhook" -}}
{{- $root := .root -}}
{{- $v := $root.Values -}}
- name: {{ .name }}
  admissionReviewVersions: ["v1", "v1beta1"]
  clientConfig:
    service:
      name: {{ include "sidecar-injector.fullname" $root }}
      namespace: {{ $root.Release.Namespace }}
      path: {{ .path }}
      port: 443
  rules:
    - operations: ["CREATE"]
      apiGroups: [""]
      apiVersions: ["v1"]
      resources: ["pods"]
      scope: Namespaced
  failurePolicy: {{ .failurePolicy }}
  matchPolicy: Equivalent
  sideEffects: None
  timeoutSeconds: {{ $v.webhooks.timeoutSeconds }}
  {{- if .mutating }}
  reinvocationPolicy: IfNeeded
  {{- end }}
  objectSelector:
  {{- if eq .scope "pod" }}
    matchLabels:
      sidecar-injector.io/inject: "true"
  {{- else }}
    matchExpressions:
      - key: sidecar-injector.io/inject
        operator: NotIn
        values: ["false"]
  {{- end }}
  namespaceSelector:
    matchExpressions:
      - key: kubernetes.io/metadata.name
        operator: NotIn
        values: {{ concat $v.webhooks.excludedNamespaces (list $root.Release.Namespace) | uniq | toJson }}
      - key: runlevel
        operator: NotIn
        values: ["0", "1"]
      {{- if $v.namespaceOptIn.enabled }}
      - key: sidecar-injector.io/inject
        operator: {{ if eq .scope "pod" }}NotIn{{ else }}In{{ end }}
        values: ["true"]
      {{- end }}
{{- end -}}
