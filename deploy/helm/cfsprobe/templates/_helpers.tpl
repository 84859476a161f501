{{/*
cfsprobe.fullname: the release's prefix of every object's name: the
release's name when it holds the chart's (cfsprobe, cfsprobe-prod), else
<release>-cfsprobe; fullnameOverride replaces it.
*/}}
{{- define "cfsprobe.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 54 | trimSuffix "-" -}}
{{- else if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 54 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 54 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{/* The exporter's objects: DaemonSet, Service, ServiceMonitor, RBAC. */}}
{{- define "cfsprobe.exporterName" -}}
{{- printf "%s-exporter" (include "cfsprobe.fullname" .) -}}
{{- end -}}

{{- define "cfsprobe.serviceAccountName" -}}
{{- .Values.serviceAccount.name | default (include "cfsprobe.exporterName" .) -}}
{{- end -}}

{{/*
cfsprobe.selectorLabels COMPONENT: the labels of deploy/kubernetes (name,
component) and the release's instance, so that two releases never select
each other's pods.
*/}}
{{- define "cfsprobe.selectorLabels" -}}
app.kubernetes.io/name: cfsprobe
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{/* cfsprobe.labels COMPONENT: the selector labels and Helm's bookkeeping. */}}
{{- define "cfsprobe.labels" -}}
{{ include "cfsprobe.selectorLabels" . }}
app.kubernetes.io/managed-by: {{ .root.Release.Service }}
app.kubernetes.io/version: {{ .root.Chart.AppVersion | quote }}
helm.sh/chart: {{ printf "%s-%s" .root.Chart.Name .root.Chart.Version }}
{{- end -}}

{{- define "cfsprobe.image" -}}
{{- if .Values.image.digest -}}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest -}}
{{- else -}}
{{- printf "%s:%s" .Values.image.repository (.Values.image.tag | default .Chart.AppVersion) -}}
{{- end -}}
{{- end -}}

{{/*
cfsprobe.webConfig: the exporter's --web.config.file (exporter-toolkit's
format) made from web.*, or "" when none is set.
*/}}
{{- define "cfsprobe.webConfig" -}}
{{- $c := dict -}}
{{- with .Values.web.tls.secretName -}}
{{- $tls := dict "cert_file" "/etc/cfsprobe/tls/tls.crt" "key_file" "/etc/cfsprobe/tls/tls.key" -}}
{{- if $.Values.web.tls.clientCA -}}
{{- $_ := set $tls "client_ca_file" "/etc/cfsprobe/tls/ca.crt" -}}
{{- $_ := set $tls "client_auth_type" "RequireAndVerifyClientCert" -}}
{{- end -}}
{{- $_ := set $c "tls_server_config" $tls -}}
{{- end -}}
{{- with .Values.web.basicAuthUsers -}}
{{- $_ := set $c "basic_auth_users" . -}}
{{- end -}}
{{- $c = mustMergeOverwrite $c (deepCopy .Values.web.config) -}}
{{- if $c -}}
{{- toYaml $c -}}
{{- end -}}
{{- end -}}

{{/*
cfsprobe.webScheme: HTTPS when the exporter serves TLS.
*/}}
{{- define "cfsprobe.webScheme" -}}
{{- $c := include "cfsprobe.webConfig" . | fromYaml -}}
{{- if $c.tls_server_config -}}HTTPS{{- else -}}HTTP{{- end -}}
{{- end -}}

{{/*
cfsprobe.probesAuthenticated: "true" when every request must authenticate
(basic auth users or client certificates), which the kubelet's probes
cannot: they then only connect (tcpSocket).
*/}}
{{- define "cfsprobe.probesAuthenticated" -}}
{{- $c := include "cfsprobe.webConfig" . | fromYaml -}}
{{- if or $c.basic_auth_users (and $c.tls_server_config (has $c.tls_server_config.client_auth_type (list "RequireAnyClientCert" "RequireAndVerifyClientCert"))) -}}true{{- end -}}
{{- end -}}
