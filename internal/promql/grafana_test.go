package promql_test

import (
	"encoding/json"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"ray-service/internal/metrics"
	"ray-service/internal/promql"
	"ray-service/internal/ray"
)

// The chart's Grafana dashboard asks Prometheus what the service asks, of each selected cluster apart:
// every source of each health panel (and the job API's breakdown by method), the GPUs in use by
// whichever label the scrape left the pod in, and the utilization held and used; and its schedules
// panels read what the service's runs collector exposes.
func TestGrafanaDashboardAsksAsTheService(t *testing.T) {
	b, err := os.ReadFile("../../charts/ray-package/charts/ray-service/dashboards/ray.json")
	require.NoError(t, err)
	var d struct {
		Panels []struct {
			ID      int `json:"id"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	require.NoError(t, json.Unmarshal(b, &d))
	asked := map[int][]string{}
	for _, p := range d.Panels {
		for _, tg := range p.Targets {
			asked[p.ID] = append(asked[p.ID], tg.Expr)
		}
	}
	h := promql.GrafanaHealthExpressions()
	assert.Equal(t, []string{promql.GrafanaGPUExpression()}, asked[3], "GPU utilization")
	assert.Equal(t, h["gcsEventPressure"], asked[6], "GCS event pressure")
	assert.Equal(t, h["nodeHealthChecks"], asked[7], "node health checks")
	assert.Equal(t, append(h["jobAPIPressure"], h["jobAPIPressure.split"]...), asked[8], "job API pressure")
	assert.Equal(t, h["dashboardPressure"], asked[9], "dashboard pressure")
	u := promql.GrafanaUtilizationExpressions()
	assert.Equal(t, []string{u["cpu.allocated"], u["cpu.used"]}, asked[14], "core-hours held and used")
	assert.Equal(t, []string{u["gpu.allocated"], u["gpu.used"]}, asked[15], "GPU-hours held and used")

	runs := describedNames(t, metrics.NewRunsCollector(func(func(string, string, string, *ray.RunsState)) {}))
	for _, id := range []int{11, 12} {
		require.Len(t, asked[id], 1, "panel %d", id)
		assert.True(t, slices.ContainsFunc(runs, func(n string) bool { return strings.Contains(asked[id][0], n+"{") }),
			"panel %d asks for a series the service exposes (%v): %s", id, runs, asked[id][0])
	}
}

// describedNames are the names of the metrics a collector describes.
func describedNames(t *testing.T, c prometheus.Collector) []string {
	t.Helper()
	ch := make(chan *prometheus.Desc, 16)
	c.Describe(ch)
	close(ch)
	var out []string
	for d := range ch {
		s := d.String() // Desc{fqName: "name", ...}
		_, rest, ok := strings.Cut(s, `fqName: "`)
		require.True(t, ok, s)
		name, _, _ := strings.Cut(rest, `"`)
		out = append(out, name)
	}
	return out
}
