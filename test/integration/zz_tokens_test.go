//go:build integration

package integration

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// No token the tests used appears in any log line of the run: the services' (every instance the
// tests started) and the stack's. Runs last, after every other test has logged what it logs.
func TestLogsHoldNoTokens(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(env.state, "logs", "*.log"))
	require.NoError(t, err)
	services := 0
	for _, f := range files {
		if strings.HasPrefix(filepath.Base(f), "ray-service") {
			services++
		}
	}
	require.Greater(t, services, 5, "the logs of the services the tests started are there")
	read := 0
	for _, f := range files {
		data, err := os.ReadFile(f)
		require.NoError(t, err)
		read += len(data)
		for user, token := range env.tokens {
			require.NotEmpty(t, token)
			assert.NotContains(t, string(data), token, "%s's token in %s", user, filepath.Base(f))
		}
	}
	t.Logf("%d log files, %d bytes, searched for %d tokens", len(files), read, len(env.tokens))
}
