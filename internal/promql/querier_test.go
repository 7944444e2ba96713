package promql

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The queries Prometheus answers and those it does not are counted apart, for the service's metrics
// (ray_service_prometheus_queries_total); a query whose caller went away is neither.
func TestQueriesAnsweredAndFailedAreCounted(t *testing.T) {
	w := Window{Start: time.Unix(1000, 0), End: time.Unix(1600, 0), Step: time.Minute}
	q, err := NewQuerier(fakePrometheus(t, nil), 5*time.Second, 0)
	require.NoError(t, err)
	_, err = q.rangeQuery(t.Context(), "up", w)
	require.NoError(t, err)
	assert.Equal(t, int64(1), q.Answered())
	assert.Zero(t, q.Failed())

	down := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "overloaded", http.StatusServiceUnavailable)
	}))
	t.Cleanup(down.Close)
	q, err = NewQuerier(down.URL, 5*time.Second, 0)
	require.NoError(t, err)
	_, err = q.Instant(t.Context(), "up", time.Unix(1600, 0))
	require.Error(t, err)
	_, err = q.rangeQuery(t.Context(), "up", w)
	require.Error(t, err)
	assert.Equal(t, int64(2), q.Failed())

	gone, cancel := context.WithCancel(t.Context())
	cancel()
	_, err = q.Instant(gone, "up", time.Unix(1600, 0))
	require.Error(t, err)
	assert.Equal(t, int64(2), q.Failed(), "a query whose caller went away")
	assert.Zero(t, q.Answered())
}
