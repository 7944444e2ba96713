package metrics

import (
	"math"
	"testing"
	"time"

	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The panels' queries select the cluster by namespace and ray_io_cluster only, and nothing that is not
// a Kubernetes name reaches them.
func TestHealthExpressions(t *testing.T) {
	w := Window{Start: time.Unix(0, 0), End: time.Unix(600, 0), Step: 30 * time.Second}
	exprs, err := HealthExpressions("team", "demo", w)
	require.NoError(t, err)
	assert.Equal(t, `max(ray_operation_queue_time_ms{namespace="team",ray_io_cluster="demo",Component="gcs_server"})`, exprs["gcsEventPressure"])
	assert.Equal(t, `histogram_quantile(0.99, sum by (le) (rate(ray_health_check_rpc_latency_ms_bucket{namespace="team",ray_io_cluster="demo"}[2m])))`,
		exprs["nodeHealthChecks"])
	assert.Contains(t, exprs["jobAPIPressure"], `endpoint=~"/api/jobs.*"`)
	assert.Len(t, exprs, 4)
	w.Step = 5 * time.Minute
	exprs, err = HealthExpressions("team", "demo", w)
	require.NoError(t, err)
	assert.Contains(t, exprs["dashboardPressure"], "[5m]", "the rate spans a step at least")
	for _, bad := range [][2]string{{`team"}`, "demo"}, {"team", `demo",x=~".*`}, {"", "demo"}} {
		_, err := HealthExpressions(bad[0], bad[1], w)
		assert.Error(t, err, "%q", bad)
	}
}

// Levels follow the thresholds; the verdict is the worst level with data, naming its panels.
func TestHealthLevelsAndVerdict(t *testing.T) {
	assert.Equal(t, LevelOK, level(99, 100, 1000))
	assert.Equal(t, LevelWarning, level(100, 100, 1000))
	assert.Equal(t, LevelCritical, level(1000, 100, 1000))
	panels := []Panel{{Title: "A", Level: LevelWarning}, {Title: "B", Level: LevelNoData}, {Title: "C", Level: LevelWarning}, {Title: "D", Level: LevelOK}}
	assert.Equal(t, Verdict{Level: LevelWarning, Message: "A, C warning"}, verdict(panels))
	assert.Equal(t, LevelNoData, verdict([]Panel{{Level: LevelNoData}}).Level)
	assert.Equal(t, LevelOK, verdict([]Panel{{Level: LevelOK}, {Level: LevelNoData}}).Level)
}

// PromQL answers NaN for a mean over a window without observations: such samples are gaps, never values,
// so that an answer always encodes as JSON.
func TestPointsLeaveOutWhatIsNoFigure(t *testing.T) {
	s := &model.SampleStream{Values: []model.SamplePair{
		{Timestamp: 1000, Value: 1.5}, {Timestamp: 2000, Value: model.SampleValue(math.NaN())},
		{Timestamp: 3000, Value: model.SampleValue(math.Inf(1))}, {Timestamp: 4000, Value: 2},
	}}
	assert.Equal(t, []Point{{T: 1, V: 1.5}, {T: 4, V: 2}}, points(s))
	_, ok := lastAt(points(&model.SampleStream{Values: []model.SamplePair{{Timestamp: 5000, Value: model.SampleValue(math.NaN())}}}), time.Unix(5, 0))
	assert.False(t, ok, "a NaN at the end of the window is no sample there")
}
