package metrics

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestMetricsReference checks that docs/reference/metrics.md lists every ray_service_* metric the
// service's code names, so that a metric cannot be added without a word for whoever alerts on it.
func TestMetricsReference(t *testing.T) {
	page, err := os.ReadFile("../../docs/reference/metrics.md")
	require.NoError(t, err)
	name := regexp.MustCompile(`"(ray_service_[a-z_]+)"`)
	seen := map[string]string{}
	require.NoError(t, filepath.WalkDir("..", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return err
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range name.FindAllStringSubmatch(string(src), -1) {
			seen[m[1]] = path
		}
		return nil
	}))
	require.NotEmpty(t, seen)
	var missing []string
	for metric, where := range seen {
		if !strings.Contains(string(page), "`"+metric+"`") {
			missing = append(missing, metric+" ("+where+")")
		}
	}
	assert.Empty(t, missing, "metrics the code names that docs/reference/metrics.md does not list")
}
