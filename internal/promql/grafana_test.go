package promql

import (
	"encoding/json"
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The chart's Grafana dashboard asks Prometheus what the service asks, of each selected cluster apart:
// every source of each health panel (and the job API's breakdown by method), the GPUs in use by
// whichever label the scrape left the pod in, and the utilization held and used. (That its schedules
// panels read what the service exposes is internal/metrics' test.)
func TestGrafanaDashboardAsksAsTheService(t *testing.T) {
	b, err := os.ReadFile("../../charts/ray-package/charts/ray-service/dashboards/ray.json")
	require.NoError(t, err)
	var d struct {
		Panels []struct {
			ID      int    `json:"id"`
			Title   string `json:"title"`
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
	h := GrafanaHealthExpressions()
	assert.Equal(t, []string{GrafanaGPUExpression()}, asked[3], "GPU utilization")
	assert.Equal(t, h["gcsEventPressure"], asked[6], "GCS event pressure")
	assert.Equal(t, h["nodeHealthChecks"], asked[7], "node health checks")
	assert.Equal(t, append(h["jobAPIPressure"], h["jobAPIPressure.split"]...), asked[8], "job API pressure")
	assert.Equal(t, h["dashboardPressure"], asked[9], "dashboard pressure")
	u := GrafanaUtilizationExpressions()
	assert.Equal(t, []string{u["cpu.allocated"], u["cpu.used"]}, asked[14], "core-hours held and used")
	assert.Equal(t, []string{u["gpu.allocated"], u["gpu.used"]}, asked[15], "GPU-hours held and used")
}
