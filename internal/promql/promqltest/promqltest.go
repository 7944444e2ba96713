// Package promqltest has Prometheus' own engine evaluate the service's PromQL in tests: the queries of
// internal/promql and those of the features that keep their own (internal/idle).
package promqltest

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"
)

// Run has Prometheus' own engine evaluate each test's expression on the input series, a sample every
// 15 s (promtool test rules), and fails t where an answer differs.
func Run[S, T any](t *testing.T, promtool string, series []S, tests []T) {
	t.Helper()
	file := map[string]any{
		"rule_files":          []string{},
		"evaluation_interval": "15s",
		"tests":               []any{map[string]any{"interval": "15s", "input_series": series, "promql_expr_test": tests}},
	}
	b, err := yaml.Marshal(file)
	require.NoError(t, err)
	path := filepath.Join(t.TempDir(), "promql_test.yml")
	require.NoError(t, os.WriteFile(path, b, 0o644))
	out, err := exec.Command(promtool, "test", "rules", path).CombinedOutput()
	require.NoError(t, err, "promtool test rules:\n%s", out)
	require.Contains(t, string(out), "SUCCESS", "%s", out)
}
