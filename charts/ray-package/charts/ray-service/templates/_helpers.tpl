{{- define "ray-service.name" -}}ray-service{{- end }}
{{- define "ray-service.labels" -}}
app.kubernetes.io/name: ray-service
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/part-of: ray-package
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end }}
{{- define "ray-service.selector" -}}
app.kubernetes.io/name: ray-service
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}
{{- define "ray-service.grafanaURL" -}}
{{- if .Values.grafana.enabled -}}
{{- $ini := index .Values.grafana "grafana.ini" -}}
{{- if $ini.server.root_url -}}{{ $ini.server.root_url }}
{{- else if and $ini.server.domain (eq .Values.grafana.service.type "NodePort") .Values.grafana.service.nodePort -}}http://{{ $ini.server.domain }}:{{ .Values.grafana.service.nodePort }}
{{- else if .Values.grafana.openFuyao -}}/grafana
{{- else -}}http://ray-grafana.{{ .Release.Namespace }}.svc:{{ .Values.grafana.service.port }}
{{- end -}}
{{- end -}}
{{- end }}
