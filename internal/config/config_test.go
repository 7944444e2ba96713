package config

import (
	"os"
	"path/filepath"
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
	require.ErrorContains(t, err, "template-key-file is required")
	t.Setenv("RAY_SERVICE_TEMPLATE_KEY_FILE", "/keys/template")
	_, err = Load(nil)
	require.ErrorContains(t, err, "audit-key-file is required")
	t.Setenv("RAY_SERVICE_AUDIT_KEY_FILE", "/keys/audit")
	_, err = Load([]string{"--log-level", "loud"})
	require.ErrorContains(t, err, "log-level")
	_, err = Load([]string{"--config", filepath.Join(t.TempDir(), "missing.yaml")})
	require.ErrorContains(t, err, "missing.yaml")
	_, err = Load([]string{"--no-such-flag"})
	assert.Error(t, err)
}
