//go:build integration

package integration

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// sseEvent is one Server-Sent Event as an EventSource dispatches it.
type sseEvent struct {
	ID    string
	HasID bool
	Name  string
	Data  json.RawMessage
}

func (e sseEvent) summary(t *testing.T) summary {
	t.Helper()
	var s summary
	require.NoError(t, json.Unmarshal(e.Data, &s), "%s: %s", e.Name, e.Data)
	return s
}

func (e sseEvent) String() string { return fmt.Sprintf("%s(id %q) %.120s", e.Name, e.ID, e.Data) }

// sseStream reads one watch stream in the background.
type sseStream struct {
	res        *http.Response
	events     chan sseEvent
	done       chan struct{}
	err        error // why reading ended, after done: nil for a clean end of the stream
	heartbeats atomic.Int32
	cancel     context.CancelFunc
	lastID     string
}

// openWatch opens path on the service at base as token, resuming after lastID when it is set. It
// returns the status and, on 200, the stream (closed at the test's end).
func openWatch(t *testing.T, base, path, token, lastID string) (int, *sseStream) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	req, err := http.NewRequestWithContext(ctx, "GET", base+path, nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Accept", "text/event-stream")
	if lastID != "" {
		req.Header.Set("Last-Event-ID", lastID)
	}
	res, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	if res.StatusCode != 200 {
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		cancel()
		recordStream("GET", path, res, body)
		return res.StatusCode, nil
	}
	recordStream("GET", path, res, nil)
	require.Equal(t, "text/event-stream; charset=utf-8", res.Header.Get("Content-Type"))
	require.Equal(t, "no", res.Header.Get("X-Accel-Buffering"))
	s := &sseStream{res: res, events: make(chan sseEvent, 4096), done: make(chan struct{}), cancel: cancel, lastID: lastID}
	go s.read()
	t.Cleanup(s.close)
	return 200, s
}

// recordStream keeps the opening of a stream among the answers checked against the docs.
func recordStream(method, path string, res *http.Response, body []byte) {
	record(method, path, &response{Status: res.StatusCode, Header: res.Header, Raw: body})
}

func (s *sseStream) close() {
	s.cancel()
	<-s.done
	s.res.Body.Close()
}

// read parses the stream as the EventSource specification says: fields up to an empty line make an
// event; a line starting with ":" is a comment; an id field, even empty, sets the last event id.
func (s *sseStream) read() {
	defer close(s.done)
	defer close(s.events)
	lines := bufio.NewScanner(s.res.Body)
	lines.Buffer(make([]byte, 1<<20), 8<<20)
	var ev sseEvent
	var data []string
	for lines.Scan() {
		line := lines.Text()
		switch {
		case line == "":
			if ev.Name != "" || len(data) > 0 {
				ev.Data = json.RawMessage(strings.Join(data, "\n"))
				if ev.HasID {
					s.lastID = ev.ID
				} else {
					ev.ID = s.lastID
				}
				s.events <- ev
			}
			ev, data = sseEvent{}, nil
		case strings.HasPrefix(line, ":"):
			s.heartbeats.Add(1)
		default:
			field, value, _ := strings.Cut(line, ":")
			value = strings.TrimPrefix(value, " ")
			switch field {
			case "id":
				ev.ID, ev.HasID = value, true
			case "event":
				ev.Name = value
			case "data":
				data = append(data, value)
			}
		}
	}
	s.err = lines.Err()
}

// next returns the next event, failing the test when none comes within d or the stream ended.
func (s *sseStream) next(t *testing.T, d time.Duration) sseEvent {
	t.Helper()
	select {
	case ev, ok := <-s.events:
		require.True(t, ok, "the stream ended (%v)", s.err)
		return ev
	case <-time.After(d):
		require.FailNow(t, "no event", "within %s", d)
	}
	return sseEvent{}
}

// until collects events until one satisfies stop (included), within d.
func (s *sseStream) until(t *testing.T, d time.Duration, what string, stop func(sseEvent) bool) []sseEvent {
	t.Helper()
	deadline := time.After(d)
	var got []sseEvent
	for {
		select {
		case ev, ok := <-s.events:
			require.True(t, ok, "the stream ended (%v) before %s; got %v", s.err, what, got)
			got = append(got, ev)
			if stop(ev) {
				return got
			}
		case <-deadline:
			require.FailNow(t, "waiting for "+what, "within %s; got %v", d, got)
		}
	}
}

// snapshot reads the first events up to SYNCED and returns the items by name.
func (s *sseStream) snapshot(t *testing.T) (map[string]summary, sseEvent) {
	t.Helper()
	items := map[string]summary{}
	for {
		ev := s.next(t, 30*time.Second)
		switch ev.Name {
		case "ADDED":
			require.False(t, ev.HasID, "snapshot items have no id of their own")
			items[ev.summary(t).Name] = ev.summary(t)
		case "SYNCED":
			var d struct{ Total int }
			require.NoError(t, json.Unmarshal(ev.Data, &d))
			require.Equal(t, len(items), d.Total)
			require.NotEmpty(t, ev.ID)
			return items, ev
		case "RESYNC":
		default:
			require.FailNow(t, "unexpected event in a snapshot", "%v", ev)
		}
	}
}

// ended waits until the stream ends, and says whether it did within d.
func (s *sseStream) ended(d time.Duration) bool {
	deadline := time.After(d)
	for {
		select {
		case _, ok := <-s.events:
			if !ok {
				return true
			}
		case <-deadline:
			return false
		}
	}
}

// heartbeatCount is how many comment lines the stream sent so far.
func (s *sseStream) heartbeatCount() int { return int(s.heartbeats.Load()) }
