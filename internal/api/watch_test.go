package api

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"ray-service/internal/auth"
	"ray-service/internal/cache"
	"ray-service/internal/ray"
	"ray-service/internal/stream"
)

// feedStore is a fake store whose feed the test drives: Since answers what next holds.
type feedStore struct {
	fakeStore
	mu      sync.Mutex
	changed chan struct{}
	next    []error
}

func (f *feedStore) Changed() <-chan struct{} {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.changed
}

func (f *feedStore) KindChanged(*ray.Kind) <-chan struct{} { return f.Changed() }

func (f *feedStore) Since(*ray.Kind, uint64, cache.Scopes, cache.Scopes) ([]cache.Change, uint64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.next) == 0 {
		return nil, 7, nil
	}
	err := f.next[0]
	f.next = f.next[1:]
	return nil, 7, err
}

// wake makes the next Since answer err and wakes the streams.
func (f *feedStore) wake(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.next = append(f.next, err)
	close(f.changed)
	f.changed = make(chan struct{})
}

// sseLines reads the lines of a stream, with a deadline for each.
type sseLines struct {
	t     *testing.T
	lines chan string
}

func readSSE(t *testing.T, res *http.Response) *sseLines {
	l := &sseLines{t: t, lines: make(chan string, 1024)}
	go func() {
		defer close(l.lines)
		sc := bufio.NewScanner(res.Body)
		for sc.Scan() {
			l.lines <- sc.Text()
		}
	}()
	return l
}

// event returns the next event's fields (id, event, data), skipping comments.
func (l *sseLines) event() map[string]string {
	l.t.Helper()
	ev := map[string]string{}
	for {
		select {
		case line, ok := <-l.lines:
			require.True(l.t, ok, "the stream ended")
			if line == "" {
				if len(ev) > 0 {
					return ev
				}
				continue
			}
			if strings.HasPrefix(line, ":") || strings.HasPrefix(line, "retry:") {
				continue
			}
			k, v, _ := strings.Cut(line, ":")
			ev[k] = strings.TrimPrefix(v, " ")
		case <-time.After(5 * time.Second):
			require.FailNow(l.t, "no event within 5 s", "got %v", ev)
		}
	}
}

func (l *sseLines) ended(d time.Duration) bool {
	deadline := time.After(d)
	for {
		select {
		case _, ok := <-l.lines:
			if !ok {
				return true
			}
		case <-deadline:
			return false
		}
	}
}

func openSSE(ctx context.Context, t *testing.T, url string, header map[string]string) *http.Response {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, "GET", url, nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer t")
	for k, v := range header {
		req.Header.Set(k, v)
	}
	res, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	t.Cleanup(func() { res.Body.Close() })
	return res
}

