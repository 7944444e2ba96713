package dashboard

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
)

// What a head whose pod an author controls may answer the service's own calls. None of it reaches the
// error the caller is shown; what it said is logged, quoted, without the cluster's token.

// hostileHead serves answer for every request; elsewhere counts the requests another host took.
func hostileHead(t *testing.T, answer http.HandlerFunc) (d *Dashboards, addr string, logs *observer.ObservedLogs, elsewhere *atomic.Int32) {
	t.Helper()
	elsewhere = &atomic.Int32{}
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		elsewhere.Add(1)
		http.Error(w, "OTHER-HOST "+r.Header.Get("X-Ray-Authorization"), http.StatusOK)
	}))
	t.Cleanup(other.Close)
	head := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if answer == nil {
			http.Redirect(w, r, other.URL+"/collect", http.StatusTemporaryRedirect)
			return
		}
		answer(w, r)
	}))
	t.Cleanup(head.Close)
	d = NewDashboards("cluster.local", 2*time.Second)
	core, logs := observer.New(zap.InfoLevel)
	d.Log = zap.New(core)
	return d, strings.TrimPrefix(head.URL, "http://"), logs, elsewhere
}

// raw writes bytes of the head's choosing as its whole answer.
func raw(text string) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		conn, buf, err := http.NewResponseController(w).Hijack()
		if err != nil {
			return
		}
		defer conn.Close()
		_, _ = buf.WriteString(text)
		_ = buf.Flush()
	}
}

// A redirect is not followed: the token stays, the other host is not asked, and the error names the
// status, not where it pointed.
func TestRedirectsAreNotFollowed(t *testing.T) {
	d, addr, logs, elsewhere := hostileHead(t, nil)
	err := d.StopJob(t.Context(), addr, "raysubmit_1", "t0k")
	require.EqualError(t, err, "answered the stop of job raysubmit_1 with a redirect (307 Temporary Redirect), which the service does not follow")
	_, err = d.GCSEventStats(t.Context(), addr, "10.0.0.7", "t0k")
	require.EqualError(t, err, "the Ray dashboard answered with a redirect (307 Temporary Redirect) for gcs_server.out, which the service does not follow")
	assert.Zero(t, elsewhere.Load(), "the other host was asked")
	require.Equal(t, 2, logs.Len())
	assert.Contains(t, logs.All()[0].ContextMap()["location"], "/collect", "where it pointed is logged")
}

// A refusal's status text, body and size stay with the head; the log has a quoted excerpt without the
// token the head echoes.
func TestRefusalsAreTheStatusOnly(t *testing.T) {
	body := "<script>BODY</script> token=t0k\n" + strings.Repeat("x", 100<<10)
	d, addr, logs, _ := hostileHead(t, raw(fmt.Sprintf("HTTP/1.1 500 REASON <b>\r\nContent-Type: text/html\r\nContent-Length: %d\r\n\r\n%s", len(body), body)))
	err := d.StopJob(t.Context(), addr, "raysubmit_1", "t0k")
	require.EqualError(t, err, "refused to stop job raysubmit_1: 500 Internal Server Error")
	_, err = d.GCSEventStats(t.Context(), addr, "10.0.0.7", "t0k")
	require.EqualError(t, err, "the Ray dashboard answered 500 Internal Server Error for gcs_server.out")
	require.Equal(t, 2, logs.Len())
	logged := logs.All()[0].ContextMap()["body"].(string)
	assert.True(t, strings.HasPrefix(logged, `"<script>BODY</script> token=[Ray token]\n`), logged)
	assert.LessOrEqual(t, len(logged), 2*excerptLogged)
	assert.NotContains(t, fmt.Sprint(logs.All()[1].ContextMap()), "t0k")
}

