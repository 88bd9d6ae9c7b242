{{/*
Names and labels shared by every template.
*/}}

{{- define "delaybridge.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
Full name: <release>-<chart>, or the release name alone when it already contains the
chart name. Truncated to 52 characters so that StatefulSet pod names (name-N) and the
controller-revision-hash label stay within Kubernetes' 63-character limit.
*/}}
{{- define "delaybridge.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 52 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 52 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 52 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "delaybridge.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "delaybridge.selectorLabels" -}}
app.kubernetes.io/name: {{ include "delaybridge.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "delaybridge.labels" -}}
helm.sh/chart: {{ include "delaybridge.chart" . }}
{{ include "delaybridge.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: delaybridge
{{- end }}

{{- define "delaybridge.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "delaybridge.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "delaybridge.image" -}}
{{- printf "%s:%s" .image.repository (default .appVersion .image.tag) }}
{{- end }}

{{- define "delaybridge.adminTokenSecret" -}}
{{- default (printf "%s-admin-token" (include "delaybridge.fullname" .)) .Values.adminToken.existingSecret }}
{{- end }}

{{/*
The sidecar's config file: the `config` values plus the keys the chart owns.
*/}}
{{- define "delaybridge.configYaml" -}}
{{- range $key := list "sasl.password" "ssl.key.password" "ssl.keystore.password" "ssl.key.pem" "sasl.oauthbearer.client.secret" }}
{{- if hasKey $.Values.config.kafka.client $key }}
{{- fail (printf "config.kafka.client.%s is a secret and would be readable in the ConfigMap: put it in a Secret and map it with kafkaSecrets.existingSecret and kafkaSecrets.keys (%s: <key in the Secret>)" $key $key) }}
{{- end }}
{{- end }}
{{- $cfg := deepCopy .Values.config }}
{{- $_ := set $cfg.store "data_dir" "/var/lib/delaybridge" }}
{{- $_ = set $cfg.http "host" "0.0.0.0" }}
{{- toYaml $cfg }}
{{- end }}

{{/*
terminationGracePeriodSeconds: the sidecar's drain (shutdown_grace_ms, rounded up to
whole seconds) plus a margin for the process to exit after the drain.
*/}}
{{- define "delaybridge.terminationGraceSeconds" -}}
{{- add (div (add (int64 .Values.config.shutdown_grace_ms) 999) 1000) .Values.terminationGraceMarginSeconds }}
{{- end }}

{{/*
Environment shared by the sidecar and the reconciliation job: the pod name as the
static group member id, the admin token and the Kafka client secrets.
*/}}
{{- define "delaybridge.secretEnv" -}}
- name: DELAYBRIDGE_HTTP__ADMIN_TOKEN
  valueFrom:
    secretKeyRef:
      name: {{ include "delaybridge.adminTokenSecret" . }}
      key: {{ .Values.adminToken.secretKey }}
{{- range $clientKey, $secretKey := .Values.kafkaSecrets.keys }}
- name: DELAYBRIDGE_KAFKA__CLIENT__{{ $clientKey | upper }}
  valueFrom:
    secretKeyRef:
      name: {{ $.Values.kafkaSecrets.existingSecret }}
      key: {{ $secretKey }}
{{- end }}
{{- end }}

{{/*
"true" unless the sidecar's changelog is turned off, in `config.changelog.enabled` or by a
DELAYBRIDGE_CHANGELOG__ENABLED variable in `extraEnv` (which wins over the file, and
which the sidecar parses as pydantic does: false, f, no, n, off, 0).
*/}}
{{- define "delaybridge.changelogEnabled" -}}
{{- $enabled := dig "changelog" "enabled" true .Values.config }}
{{- range .Values.extraEnv }}
{{- if and (eq (toString .name) "DELAYBRIDGE_CHANGELOG__ENABLED") (hasKey . "value") }}
{{- $enabled = not (has (lower (toString .value)) (list "false" "f" "no" "n" "off" "0")) }}
{{- end }}
{{- end }}
{{- $enabled }}
{{- end }}

{{/*
The console's pods: a name of their own, so the sidecar's Services, PodDisruptionBudget
and StatefulSet never select them.
*/}}
{{- define "delaybridge.consoleSelectorLabels" -}}
app.kubernetes.io/name: {{ include "delaybridge.name" . }}-console
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: console
{{- end }}