// watchEnv serves the router with store until the test's end (after its streams are closed).
func watchEnv(t *testing.T, store Store, change func(d *Deps)) *httptest.Server {
	e := &handlerEnv{objects: &fakeObjects{current: instance("a", "x")}, authz: &fakeAuthz{allowed: true,
		scopes: map[string]auth.Scope{"rayclusters": auth.Namespaces("a")}}}
	srv := httptest.NewServer(e.routerWith(func(d *Deps) {
		d.Store = store
		if change != nil {
			change(d)
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

// What is wrong with a watch request is answered like any request: an envelope with the status,
// before any stream starts.
func TestWatchRefusals(t *testing.T) {
	store := &feedStore{fakeStore: fakeStore{items: map[string][]*cache.Item{"rayclusters": {item("a", "x", "Running")}}}, changed: make(chan struct{})}
	srv := watchEnv(t, store, func(d *Deps) { d.Watches = stream.NewWatchLimit(10, 1, 0) })
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	for path, want := range map[string]int{
		"/rest/ray/v1/rayclusters/watch?type=other":      400,
		"/rest/ray/v1/raynodes/watch":                    404,
		"/rest/ray/v1/namespaces/b/rayclusters/watch":    403,
		"/rest/ray/v1/namespaces/a/rayclusters/x/watch2": 404,
		"/rest/ray/v1/overview/watch?namespace=NO":       400,
	} {
		res := openSSE(ctx, t, srv.URL+path, nil)
		assert.Equal(t, want, res.StatusCode, path)
		var env Envelope
		require.NoError(t, json.NewDecoder(res.Body).Decode(&env), path)
		assert.Equal(t, want, env.Code, path)
		assert.NotEmpty(t, env.Msg, path)
	}
	first := openSSE(ctx, t, srv.URL+"/rest/ray/v1/rayclusters/watch", nil)
	require.Equal(t, 200, first.StatusCode)
	second := openSSE(ctx, t, srv.URL+"/rest/ray/v1/namespaces/a/rayclusters/watch", nil)
	require.Equal(t, 429, second.StatusCode, "one stream per caller")
	var env Envelope
	require.NoError(t, json.NewDecoder(second.Body).Decode(&env))
	assert.Equal(t, "TooManyRequests", env.Reason)
	assert.Contains(t, env.Msg, "watch streams")
}

// A stream whose position is no longer kept (it fell behind, or its id is unknown) is told RESYNC,
// with an empty id, and receives a fresh snapshot; it then goes on.
func TestWatchResyncs(t *testing.T) {
	store := &feedStore{fakeStore: fakeStore{items: map[string][]*cache.Item{"rayclusters": {item("a", "x", "Running")}}}, changed: make(chan struct{})}
	srv := watchEnv(t, store, func(d *Deps) { d.Streams.Heartbeat = 50 * time.Millisecond })
	res := openSSE(t.Context(), t, srv.URL+"/rest/ray/v1/rayclusters/watch", nil)
	require.Equal(t, 200, res.StatusCode)
	assert.Equal(t, "text/event-stream; charset=utf-8", res.Header.Get("Content-Type"))
	assert.Equal(t, "no", res.Header.Get("X-Accel-Buffering"))
	lines := readSSE(t, res)
	added := lines.event()
	assert.Equal(t, "ADDED", added["event"])
	assert.NotContains(t, added, "id")
	synced := lines.event()
	assert.Equal(t, "SYNCED", synced["event"])
	assert.Equal(t, `{"total":1}`, synced["data"])
	assert.Regexp(t, `^fake\.0\.[0-9a-z]+$`, synced["id"])

	store.wake(cache.ErrFeedGone)
	resync := lines.event()
	assert.Equal(t, "RESYNC", resync["event"])
	assert.Contains(t, resync, "id")
	assert.Empty(t, resync["id"], "the client's last id is cleared")
	assert.Contains(t, resync["data"], "fell behind")
	assert.Equal(t, "ADDED", lines.event()["event"])
	assert.Equal(t, "SYNCED", lines.event()["event"])

	// An id of another run of the service: RESYNC at once.
	res = openSSE(t.Context(), t, srv.URL+"/rest/ray/v1/rayclusters/watch", map[string]string{"Last-Event-ID": "other.3.x"})
	lines = readSSE(t, res)
	resync = lines.event()
	assert.Equal(t, "RESYNC", resync["event"])
	assert.Contains(t, resync["data"], "another run")
}

// Streams end, cleanly, when the service shuts down.
func TestWatchEndsAtShutdown(t *testing.T) {
	store := &feedStore{fakeStore: fakeStore{items: map[string][]*cache.Item{}}, changed: make(chan struct{})}
	shutdown, stop := context.WithCancel(context.Background())
	detached := &stream.Detached{}
	srv := watchEnv(t, store, func(d *Deps) { d.Shutdown, d.Detached = shutdown, detached })
	var all []*sseLines
	for _, path := range []string{"/rest/ray/v1/rayclusters/watch", "/rest/ray/v1/overview/watch", "/rest/ray/v1/namespaces/a/rayclusters/x/watch"} {
		res := openSSE(t.Context(), t, srv.URL+path, nil)
		require.Equal(t, 200, res.StatusCode, path)
		lines := readSSE(t, res)
		lines.event()
		all = append(all, lines)
	}
	stop()
	// What the shutdown waits for after the server's own: the streams that hold their connection.
	wait, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	require.NoError(t, detached.Wait(wait))
	for _, lines := range all {
		assert.True(t, lines.ended(5*time.Second))
	}
}

// sinceCounter is a feed whose reads are counted by the position they start from.
type sinceCounter struct {
	feedStore
	from map[uint64]int
}

func (f *sinceCounter) Since(k *ray.Kind, seq uint64, before, now cache.Scopes) ([]cache.Change, uint64, error) {
	f.mu.Lock()
	f.from[seq]++
	f.mu.Unlock()
	return f.feedStore.Since(k, seq, before, now)
}

func (f *sinceCounter) reads(seq uint64) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.from[seq]
}

// A stream that resumes reads the feed from its position once: that read both tells that the feed
// still holds the position and gives what changed since.
func TestWatchResumeReadsTheFeedOnce(t *testing.T) {
	store := &sinceCounter{feedStore: feedStore{fakeStore: fakeStore{items: map[string][]*cache.Item{"rayclusters": {item("a", "x", "Running")}}},
		changed: make(chan struct{})}, from: map[uint64]int{}}
	srv := watchEnv(t, store, func(d *Deps) { d.Streams.Heartbeat = 20 * time.Millisecond })
	first := readSSE(t, openSSE(t.Context(), t, srv.URL+"/rest/ray/v1/rayclusters/watch", nil))
	first.event()
	synced := first.event()
	require.Equal(t, "SYNCED", synced["event"])
	hash := synced["id"][strings.LastIndex(synced["id"], ".")+1:]

	res := openSSE(t.Context(), t, srv.URL+"/rest/ray/v1/rayclusters/watch", map[string]string{"Last-Event-ID": "fake.5." + hash})
	require.Equal(t, 200, res.StatusCode)
	lines := readSSE(t, res)
	for heartbeats := 0; heartbeats < 3; {
		select {
		case line, ok := <-lines.lines:
			require.True(t, ok, "the stream ended")
			require.NotContains(t, line, "RESYNC", "the position is held")
			if line == ": heartbeat" {
				heartbeats++
			}
		case <-time.After(5 * time.Second):
			require.FailNow(t, "no heartbeat within 5 s")
		}
	}
	assert.Equal(t, 1, store.reads(5), "the feed is read once from the resumed position")
	assert.Positive(t, store.reads(7), "and from where that read left it after")
}

// An HTTP/1.1 stream takes its connection from the server once its snapshot is sent; its place among
// the streams is given back when its client leaves (seen by its own read of the connection), and a
// stream the service ends finishes its chunked answer cleanly.
func TestStreamHoldsItsConnection(t *testing.T) {
	store := &feedStore{fakeStore: fakeStore{items: map[string][]*cache.Item{"rayclusters": {item("a", "x", "Running")}}}, changed: make(chan struct{})}
	e := &handlerEnv{objects: &fakeObjects{current: instance("a", "x")}, authz: &fakeAuthz{allowed: true,
		scopes: map[string]auth.Scope{"rayclusters": auth.Namespaces("a")}}}
	srv := httptest.NewUnstartedServer(e.routerWith(func(d *Deps) {
		d.Store = store
		d.Watches = stream.NewWatchLimit(10, 1, 0)
	}))
	var hijacked sync.Map
	srv.Config.ConnState = func(c net.Conn, s http.ConnState) {
		if s == http.StateHijacked {
			hijacked.Store(c.RemoteAddr().String(), true)
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)
	url := srv.URL + "/rest/ray/v1/rayclusters/watch"

	ctx, leave := context.WithCancel(t.Context())
	first := openSSE(ctx, t, url, nil)
	require.Equal(t, 200, first.StatusCode)
	lines := readSSE(t, first)
	assert.Equal(t, "ADDED", lines.event()["event"])
	assert.Equal(t, "SYNCED", lines.event()["event"])
	// The connection is taken once the snapshot is written: the client may read it a moment before.
	assert.Eventually(t, func() bool {
		count := 0
		hijacked.Range(func(any, any) bool { count++; return true })
		return count == 1
	}, 2*time.Second, 5*time.Millisecond, "the stream holds its connection")
	store.wake(nil) // it goes on after the handler returned: a change is read and the stream stays open
	assert.Equal(t, 429, openSSE(t.Context(), t, url, nil).StatusCode, "its place is held")

	leave()
	require.Eventually(t, func() bool {
		res := openSSE(t.Context(), t, url, nil)
		res.Body.Close()
		return res.StatusCode == 200
	}, 5*time.Second, 20*time.Millisecond, "the place is given back when the client leaves")

	// Ended by the service (its time is up): the chunked answer ends, not the connection mid-answer.
	short := httptest.NewServer(e.routerWith(func(d *Deps) {
		d.Store = store
		d.Watches = stream.NewWatchLimit(10, 1, 200*time.Millisecond)
	}))
	t.Cleanup(short.Close)
	res := openSSE(t.Context(), t, short.URL+"/rest/ray/v1/rayclusters/watch", nil)
	require.Equal(t, 200, res.StatusCode)
	body, err := io.ReadAll(res.Body)
	require.NoError(t, err, "a clean end of the answer")
	assert.Contains(t, string(body), "event: SYNCED")
}
