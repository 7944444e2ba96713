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

// PodInfo is kube-state-metrics' kube_pod_info of pod, in namespace ray, of the Ray cluster given (as
// KubeRay's pods are owned: created_by_kind RayCluster).
func PodInfo(pod, cluster string) string {
	return `kube_pod_info{namespace="ray",pod="` + pod + `",created_by_kind="RayCluster",created_by_name="` + cluster + `"}`
}

// Run has Prometheus' own engine evaluate each test's expression on the input series, a sample every
// 15 s (promtool test rules), and fails t where an answer differs.
func Run[S, T any](t *testing.T, series []S, tests []T) {
	t.Helper()
	promtool, err := exec.LookPath("promtool")
	require.NoError(t, err, "promtool (Debian package prometheus) is needed: .ci/run installs it")
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
