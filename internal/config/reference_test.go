package config

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/pflag"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"
)

var update = flag.Bool("update", false, "write docs/reference/settings.md from the flags and the chart")

const (
	settingsPage = "../../docs/reference/settings.md"
	chartDir     = "../../charts/ray-package"
	subchartDir  = chartDir + "/charts/ray-service"
)

// chartNotes says how the chart sets the settings its configmap does not take from one value as it is:
// fixed there, derived from the release, or left out of the chart on purpose. A flag that is neither
// in the configmap with a value nor here fails TestSettingsReference, so that a new setting cannot reach
// the service without a word on how an operator of the chart sets it.
var chartNotes = map[string]string{
	"config":                     "set by the chart: `--config=/etc/ray-service/config.yaml`, its ConfigMap `<name>-config`",
	"listen":                     "fixed by the chart: `:8080` (`service.port` is the Service's port)",
	"tls-cert-file":              "`tls.existingSecret`: a `kubernetes.io/tls` Secret, mounted",
	"tls-key-file":               "`tls.existingSecret`: a `kubernetes.io/tls` Secret, mounted",
	"kubeconfig":                 "not in the chart: in a pod the service uses its ServiceAccount",
	"prometheus-timeout":         "not in the chart",
	"prometheus-cache-size":      "not in the chart",
	"idle-stop-identity":         "`idle.stopPolicy.enabled`: the chart's ServiceAccount `<name>-idle-stop`",
	"idle-policy-store":          "`idle.stopPolicy.enabled`: the chart's ConfigMap `<name>-idle-policies`",
	"usage-credit-every":         "not in the chart",
	"usage-measure-every":        "not in the chart",
	"usage-measure-step":         "not in the chart",
	"usage-retention":            "not in the chart",
	"notify-timeout":             "not in the chart",
	"grafana-url":                "`grafana.enabled`: the chart's Grafana, `/grafana` behind openFuyao's console (`grafana.openFuyao`), else its `grafana.ini` `server.root_url` or its Service",
	"dashboard-origin":           "`config.dashboardOrigin` (`\"\"`), written when not empty",
	"resync-period":              "not in the chart",
	"read-timeout":               "not in the chart",
	"write-timeout":              "not in the chart",
	"idle-timeout":               "not in the chart",
	"dashboard-timeout":          "not in the chart",
	"max-log-follows":            "not in the chart",
	"max-log-follows-per-caller": "not in the chart",
	"max-log-follow-duration":    "not in the chart",
	"max-watches":                "not in the chart",
	"max-watches-per-caller":     "not in the chart",
	"max-watch-duration":         "not in the chart",
	"watch-heartbeat":            "not in the chart",
	"auth-cache-ttl":             "not in the chart",
	"auth-cache-size":            "not in the chart",
	"pprof-listen":               "not in the chart (a loopback address: for `kubectl port-forward` only)",
	"template-key-file":          "`templateKey.existingSecret`: your Secret, mounted",
	"template-key-secret":        "set by the chart unless `templateKey.existingSecret`: `<namespace>/<name>-template-key`",
	"audit-key-file":             "`auditKey.existingSecret`: your Secret, mounted",
	"audit-key-secret":           "set by the chart unless `auditKey.existingSecret`: `<namespace>/<name>-audit-key`",
	"history-dsn":                "`history.enabled` (off: empty); SQLite on the chart's volume, or `history.postgres.existingSecret` (its key `dsn`, as `RAY_SERVICE_HISTORY_DSN`)",
	"lease":                      "set by the chart: `<name>-history`",
	"lease-namespace":            "set by the chart: the release's namespace",
	"history-lease":              "not in the chart (the former name of `lease`)",
	"history-lease-namespace":    "not in the chart (the former name of `lease-namespace`)",
}

// TestSettingsReference checks that docs/reference/settings.md is what the flags and the chart make of
// it, and that every flag says how the chart sets it. -update writes the page.
func TestSettingsReference(t *testing.T) {
	values := chartValues(t)
	keys := configmapKeys(t)
	fs := Flags()
	var missing []string
	var rows []string
	fs.VisitAll(func(f *pflag.Flag) {
		helm, ok := chartNotes[f.Name]
		if refs := keys[f.Name]; !ok && len(refs) > 0 {
			var parts []string
			for _, r := range refs {
				d, found := lookup(values, r)
				require.True(t, found, "the configmap names .Values.%s, which values.yaml lacks", r)
				parts = append(parts, fmt.Sprintf("`%s` (`%s`)", r, d))
			}
			helm, ok = strings.Join(parts, ", "), true
		}
		if !ok {
			missing = append(missing, f.Name)
			return
		}
		rows = append(rows, fmt.Sprintf("| `--%s` | `%s` | %s | %s | %s |", f.Name, envName(f.Name), defaultOf(f), cell(f.Usage), helm))
	})
	require.Empty(t, missing, "flags the chart says nothing of: set them in %s/templates/configmap.yaml from a value, "+
		"or say in chartNotes (internal/config/reference_test.go) how the chart sets them or that it does not", subchartDir)
	for key := range keys {
		assert.NotNil(t, fs.Lookup(key), "the chart's configmap sets %q, which is no flag", key)
	}
	for name := range chartNotes {
		assert.NotNil(t, fs.Lookup(name), "chartNotes names %q, which is no flag", name)
	}
	page := renderSettings(rows)
	if *update {
		require.NoError(t, os.WriteFile(settingsPage, page, 0o644))
		return
	}
	have, err := os.ReadFile(settingsPage)
	require.NoError(t, err)
	if !bytes.Equal(have, page) {
		t.Fatalf("%s is behind the flags or the chart: run go test ./internal/config -run TestSettingsReference -update", settingsPage)
	}
}

