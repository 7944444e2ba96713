{{- define "ray-website.labels" -}}
app.kubernetes.io/name: ray-website
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/part-of: ray-package
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end }}
{{- define "ray-website.selector" -}}
app.kubernetes.io/name: ray-website
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}
{{- define "ray-website.rayService" -}}
{{- default (printf "http://ray-service.%s.svc:8080" .Release.Namespace) .Values.backend.rayService -}}
{{- end }}
