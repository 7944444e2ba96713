package config

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestLoadPrecedence(t *testing.T) {
	file := filepath.Join(t.TempDir(), "config.yaml")
	require.NoError(t, os.WriteFile(file, []byte("listen: 127.0.0.1:9000\nlog-level: warn\nprometheus-url: http://from-file:9090\nauth-cache-ttl: 10s\ntemplate-key-file: /keys/template\naudit-key-file: /keys/audit\n"), 0o600))
	t.Setenv("RAY_SERVICE_PROMETHEUS_URL", "http://from-env:9090")
	t.Setenv("RAY_SERVICE_LOG_LEVEL", "debug")
	c, err := Load([]string{"--config", file, "--log-level", "error"})
	require.NoError(t, err)
	assert.Equal(t, "127.0.0.1:9000", c.Listen, "from the file")
	assert.Equal(t, "http://from-env:9090", c.PrometheusURL, "the environment over the file")
	assert.Equal(t, "error", c.LogLevel, "a flag over the environment")
	assert.Equal(t, 10*time.Second, c.AuthCacheTTL)
	assert.Equal(t, "cluster.local", c.ClusterDomain, "defaults")
	assert.Equal(t, "rayDefaultDashboard", c.GrafanaDashboardUID)
	assert.Equal(t, "/keys/template", c.TemplateKeyFile)
	assert.Equal(t, "/keys/audit", c.AuditKeyFile)
}

func TestLoadRefusals(t *testing.T) {
	_, err := Load(nil)
	require.ErrorContains(t, err, "give one of template-key-file and template-key-secret")
	_, err = Load([]string{"--template-key-secret", "no-namespace"})
	require.ErrorContains(t, err, "want namespace/name")
	_, err = Load([]string{"--template-key-secret", "ray/k", "--template-key-file", "/keys/template"})
	require.ErrorContains(t, err, "give one of")
	t.Setenv("RAY_SERVICE_TEMPLATE_KEY_FILE", "/keys/template")
	t.Setenv("RAY_SERVICE_AUDIT_KEY_FILE", "/keys/audit")
	_, err = Load([]string{"--tls-cert-file", "/tls/tls.crt"})
	require.ErrorContains(t, err, "go together")
	_, err = Load([]string{"--metrics-listen", ":8080"})
	require.ErrorContains(t, err, "the API's own address")
	t.Setenv("RAY_SERVICE_AUDIT_KEY_FILE", "")
	_, err = Load(nil)
	require.ErrorContains(t, err, "give one of audit-key-file and audit-key-secret")
	t.Setenv("RAY_SERVICE_AUDIT_KEY_FILE", "/keys/audit")
	_, err = Load([]string{"--log-level", "loud"})
	require.ErrorContains(t, err, "log-level")
	_, err = Load([]string{"--config", filepath.Join(t.TempDir(), "missing.yaml")})
	require.ErrorContains(t, err, "missing.yaml")
	_, err = Load([]string{"--no-such-flag"})
	assert.Error(t, err)
}

// The utilization's readings of use are split at UTC midnights into whole steps: a step that does not
// divide a day is refused (a midnight between two steps stopped the readings for an hour); one that
// does is taken.
func TestUsageMeasureStepDividesADay(t *testing.T) {
	t.Setenv("RAY_SERVICE_TEMPLATE_KEY_FILE", "/keys/template")
	t.Setenv("RAY_SERVICE_AUDIT_KEY_FILE", "/keys/audit")
	for _, step := range []string{"7s", "1m10s", "50m", "2.3ms"} {
		_, err := Load([]string{"--usage-measure-step", step, "--usage-measure-every", "1h"})
		require.ErrorContains(t, err, "divides a day", step)
	}
	for _, step := range []string{"5s", "15s", "1m", "1m30s", "45s", "1h", "500ms"} {
		c, err := Load([]string{"--usage-measure-step", step, "--usage-measure-every", "1h"})
		require.NoError(t, err, step)
		want, err := time.ParseDuration(step)
		require.NoError(t, err)
		assert.Equal(t, want, c.UsageMeasureStep, step)
	}
}

