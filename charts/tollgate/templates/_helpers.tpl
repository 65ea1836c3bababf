{{/* Names: <release>-tollgate unless the release name already holds the chart's name. */}}
{{- define "tollgate.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "tollgate.fullname" -}}
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

{{/* Object names of the components (each at most 63 characters). */}}
{{- define "tollgate.apiName" -}}{{ include "tollgate.fullname" . | trunc 59 | trimSuffix "-" }}-api{{- end -}}
{{- define "tollgate.controllerName" -}}{{ include "tollgate.fullname" . | trunc 52 | trimSuffix "-" }}-controller{{- end -}}
{{- define "tollgate.workerName" -}}{{ include "tollgate.fullname" . | trunc 56 | trimSuffix "-" }}-worker{{- end -}}
{{- define "tollgate.migrationName" -}}{{ include "tollgate.fullname" . | trunc 53 | trimSuffix "-" }}-migration{{- end -}}
{{- define "tollgate.webhookName" -}}{{ include "tollgate.fullname" . | trunc 55 | trimSuffix "-" }}-webhook{{- end -}}
{{- define "tollgate.webhookTlsSecret" -}}{{ include "tollgate.fullname" . | trunc 51 | trimSuffix "-" }}-webhook-tls{{- end -}}
{{- define "tollgate.databaseSecret" -}}
{{- if .Values.database.existingSecret -}}{{ .Values.database.existingSecret }}{{- else -}}{{ include "tollgate.fullname" . | trunc 54 | trimSuffix "-" }}-database{{- end -}}
{{- end -}}
{{- define "tollgate.migrationSecret" -}}
{{- default (include "tollgate.databaseSecret" .) .Values.database.existingMigrationSecret -}}
{{- end -}}
{{- define "tollgate.migrationExisting" -}}
{{- or .Values.database.existingMigrationSecret .Values.database.existingSecret -}}
{{- end -}}
{{- define "tollgate.apiSecret" -}}
{{- if .Values.secrets.existingSecret -}}{{ .Values.secrets.existingSecret }}{{- else -}}{{ include "tollgate.apiName" . }}{{- end -}}
{{- end -}}
{{- define "tollgate.controllerCredentialsSecret" -}}
{{- if .Values.controller.credentials.existingSecret -}}{{ .Values.controller.credentials.existingSecret }}{{- else -}}{{ include "tollgate.controllerName" . | trunc 51 | trimSuffix "-" }}-credentials{{- end -}}
{{- end -}}

{{/* The webhook Service's DNS name inside the cluster, as the serving certificate names it. */}}
{{- define "tollgate.webhookHost" -}}{{ include "tollgate.webhookName" . }}.{{ .Release.Namespace }}.svc{{- end -}}

{{- define "tollgate.apiUrl" -}}
{{- if .Values.controller.apiUrl -}}
{{- .Values.controller.apiUrl -}}
{{- else -}}
http://{{ include "tollgate.apiName" . }}.{{ .Release.Namespace }}.svc:{{ .Values.api.service.port }}
{{- end -}}
{{- end -}}

{{- define "tollgate.image" -}}
{{- $tag := default .Chart.AppVersion .Values.image.tag -}}
{{- if .Values.image.digest -}}
{{ .Values.image.repository }}@{{ .Values.image.digest }}
{{- else -}}
{{ .Values.image.repository }}:{{ $tag }}
{{- end -}}
{{- end -}}

{{/* The image the webhook injects as the sidecar: webhook.sidecarImage, else the tollgate image. */}}
{{- define "tollgate.sidecarImage" -}}
{{- default (include "tollgate.image" .) .Values.webhook.sidecarImage -}}
{{- end -}}

{{/* Labels of every object; "component" names the part (api, worker, controller, migration, webhook). */}}
{{- define "tollgate.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: tollgate
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
{{ include "tollgate.selectorLabels" . }}
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{- define "tollgate.selectorLabels" -}}
app.kubernetes.io/name: {{ include "tollgate.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{/* The container's command and arguments: the image's entrypoint (or image.command) and the subcommand. */}}
{{- define "tollgate.command" -}}
{{- with .root.Values.image.command -}}
command:
  {{- toYaml . | nindent 2 }}
{{ end -}}
args: [{{ .command | quote }}]
{{- end -}}

{{- define "tollgate.podSecurity" -}}
automountServiceAccountToken: {{ .automount }}
securityContext:
  {{- toYaml .root.Values.podSecurityContext | nindent 2 }}
{{- with .root.Values.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}

{{/*
The environment of `tollgate api`, which `tollgate migrate` and `tollgate worker` share: both check the
same production guard, and the worker's jobs use the API's settings and secrets. Secrets come from the
database and API Secrets by key. The API runs the jobs itself only when there is no worker Deployment.
*/}}
{{- define "tollgate.apiEnv" -}}
{{- $v := .Values -}}
{{- $apiSecret := include "tollgate.apiSecret" . -}}
- name: ENVIRONMENT
  value: {{ $v.environment | quote }}
- name: HOST
  value: "0.0.0.0"
- name: PORT
  value: {{ $v.api.port | quote }}
- name: DATABASE_URL
  valueFrom:
    secretKeyRef:
      name: {{ include "tollgate.databaseSecret" . }}
      key: {{ ternary $v.database.existingSecretKeys.url "DATABASE_URL" (not (empty $v.database.existingSecret)) }}
- name: DATABASE_RUNTIME_ROLE
  value: {{ $v.database.runtimeRole | quote }}
- name: DATABASE_POOL_MAX
  value: {{ $v.database.poolMax | quote }}
- name: WORKER_IN_PROCESS
  value: {{ not $v.worker.enabled | quote }}
- name: WORKER_CONCURRENCY
  value: {{ $v.worker.concurrency | quote }}
- name: JOB_POLL_INTERVAL_SECONDS
  value: {{ $v.worker.pollIntervalSeconds | quote }}
- name: JOB_TIMEOUT_SECONDS
  value: {{ $v.worker.jobTimeoutSeconds | quote }}
- name: JOB_MAINTENANCE_INTERVAL_SECONDS
  value: {{ $v.worker.maintenanceIntervalSeconds | quote }}
- name: SEED_DEMO
  value: "false"
- name: DEV_LOGIN_ENABLED
  value: {{ $v.api.devLoginEnabled | quote }}
- name: SESSION_COOKIE_SECURE
  value: {{ $v.api.sessionCookieSecure | quote }}
- name: CORS_ALLOWED_ORIGINS
  value: {{ join "," $v.api.corsAllowedOrigins | quote }}
- name: TRUST_PROXY
  value: {{ $v.api.trustProxy | quote }}
- name: READONLY_FAIL_OPEN
  value: {{ $v.api.readonlyFailOpen | quote }}
- name: READONLY_FAIL_OPEN_ACK
  value: {{ $v.api.readonlyFailOpenAck | quote }}
{{- with $v.api.oidc.issuer }}
- name: OIDC_ISSUER
  value: {{ . | quote }}
{{- end }}
{{- with $v.api.oidc.clientId }}
- name: OIDC_CLIENT_ID
  value: {{ . | quote }}
{{- end }}
{{- with $v.api.oidc.redirectUri }}
- name: OIDC_REDIRECT_URI
  value: {{ . | quote }}
{{- end }}
{{- with $v.api.oidc.mfaAmrValues }}
- name: OIDC_MFA_AMR_VALUES
  value: {{ . | quote }}
{{- end }}
{{- with $v.api.oidc.mfaAcrValues }}
- name: OIDC_MFA_ACR_VALUES
  value: {{ . | quote }}
{{- end }}
- name: EMAIL_BACKEND
  value: {{ $v.api.email.backend | quote }}
{{- if eq $v.api.email.backend "smtp" }}
{{- with $v.api.email.smtp.host }}
- name: SMTP_HOST
  value: {{ . | quote }}
{{- end }}
- name: SMTP_PORT
  value: {{ $v.api.email.smtp.port | quote }}
{{- with $v.api.email.smtp.username }}
- name: SMTP_USERNAME
  value: {{ . | quote }}
{{- end }}
- name: SMTP_STARTTLS
  value: {{ $v.api.email.smtp.starttls | quote }}
{{- with $v.api.email.smtp.from }}
- name: SMTP_FROM
  value: {{ . | quote }}
{{- end }}
{{- end }}
- name: SIGNUP_ENABLED
  value: {{ $v.api.signupEnabled | quote }}
{{- with $v.api.challenge.verifier }}
- name: CHALLENGE_VERIFIER
  value: {{ . | quote }}
{{- end }}
{{- with $v.api.challenge.verifyUrl }}
- name: CHALLENGE_VERIFY_URL
  value: {{ . | quote }}
{{- end }}
{{- with $v.api.challenge.siteKey }}
- name: CHALLENGE_SITE_KEY
  value: {{ . | quote }}
{{- end }}
{{- with $v.api.publicSite.salesEmail }}
- name: SALES_EMAIL
  value: {{ . | quote }}
{{- end }}
{{- with $v.api.publicSite.salesOrgId }}
- name: SALES_ORG_ID
  value: {{ . | quote }}
{{- end }}
{{- if $v.api.publicSite.analyticsEnabled }}
- name: ANALYTICS_ENABLED
  value: "true"
{{- end }}
{{- with $v.api.publicSite.docsUrl }}
- name: DOCS_URL
  value: {{ . | quote }}
{{- end }}
- name: LOG_LEVEL
  value: {{ $v.api.logLevel | quote }}
{{- with $v.api.otel.endpoint }}
- name: OTEL_EXPORTER_OTLP_ENDPOINT
  value: {{ . | quote }}
{{- end }}
- name: OTEL_SERVICE_NAME
  value: {{ $v.api.otel.serviceName | quote }}
- name: TELEMETRY_RETENTION_DAYS
  value: {{ $v.api.telemetryRetentionDays | quote }}
- name: DEFAULT_PLAN
  value: {{ $v.api.defaultPlan | quote }}
{{- with $v.api.vaultAddr }}
- name: VAULT_ADDR
  value: {{ . | quote }}
{{- end }}
{{- range $env := list "SESSION_SECRET" "TOKEN_SIGNING_SEED" "SECRET_PEPPER" "EVIDENCE_SIGNING_SEED" }}
- name: {{ $env }}
  valueFrom:
    secretKeyRef:
      name: {{ $apiSecret }}
      key: {{ $env }}
{{- end }}
{{- range $env := list "OIDC_CLIENT_SECRET" "SMTP_PASSWORD" "SIGNUP_CLIENT_SECRET" "AUTH_EVENTS_SECRET" "EVIDENCE_SIGNING_PREVIOUS_SEEDS" "VAULT_TOKEN" }}
- name: {{ $env }}
  valueFrom:
    secretKeyRef:
      name: {{ $apiSecret }}
      key: {{ $env }}
      optional: true
{{- end }}
{{- with $v.api.extraEnv }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/*
Annotations of the objects the migration hook needs before it runs (its ServiceAccount and the Secrets
the chart creates): created first (weight -10), replaced on every install and upgrade, never deleted
by Helm (a hook object is not part of the release), so generated secrets survive an uninstall.
*/}}
{{- define "tollgate.preHookAnnotations" -}}
helm.sh/hook: pre-install,pre-upgrade
helm.sh/hook-weight: "-10"
helm.sh/hook-delete-policy: before-hook-creation
{{- end -}}

{{/*
Name of a cluster-scoped object (ClusterRole, ClusterRoleBinding, MutatingWebhookConfiguration): the
release namespace in front, so that releases of the same name in two namespaces do not collide.
*/}}
{{- define "tollgate.clusterScopedName" -}}
{{- printf "%s-%s" .root.Release.Namespace .name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
