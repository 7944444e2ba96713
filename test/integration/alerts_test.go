//go:build integration

package integration

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"
)

// The chart's alerts: off by default; on, the rules it renders pass `promtool check rules` and the unit
// tests of test/alerts (each alert fires when it should and stays quiet when it should not), the
// service's own metrics are scraped for them, and each alert's runbook_url names a section of
// docs/runbooks.md. Rendering needs the stack's helm, hence an integration test; it touches no cluster.
func TestAlertRules(t *testing.T) {
	t.Parallel()
	helm := filepath.Join(env.vars["STACK_BIN"], "helm")
	chart := filepath.Join(env.root, "charts", "ray-package")
	only := "charts/ray-service/templates/prometheusrule.yaml"
	for _, d := range docs(t, runTool(t, helm, "template", "openfuyao-ray", chart, "-n", "ray-system")) {
		assert.NotEqual(t, "PrometheusRule", d["kind"], "no alerts unless prometheusRule.enabled")
	}

	// The unit tests name the job of the chart's own PodMonitor in the namespace ray-system.
	rendered := docs(t, runTool(t, helm, "template", "openfuyao-ray", chart, "-n", "ray-system", "--show-only", only,
		"--set", "ray-service.prometheusRule.enabled=true"))
	var spec any
	for _, d := range rendered {
		switch d["kind"] {
		case "PrometheusRule":
			spec = d["spec"]
		case "PodMonitor":
			ep := d["spec"].(map[string]any)["podMetricsEndpoints"].([]any)[0].(map[string]any)
			assert.Equal(t, "metrics", ep["port"])
			assert.Equal(t, true, ep["honorLabels"], "the series that name a Ray object keep its namespace")
		}
	}
	require.NotNil(t, spec, "a PrometheusRule")
	dir := t.TempDir()
	rules, err := yaml.Marshal(spec)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "rules.yaml"), rules, 0o600))
	tests, err := os.ReadFile(filepath.Join(env.root, "test", "alerts", "rules_test.yaml"))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "rules_test.yaml"), tests, 0o600))
	runTool(t, "promtool", "check", "rules", filepath.Join(dir, "rules.yaml"))
	runTool(t, "promtool", "test", "rules", filepath.Join(dir, "rules_test.yaml"))

	// Every alert has a unit test and a runbook section, which its runbook_url names.
	runbooks, err := os.ReadFile(filepath.Join(env.root, "docs", "runbooks.md"))
	require.NoError(t, err)
	sections := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^## (\S+)$`).FindAllStringSubmatch(string(runbooks), -1) {
		sections[strings.ToLower(m[1])] = true
	}
	var alerts []string
	for _, g := range spec.(map[string]any)["groups"].([]any) {
		for _, r := range g.(map[string]any)["rules"].([]any) {
			rule := r.(map[string]any)
			name := rule["alert"].(string)
			alerts = append(alerts, name)
			url := rule["annotations"].(map[string]any)["runbook_url"].(string)
			assert.Equal(t, "docs/runbooks.md#"+strings.ToLower(name), url)
			assert.True(t, sections[strings.ToLower(name)], "docs/runbooks.md has no section ## %s", name)
			assert.Contains(t, string(tests), "alertname: "+name, "test/alerts/rules_test.yaml tests %s", name)
		}
	}
	assert.Len(t, alerts, 14, "the alerts the runbooks describe (a new one needs its test and section)")
}