// The history's quotas in bytes are quantities: 64Mi and 1Gi by default, 0 for no bound; anything else
// is refused, naming the flag.
func TestHistoryQuotas(t *testing.T) {
	t.Setenv("RAY_SERVICE_TEMPLATE_KEY_FILE", "/keys/template")
	t.Setenv("RAY_SERVICE_AUDIT_KEY_FILE", "/keys/audit")
	c, err := Load(nil)
	require.NoError(t, err)
	assert.Equal(t, int64(64<<20), c.HistoryNamespaceBytes)
	assert.Equal(t, int64(1<<30), c.HistoryBytes)
	c, err = Load([]string{"--history-namespace-quota", "0", "--history-quota", "500M"})
	require.NoError(t, err)
	assert.Zero(t, c.HistoryNamespaceBytes)
	assert.Equal(t, int64(500_000_000), c.HistoryBytes)
	for _, bad := range []string{"lots", "-1Mi"} {
		_, err = Load([]string{"--history-namespace-quota", bad})
		require.ErrorContains(t, err, "history-namespace-quota", bad)
	}
}

// The Ray dashboards have an origin of their own by default; the forwarded headers of no gateway are
// believed unless it is named.
func TestDashboards(t *testing.T) {
	t.Setenv("RAY_SERVICE_TEMPLATE_KEY_FILE", "/keys/template")
	t.Setenv("RAY_SERVICE_AUDIT_KEY_FILE", "/keys/audit")
	c, err := Load(nil)
	require.NoError(t, err)
	assert.Equal(t, ":8081", c.DashboardListen)
	assert.Equal(t, "8081", c.DashboardPort)
	assert.False(t, c.DashboardSameOrigin)
	assert.Empty(t, c.TrustedProxyPrefixes)
	assert.Positive(t, c.MaxDashboardRequestsPerCaller)
	assert.Positive(t, c.MaxDashboardDuration)
	c, err = Load([]string{"--trusted-proxies", "10.0.0.0/8,192.0.2.7,::1"})
	require.NoError(t, err)
	assert.Equal(t, "[10.0.0.0/8 192.0.2.7/32 ::1/128]", fmt.Sprint(c.TrustedProxyPrefixes))
	c, err = Load([]string{"--dashboard-listen", "", "--dashboard-same-origin"})
	require.NoError(t, err, "sandboxed on the API's origin, where the operator says so")
	assert.Empty(t, c.DashboardPort)
	for args, want := range map[string]string{
		"--dashboard-listen=":                          "need an origin of their own",
		"--dashboard-listen=:8080":                     "the API's or the metrics' address",
		"--dashboard-listen=8081":                      "want host:port",
		"--dashboard-origin=https://dash.example/path": "want scheme://host[:port]",
		"--trusted-proxies=gateway.example":            "want an IP address or a CIDR",
		"--max-dashboard-duration=-1s":                 "want 0 (no bound) or more",
		"--dashboard-origin=https://dash.example --dashboard-listen= --dashboard-same-origin": "needs dashboard-listen",
	} {
		_, err := Load(strings.Fields(args))
		assert.ErrorContains(t, err, want, args)
	}
}

// The Lease's former names are read where the new ones are not set, from a flag or a file; the new
// names win where both are.
func TestLeaseFormerNames(t *testing.T) {
	keys := []string{"--template-key-file", "/keys/template", "--audit-key-file", "/keys/audit"}
	c, err := Load(keys)
	require.NoError(t, err)
	assert.Equal(t, "ray-service-history", c.Lease, "the name the history's Lease had: replicas before and after an upgrade share it")
	assert.Equal(t, 15*time.Second, c.LeaseDuration)
	c, err = Load(append(keys, "--history-lease", "old", "--history-lease-namespace", "ns"))
	require.NoError(t, err)
	assert.Equal(t, "old", c.Lease)
	assert.Equal(t, "ns", c.LeaseNamespace)
	file := filepath.Join(t.TempDir(), "config.yaml")
	require.NoError(t, os.WriteFile(file, []byte("history-lease: from-file\nlease: new\n"), 0o600))
	c, err = Load(append(keys, "--config", file))
	require.NoError(t, err)
	assert.Equal(t, "new", c.Lease)
	_, err = Load(append(keys, "--lease-renew-deadline", "20s"))
	require.ErrorContains(t, err, "lease-duration 15s, lease-renew-deadline 20s")
	_, err = Load(append(keys, "--history-ending-log-bytes", "lots"))
	require.ErrorContains(t, err, `history-ending-log-bytes "lots"`)
	c, err = Load(append(keys, "--history-ending-log-bytes", "1Mi", "--delete-wait", "1m"))
	require.NoError(t, err)
	assert.Equal(t, int64(1<<20), c.HistoryEndingBytes)
	assert.Equal(t, time.Minute, c.DeleteWait)
}
