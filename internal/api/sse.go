package api

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strconv"
	"time"

	"github.com/gin-gonic/gin"
)

// Server-Sent Events, as a browser's EventSource reads them: each event is "id:", "event:" and one
// "data:" line of JSON, ended by an empty line; a line starting with ":" is a comment (the heartbeat).

// Names of the events of a watch stream.
const (
	EventAdded    = "ADDED"
	EventModified = "MODIFIED"
	EventDeleted  = "DELETED"
	// EventSynced ends a snapshot: every item matching was sent.
	EventSynced = "SYNCED"
	// EventResync says that what the client holds is to be replaced by the snapshot that follows.
	EventResync = "RESYNC"
	// EventPods carries an object's pods, EventEvent one of its Kubernetes events, EventOverview the
	// overview's counts and allocated totals.
	EventPods     = "PODS"
	EventEvent    = "EVENT"
	EventOverview = "OVERVIEW"
	// EventError ends a stream: its data is the error's envelope.
	EventError = "ERROR"
)

// noID leaves an event without an id; resetID sends an empty one, so that a client reconnecting after
// it asks for a fresh snapshot.
const (
	noID    = "\x00"
	resetID = ""
)

// sseWriter writes the events of one stream into a buffer, sent at flush and whenever it holds
// sseChunk bytes, so that a snapshot of thousands of items never sits whole in memory. Each write must
// be done within writeTimeout: a client that does not read its stream loses it. After a failed write
// the writer drops what it is given, and flush says why.
type sseWriter struct {
	w            gin.ResponseWriter
	rc           *http.ResponseController
	buf          bytes.Buffer
	writeTimeout time.Duration
	err          error
}

// sseChunk is what an event stream's buffer holds at most before it is sent; a buffer grown past
// sseKeep is dropped at the end of its batch, so that an idle stream keeps little.
const (
	sseChunk = 32 << 10
	sseKeep  = 4 << 10
)

func newSSEWriter(c *gin.Context, writeTimeout time.Duration) *sseWriter {
	h := c.Writer.Header()
	h.Set("Content-Type", "text/event-stream; charset=utf-8")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	h.Set("X-Content-Type-Options", "nosniff")
	c.Status(http.StatusOK)
	return &sseWriter{w: c.Writer, rc: http.NewResponseController(c.Writer), writeTimeout: writeTimeout}
}

// event adds an event whose data is v as JSON.
func (e *sseWriter) event(name, id string, v any) {
	data, err := json.Marshal(v)
	if err != nil {
		data = []byte(strconv.Quote(err.Error()))
	}
	e.raw(name, id, data)
}

// raw adds an event whose data is one line of JSON already encoded.
func (e *sseWriter) raw(name, id string, data []byte) {
	if id != noID {
		e.buf.WriteString("id:")
		if id != "" {
			e.buf.WriteByte(' ')
			e.buf.WriteString(id)
		}
		e.buf.WriteByte('\n')
	}
	e.buf.WriteString("event: ")
	e.buf.WriteString(name)
	e.buf.WriteString("\ndata: ")
	e.buf.Write(data)
	e.buf.WriteString("\n\n")
	if e.buf.Len() >= sseChunk {
		e.send()
	}
}

// line adds a line of its own, which EventSource does not dispatch: a heartbeat comment, or the retry
// advice.
func (e *sseWriter) line(s string) {
	e.buf.WriteString(s)
	e.buf.WriteString("\n\n")
}

// send writes what the buffer holds.
func (e *sseWriter) send() {
	if e.err == nil && e.buf.Len() > 0 {
		if e.writeTimeout > 0 {
			_ = e.rc.SetWriteDeadline(time.Now().Add(e.writeTimeout))
		}
		_, e.err = e.w.Write(e.buf.Bytes())
	}
	e.buf.Reset()
}

// flush sends what was added, through every buffer on the way to the client.
func (e *sseWriter) flush() error {
	e.send()
	if e.buf.Cap() > sseKeep {
		e.buf = bytes.Buffer{}
	}
	if e.err == nil {
		e.err = e.rc.Flush()
	}
	return e.err
}