func renderSettings(rows []string) []byte {
	var b bytes.Buffer
	b.WriteString(`# Settings

<!-- Generated from internal/config (Flags) and the chart by
     go test ./internal/config -run TestSettingsReference -update
     Do not edit: make test fails while this page is behind. -->

Every setting of the service, in rising priority: a key of the configuration file given with
` + "`--config`" + ` (YAML, JSON or TOML, the flag's name as key), a ` + "`RAY_SERVICE_*`" + ` environment variable, a
flag. Durations are Go's (` + "`90s`, `30m`, `720h`" + `); sizes are Kubernetes quantities (` + "`64Mi`" + `); a list
is comma-separated, as a flag or a variable. The Helm values are the subchart's (` + "`charts/ray-package/charts/ray-service`" + `):
under ` + "`ray-service:`" + ` when set through ` + "`charts/ray-package`" + `, as openFuyao's marketplace installs it, with the
default an install of that chart gets. The chart writes the settings into the ConfigMap ` + "`<name>-config`" + ` and
starts the service with ` + "`--config`" + ` on it. Start-up refuses a setting out of its range and says why.

| Flag | Environment variable | Default | What it sets | Helm value (chart default) |
|---|---|---|---|---|
`)
	for _, r := range rows {
		b.WriteString(r + "\n")
	}
	return b.Bytes()
}

func envName(flag string) string {
	return "RAY_SERVICE_" + strings.ToUpper(strings.ReplaceAll(flag, "-", "_"))
}

func defaultOf(f *pflag.Flag) string {
	d := f.DefValue
	if f.Value.Type() == "stringSlice" && d == "[]" || d == "" {
		return "(empty)"
	}
	return "`" + d + "`"
}

// cell keeps a help text one table cell that a code host shows whole: a bar would end the cell, and
// <file> would be read as an HTML tag and hidden.
func cell(s string) string {
	return strings.NewReplacer("|", `\|`, "<", "&lt;", ">", "&gt;").Replace(s)
}

var (
	configmapLine = regexp.MustCompile(`^\s{4}([a-z0-9-]+):\s*(.*)$`)
	valueRef      = regexp.MustCompile(`\.Values\.([A-Za-z0-9_.]+)`)
)

// configmapKeys reads which settings the chart's configmap writes, and the values each is written from.
func configmapKeys(t *testing.T) map[string][]string {
	data, err := os.ReadFile(filepath.Join(subchartDir, "templates", "configmap.yaml"))
	require.NoError(t, err)
	keys := map[string][]string{}
	_, body, ok := strings.Cut(string(data), "config.yaml: |\n")
	require.True(t, ok, "the chart's configmap holds config.yaml")
	for line := range strings.SplitSeq(body, "\n") {
		m := configmapLine.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		refs := keys[m[1]]
		for _, r := range valueRef.FindAllStringSubmatch(m[2], -1) {
			if !slices.Contains(refs, r[1]) {
				refs = append(refs, r[1])
			}
		}
		keys[m[1]] = refs
	}
	return keys
}

// chartValues is the subchart's values with the umbrella chart's over them, as an install sees them.
func chartValues(t *testing.T) []map[string]any {
	read := func(file string) map[string]any {
		data, err := os.ReadFile(file)
		require.NoError(t, err)
		var m map[string]any
		require.NoError(t, yaml.Unmarshal(data, &m))
		return m
	}
	umbrella, _ := read(filepath.Join(chartDir, "values.yaml"))["ray-service"].(map[string]any)
	return []map[string]any{umbrella, read(filepath.Join(subchartDir, "values.yaml"))}
}

func lookup(layers []map[string]any, path string) (string, bool) {
	for _, m := range layers {
		var v any = m
		for k := range strings.SplitSeq(path, ".") {
			mm, ok := v.(map[string]any)
			if !ok {
				v = nil
				break
			}
			v = mm[k]
		}
		if v == nil {
			continue
		}
		switch x := v.(type) {
		case []any:
			if len(x) == 0 {
				return "[]", true
			}
		case string:
			if x == "" {
				return `""`, true
			}
		}
		return strings.TrimSpace(fmt.Sprint(v)), true
	}
	return "", false
}