// An answer that is no HTTP is "unreachable", without the bytes the transport's error would quote.
func TestNoHTTPAnswerIsNotQuoted(t *testing.T) {
	d, addr, logs, _ := hostileHead(t, raw("<script>GARBAGE</script>\r\n\r\n"))
	err := d.StopJob(t.Context(), addr, "raysubmit_1", "")
	require.EqualError(t, err, "is unreachable (it did not answer in HTTP)")
	assert.NotContains(t, err.Error(), "GARBAGE")
	assert.Contains(t, logs.All()[0].ContextMap()["error"], "GARBAGE", "the transport's error is logged")
}

// An answer without end is left once it is larger than any gcs_server.out Ray sends.
func TestEndlessLogIsLeft(t *testing.T) {
	var written atomic.Int64
	d, addr, _, _ := hostileHead(t, func(w http.ResponseWriter, _ *http.Request) {
		chunk := []byte(strings.Repeat("Event stats: padding\n", 1<<12))
		for written.Load() < 1<<30 {
			n, err := w.Write(chunk)
			written.Add(int64(n))
			if err != nil {
				return
			}
		}
	})
	d.Client.Timeout = time.Minute
	_, err := d.GCSEventStats(t.Context(), addr, "10.0.0.7", "")
	require.ErrorContains(t, err, "went on beyond 32 MiB")
	assert.Less(t, written.Load(), int64(64<<20))
}

// An answer that trickles is bounded by the call's time.
func TestTricklingAnswerIsBoundedInTime(t *testing.T) {
	d, addr, _, _ := hostileHead(t, func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusOK)
		for {
			if _, err := w.Write([]byte("x")); err != nil {
				return
			}
			if err := http.NewResponseController(w).Flush(); err != nil {
				return
			}
			select {
			case <-r.Context().Done():
				return
			case <-time.After(50 * time.Millisecond):
			}
		}
	})
	d.Client.Timeout = 300 * time.Millisecond
	start := time.Now()
	_, err := d.GCSEventStats(t.Context(), addr, "10.0.0.7", "")
	require.ErrorContains(t, err, "did not answer in time")
	assert.Less(t, time.Since(start), 5*time.Second)
}

// Figures no print of Ray's has (beyond an int64 or a float, below zero) leave their print out: JSON
// holds no infinity, and the panel's answer must encode.
func TestEventStatsOutOfRangeAreLeftOut(t *testing.T) {
	stats := func(total, mean string) string {
		return "[2025-11-30 10:00:00,123 I 1 1] (gcs_server) gcs_server.cc:957: Main service Event stats:\n\n\n" +
			"Global stats: " + total + " total (1 active)\nQueueing time: mean = " + mean + ", max = 1.00ms\n"
	}
	log := stats("10", "1.00ms") + stats("10", "1"+strings.Repeat("7", 307)+" s") + stats("10", "-4.00ms") +
		stats("99999999999999999999", "1.00ms") + stats("20", "2.00ms")
	got, err := ParseEventStats(strings.NewReader(log), time.UTC)
	require.NoError(t, err)
	require.Len(t, got, 2)
	assert.InDelta(t, 1, got[0].QueueingMeanMs, 1e-9)
	assert.InDelta(t, 2, got[1].QueueingMeanMs, 1e-9)
}

// A log of nothing but prints gives at most a week of prints a minute, the newest.
func TestEventStatsPrintsAreBounded(t *testing.T) {
	var log strings.Builder
	for i := range maxGCSPrints + 500 {
		fmt.Fprintf(&log, "[2025-11-30 10:00:00,%03d I 1 1] (gcs_server) gcs_server.cc:957: Main service Event stats:\n"+
			"Global stats: %d total (1 active)\nQueueing time: mean = 1.00ms\n", i%1000, i)
	}
	d, addr, _, _ := hostileHead(t, func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte(log.String())) })
	got, err := d.GCSEventStats(t.Context(), addr, "10.0.0.7", "")
	require.NoError(t, err)
	require.Len(t, got, maxGCSPrints)
	assert.Equal(t, int64(maxGCSPrints+499), got[len(got)-1].Total)
}
