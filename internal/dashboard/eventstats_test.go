package dashboard

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"ray-service/internal/promql"
)

// gcsLog is gcs_server.out as Ray 2.10 and later write it (event_stats.cc StatsString: milliseconds
// with two decimals), with a print cut short at the start, another io_context's stats and the GCS's
// debug state between the main loop's prints.
const gcsLog = `Queueing time: mean = 999.00ms, max = 999.00ms, min = 0.00ms, total = 999.00ms
[2025-11-30 10:00:00,123 I 1234 1234] (gcs_server) gcs_server.cc:957: Main service Event stats:


Global stats: 3200 total (13 active)
Queueing time: mean = 45.12ms, max = 1440.26ms, min = 0.00ms, total = 1443.84ms
Execution time:  mean = 44.43ms, total = 1421.70ms
Event stats:
	GcsInMemoryStore.Put - 9 total (6 active), Execution time: mean = 157.78ms, total = 1420.04ms, Queueing time: mean = 160.03ms, max = 1440.26ms, min = 0.00ms, total = 1440.31ms
	InternalKVGcsService.grpc_server.InternalKVMultiGet - 1 total (0 active), Execution time: mean = 0.68ms, total = 0.68ms, Queueing time: mean = 0.00ms, max = -0.00ms, min = 9223372036854.78ms, total = 0.00ms
[2025-11-30 10:00:00,124 I 1234 1234] (gcs_server) gcs_server.cc:960: task_io_context Event stats:


Global stats: 10 total (0 active)
Queueing time: mean = 7777.00ms, max = 0.00ms, min = 0.00ms, total = 0.00ms
[2025-11-30 10:01:00,125 I 1234 1234] (gcs_server) gcs_server.cc:957: Main service Event stats:


Global stats: 3800 total (2 active)
Queueing time: mean = 5.50ms, max = 20.00ms, min = 0.00ms, total = 3300.00ms
Execution time:  mean = 1.00ms, total = 600.00ms
`

// gcsLogOld is Ray 2.9's (to_human_readable: three decimals and a unit), as its log API streams it:
// each chunk after a "1".
const gcsLogOld = "1[2024-01-05 08:00:00,001 I 77 77] (gcs_server) gcs_server.cc:283: Main service Event stats:\n\n\n" +
	"Global stats: 500 total (3 active)\n" +
	"1Queueing time: mean = 280.820 us, max = 84.246 ms, min = 1.000 us, total = 140.410 ms\n" +
	"Execution time:  mean = 1.000 ms, total = 500.000 ms\n" +
	"1[2024-01-05 08:01:00,001 I 77 77] (gcs_server) gcs_server.cc:283: Main service Event stats:\n\n\n" +
	"Global stats: 560 total (0 active)\n" +
	"Queueing time: mean = 1.500 s, max = 3.000 s, min = 0.000 s, total = 90.000 s\n"

func TestParseEventStatsOfEachGeneration(t *testing.T) {
	got, err := ParseEventStats(strings.NewReader(gcsLog), time.UTC)
	require.NoError(t, err)
	require.Len(t, got, 2, "the main loop's prints only, not the one cut short nor task_io_context's")
	assert.Equal(t, promql.LoopPrint{At: time.Date(2025, 11, 30, 10, 0, 0, 123e6, time.UTC), Total: 3200, Active: 13, QueueingMeanMs: 45.12}, got[0])
	assert.Equal(t, promql.LoopPrint{At: time.Date(2025, 11, 30, 10, 1, 0, 125e6, time.UTC), Total: 3800, Active: 2, QueueingMeanMs: 5.5}, got[1])

	got, err = ParseEventStats(strings.NewReader(gcsLogOld), time.UTC)
	require.NoError(t, err)
	require.Len(t, got, 2)
	assert.InDelta(t, 0.28082, got[0].QueueingMeanMs, 1e-9)
	assert.Equal(t, int64(3), got[0].Active)
	assert.InDelta(t, 1500, got[1].QueueingMeanMs, 1e-9)
	assert.Equal(t, int64(560), got[1].Total)
}

// The dashboard is asked for the head node's gcs_server.out by its IP; what it refuses is an error that
// says so with the status, and what it said goes to the log.
func TestGCSEventStatsThroughTheLogAPI(t *testing.T) {
	var asked, rayAuth string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		asked, rayAuth = r.URL.RequestURI(), r.Header.Get("X-Ray-Authorization")
		if r.URL.Query().Get("node_ip") != "10.0.0.7" {
			http.Error(w, "Node with IP 10.0.0.8 not found", http.StatusNotFound)
			return
		}
		w.Header().Set("Content-Type", "text/plain")
		_, _ = w.Write([]byte(gcsLog))
	}))
	defer srv.Close()
	d := NewDashboards("cluster.local", time.Second)
	core, logs := observer.New(zap.InfoLevel)
	d.Log = zap.New(core)
	addr := strings.TrimPrefix(srv.URL, "http://")
	got, err := d.GCSEventStats(t.Context(), addr, "10.0.0.7", "")
	require.NoError(t, err)
	assert.Len(t, got, 2)
	assert.Equal(t, "/api/v0/logs/file?filename=gcs_server.out&lines=20000&node_ip=10.0.0.7", asked)
	assert.Empty(t, rayAuth, "no token where the cluster takes none")
	_, err = d.GCSEventStats(t.Context(), addr, "10.0.0.7", "t0k")
	require.NoError(t, err)
	assert.Equal(t, "Bearer t0k", rayAuth, "a token-mode cluster's token, as KubeRay sends it")
	_, err = d.GCSEventStats(t.Context(), addr, "10.0.0.8", "")
	require.EqualError(t, err, "the Ray dashboard answered 404 Not Found for gcs_server.out")
	require.Equal(t, 1, logs.Len())
	assert.Equal(t, `"Node with IP 10.0.0.8 not found\n"`, logs.All()[0].ContextMap()["body"])
}

// What is kept of a long answer is its end: the newest prints.
func TestLastBytesKeepsTheNewest(t *testing.T) {
	long := strings.Repeat("old line\n", 100000) + "newest\n"
	got, _, err := lastBytes(strings.NewReader(long), 1000)
	require.NoError(t, err)
	assert.Len(t, got, 1000)
	assert.True(t, strings.HasSuffix(string(got), "old line\nnewest\n"))
}
