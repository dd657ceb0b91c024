{{/* The app.kubernetes.io/name label: the chart name unless overridden. */}}
{{- define "sidecar-injector.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/*
The name of every object: the release name when it already says sidecar-injector, then -<revision>.
A release already named for its revision (sidecar-injector-canary with revision canary, as the
README installs it) is not suffixed twice, so every install variant names a revision's objects as
components/revision does: sidecar-injector-canary, sidecar-injector-templates-canary
(test/manifests/revision.test.ts renders the README's command).
*/}}
{{- define "sidecar-injector.fullname" -}}
{{- $base := "" -}}
{{- if .Values.fullnameOverride -}}
{{- $base = .Values.fullnameOverride -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- $base = .Release.Name -}}
{{- else -}}
{{- $base = printf "%s-%s" .Release.Name $name -}}
{{- end -}}
{{- end -}}
{{- if .Values.revision -}}
{{- $base = trimSuffix (printf "-%s" .Values.revision) $base -}}
{{- printf "%s-%s" ($base | trunc (int (sub 62 (len .Values.revision))) | trimSuffix "-") .Values.revision -}}
{{- else -}}
{{- $base | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{/*
What selectors match: the same single label as the kustomize manifests. A revision's value carries
the revision, so the default install's Deployment, Service and PDB (whose selectors are immutable
or shared) never take a revision's pods.
*/}}
{{- define "sidecar-injector.selectorLabels" -}}
app.kubernetes.io/name: {{ include "sidecar-injector.name" . }}{{ with .Values.revision }}-{{ . }}{{ end }}
{{- end -}}

{{/* Every object's labels: the selector label plus Helm's usual ones. */}}
{{- define "sidecar-injector.labels" -}}
{{ include "sidecar-injector.selectorLabels" . }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{/* "true" when the webhooks run (mode webhook or hybrid): their configurations, Service, certificates. */}}
{{- define "sidecar-injector.servesWebhooks" -}}
{{- if ne .Values.mode "policy" -}}true{{- end -}}
{{- end -}}

{{/* "true" when the injector keeps admission policies in the cluster (mode policy or hybrid). */}}
{{- define "sidecar-injector.syncsPolicies" -}}
{{- if ne .Values.mode "webhook" -}}true{{- end -}}
{{- end -}}

{{/* cert-manager's certificates, only where there is a webhook to serve with them. */}}
{{- define "sidecar-injector.certManager" -}}
{{- if and (eq .Values.certificates.mode "cert-manager") (include "sidecar-injector.servesWebhooks" .) -}}true{{- end -}}
{{- end -}}

{{- define "sidecar-injector.image" -}}
{{- if .Values.image.digest -}}
{{ .Values.image.repository }}@{{ .Values.image.digest }}
{{- else -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}
{{- end -}}

{{/*
<fullname>-<part>, and for a revision <name>-<part>-<revision>, as kustomize's nameSuffix makes it
from the base's <name>-<part>. Arguments: root (the chart context), part.
*/}}
{{- define "sidecar-injector.partName" -}}
{{- $fullname := include "sidecar-injector.fullname" .root -}}
{{- with .root.Values.revision -}}
{{- printf "%s-%s-%s" (trimSuffix (printf "-%s" .) $fullname) $.part . -}}
{{- else -}}
{{- printf "%s-%s" $fullname .part -}}
{{- end -}}
{{- end -}}

{{/* The ConfigMap the templates are mounted from. */}}
{{- define "sidecar-injector.templatesConfigMap" -}}
{{- .Values.templates.existingConfigMap | default (include "sidecar-injector.partName" (dict "root" . "part" "templates")) -}}
{{- end -}}

{{/* templates.source as the server's --templates-source: "" for configmap (the default, dir), else cluster or both. */}}
{{- define "sidecar-injector.templatesSource" -}}
{{- if ne .Values.templates.source "configmap" -}}{{ .Values.templates.source }}{{- end -}}
{{- end -}}

{{/*
One webhook. Arguments: root (the chart context), name, path, failurePolicy, mutating (bool),
scope ("pod" or "namespace"), pick ("" for the default install; for a revision "pod" or "namespace").
The opt-in selectors follow manifests/base/webhooks.yaml: pod scope sends pods labelled "true" from
namespaces that did not opt in; namespace scope sends every pod not labelled "false" from namespaces
labelled "true". The two namespaceSelectors are complementary, so a pod reaches at most one webhook
of each configuration.
The revision selectors (sidecar-injector.io/rev) make a pod's label win over its namespace's, as
istio.io/rev does: the default install takes pods when neither names a revision; a revision takes a
pod that names it (pick "pod"), and a pod that names none in a namespace that names it (pick
"namespace"). So every pod reaches the webhooks of at most one install.
*/}}
{{- define "sidecar-injector.webhook" -}}
{{- $root := .root -}}
{{- $v := $root.Values -}}
- name: {{ if eq .pick "namespace" }}ns-revision.{{ end }}{{ .name }}
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
  {{- end }}
    matchExpressions:
      {{- if ne .scope "pod" }}
      - key: sidecar-injector.io/inject
        operator: NotIn
        values: ["false"]
      {{- end }}
      {{- if eq .pick "pod" }}
      - key: sidecar-injector.io/rev
        operator: In
        values: [{{ $v.revision | quote }}]
      {{- else }}
      - key: sidecar-injector.io/rev
        operator: DoesNotExist
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
      {{- if eq .pick "namespace" }}
      - key: sidecar-injector.io/rev
        operator: In
        values: [{{ $v.revision | quote }}]
      {{- else if eq .pick "" }}
      - key: sidecar-injector.io/rev
        operator: DoesNotExist
      {{- end }}
{{- end -}}

{{/*
Every webhook of one configuration, for one kind (mutating or validating): one per opt-in scope, and
for a revision one per way of picking it. The validating webhooks follow the same selection as their
mutating twins, so a pod is checked against the templates of the install that injected it.
*/}}
{{- define "sidecar-injector.webhooks" -}}
{{- $root := .root -}}
{{- $picks := ternary (list "pod" "namespace") (list "") (not (empty $root.Values.revision)) -}}
{{- $scopes := ternary (list "pod" "namespace") (list "pod") $root.Values.namespaceOptIn.enabled -}}
{{- range $scope := $scopes }}
{{- range $pick := $picks }}
{{- $verb := ternary "inject" "validate" $.mutating -}}
{{- $name := printf "%s%s.sidecar-injector.io" (ternary "namespace." "" (eq $scope "namespace")) $verb -}}
{{- $path := printf "/%s%s" (ternary "mutate" "validate" $.mutating) (ternary "/namespace" "" (eq $scope "namespace")) }}
{{ include "sidecar-injector.webhook" (dict "root" $root "name" $name "path" $path "failurePolicy" $.failurePolicy "mutating" $.mutating "scope" $scope "pick" $pick) }}
{{- end }}
{{- end }}
{{- end -}}

{{/*
The required webhook of one configuration (values `required`): every pod CREATE of the namespaces
required.namespaceSelector takes, with no objectSelector, so no label of the pod (inject "false", a
revision nobody installed) keeps it from the templates required in its namespace; the excluded and
release namespaces and runlevel "0"/"1" stay out as for the other webhooks. It comes after them in
its configuration: /mutate has injected the pod when /mutate/required sees it, and leaves it as is.
*/}}
{{- define "sidecar-injector.requiredWebhook" -}}
{{- $root := .root -}}
{{- $v := $root.Values -}}
{{- $selector := $v.required.namespaceSelector | default dict -}}
- name: required.{{ ternary "mutate" "validate" .mutating }}.sidecar-injector.io
  admissionReviewVersions: ["v1", "v1beta1"]
  clientConfig:
    service:
      name: {{ include "sidecar-injector.fullname" $root }}
      namespace: {{ $root.Release.Namespace }}
      path: /{{ ternary "mutate" "validate" .mutating }}/required
      port: 443
  rules:
    - operations: {{ ternary (list "CREATE") (list "CREATE" "UPDATE") .mutating | toJson }}
      apiGroups: [""]
      apiVersions: ["v1"]
      resources: ["pods"]
      scope: Namespaced
  {{- if not .mutating }}
  {{- /* kubectl set image cannot swap a required sidecar; only UPDATEs that change an image are sent. */}}
  matchConditions:
    - name: create-or-image-change
      expression: >-
        request.operation == 'CREATE' ||
        object.spec.containers.map(c, c.image) != oldObject.spec.containers.map(c, c.image) ||
        (has(object.spec.initContainers) ? object.spec.initContainers.map(c, c.image) : []) !=
        (has(oldObject.spec.initContainers) ? oldObject.spec.initContainers.map(c, c.image) : [])
  {{- end }}
  failurePolicy: {{ .failurePolicy }}
  matchPolicy: Equivalent
  sideEffects: None
  timeoutSeconds: {{ $v.webhooks.timeoutSeconds }}
  {{- if .mutating }}
  reinvocationPolicy: IfNeeded
  {{- end }}
  namespaceSelector:
    {{- with $selector.matchLabels }}
    matchLabels:
      {{- toYaml . | nindent 6 }}
    {{- end }}
    matchExpressions:
      - key: kubernetes.io/metadata.name
        operator: NotIn
        values: {{ concat $v.webhooks.excludedNamespaces (list $root.Release.Namespace) | uniq | toJson }}
      - key: runlevel
        operator: NotIn
        values: ["0", "1"]
      {{- with $selector.matchExpressions }}
      {{- toYaml . | nindent 6 }}
      {{- end }}
{{- end -}}
