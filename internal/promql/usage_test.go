package promql

import (
	"encoding/json"
	"math"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"ray-service/internal/accel"
)

// fakePrometheus answers each range query with the first series whose key the query contains, one
// sample at the window's end, and nothing where no key matches.
func fakePrometheus(t *testing.T, answers []struct {
	contains, labels string
	v                float64
}) string {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := r.ParseForm(); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		q, end := r.Form.Get("query"), r.Form.Get("end")
		result := []any{}
		for _, a := range answers {
			if strings.Contains(q, a.contains) {
				var m map[string]string
				if err := json.Unmarshal([]byte(a.labels), &m); err != nil {
					http.Error(w, err.Error(), http.StatusInternalServerError)
					return
				}
				result = append(result, map[string]any{"metric": m, "values": []any{[]any{json.Number(end), strconv.FormatFloat(a.v, 'f', -1, 64)}}})
				break
			}
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"status": "success", "data": map[string]any{"resultType": "matrix", "result": result}})
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// An exporter that is scraped but names none of the Ray pods that request its device gives no figure
// and a warning saying why; where no Ray pod requests the device, 0 is the figure. vNPU slices that no
// series of npu-exporter measures (a 910's) are named, and where they are all the NPUs held, the NPUs in
// use are unknown, with that warning alone.
func TestUsageSaysWhatNoPodMapsTo(t *testing.T) {
	w := Window{Start: time.Unix(1000, 0), End: time.Unix(1600, 0), Step: time.Minute}
	url := fakePrometheus(t, []struct {
		contains, labels string
		v                float64
	}{
		{`or on() label_replace(0 * max({__name__=~"DCGM_FI_DEV_GPU_UTIL|DCGM_FI_PROF_GR_ENGINE_ACTIVE"})`, `{"unmapped":"true"}`, 0},
		{`resource=~"nvidia_com_gpu"`, `{}`, 2},
		{`or on() label_replace(0 * max(npu_chip_info_utilization)`, `{"unmapped":"true"}`, 0},
		{`unless on(namespace, pod)`, `{"resource":"huawei_com_Ascend910_4c"}`, 8},
		{`huawei_com_Ascend910_4c"`, `{}`, 1},
	})
	q, err := NewQuerier(url, 5*time.Second, 0)
	require.NoError(t, err)
	held := accel.Holdings{{Kind: accel.NPU, Resource: "huawei.com/Ascend910-4c", Model: "Ascend910", Count: 8, Devices: 1}}
	used, series, warnings := q.Usage(t.Context(), w, Scope{Namespaces: []string{"ray"}, Held: held})
	assert.Nil(t, used.GPU, "Ray pods request 2 GPUs and DCGM names none of them: unknown, not 0")
	assert.Nil(t, used.NPU, "the NPUs held are vNPUs of a 910, which npu-exporter does not measure: unknown, not 0")
	require.NotEmpty(t, series.Allocated["npu"])
	assert.InDelta(t, 1, series.Allocated["npu"][0].V, 1e-9)
	joined := strings.Join(warnings, "\n")
	assert.Contains(t, joined, "used gpu: DCGM_FI_DEV_GPU_UTIL is scraped, but none of its series names a Ray pod in scope while they request 2 GPU")
	assert.Contains(t, joined, "DCGM_EXPORTER_KUBERNETES=true")
	assert.Contains(t, joined, "used npu: Ray pods in scope hold 8 vNPU slices of huawei_com_Ascend910_4c")
	assert.Contains(t, joined, "for vNPUs of Ascend 310P chips only")
	assert.NotContains(t, joined, "used npu: container_npu_utilization is scraped")

	// No Ray pod holds an NPU: 0.
	url = fakePrometheus(t, []struct {
		contains, labels string
		v                float64
	}{{`or on() label_replace(0 * max(npu_chip_info_utilization)`, `{"unmapped":"true"}`, 0}})
	q, err = NewQuerier(url, 5*time.Second, 0)
	require.NoError(t, err)
	used, _, warnings = q.Usage(t.Context(), w, Scope{Namespaces: []string{"ray"}})
	require.NotNil(t, used.NPU)
	assert.Zero(t, *used.NPU)
	assert.NotContains(t, strings.Join(warnings, "\n"), "used npu:")
}

// A device's figure mapped at first and unmapped at the window's end is one series of both parts, and
// unmapped.
func TestMergeMappedAcrossTheWindow(t *testing.T) {
	end := time.Unix(1600, 0)
	m := model.Matrix{
		{Metric: model.Metric{}, Values: []model.SamplePair{{Timestamp: 1000_000, Value: 0.5}, {Timestamp: 1300_000, Value: 0.4}}},
		{Metric: model.Metric{unmappedLabel: "true"}, Values: []model.SamplePair{{Timestamp: 1600_000, Value: 0}}},
	}
	pts, unmapped := mergeMapped(m, end)
	assert.True(t, unmapped)
	assert.Equal(t, []Point{{T: 1000, V: 0.5}, {T: 1300, V: 0.4}, {T: 1600, V: 0}}, pts)
	pts, unmapped = mergeMapped(m[:1], end)
	assert.False(t, unmapped)
	assert.Len(t, pts, 2)
}

// A source whose every step is NaN (a mean or quantile without observations) is no answer: the next
// source answers.
func TestHealthSourceOfNaNIsNone(t *testing.T) {
	w := Window{Start: time.Unix(1000, 0), End: time.Unix(1600, 0), Step: time.Minute}
	url := fakePrometheus(t, []struct {
		contains, labels string
		v                float64
	}{
		{`rate(ray_operation_queue_time_ms_sum`, `{}`, math.NaN()},
		{`max by () (ray_operation_queue_time_ms{`, `{}`, 40},
	})
	q, err := NewQuerier(url, 5*time.Second, 0)
	require.NoError(t, err)
	h := q.ClusterHealth(t.Context(), w, "team", "demo")
	p := panelNamed(h.Panels, "gcsEventPressure")
	require.NotNil(t, p.Value, p.Reason)
	assert.InDelta(t, 40, *p.Value, 0)
	assert.Contains(t, p.Source, "gauge")
}
