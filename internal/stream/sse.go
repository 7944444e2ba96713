package stream

import (
	"bytes"
	"encoding/json"
	"net"
	"net/http"
	"strconv"
	"time"
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

// A writer writes the events of one stream into a buffer, sent at flush and whenever it holds
// sseChunk bytes, so that a snapshot of thousands of items never sits whole in memory. Each write must
// be done within writeTimeout: a client that does not read its stream loses it. After a failed write
// the writer drops what it is given, and flush says why.
//
// Once detached (HTTP/1.1), the stream holds its connection itself and writes each batch as one chunk
// of the chunked answer the server began; the server's buffers for the connection are let go.
type writer struct {
	w            http.ResponseWriter
	rc           *http.ResponseController
	conn         net.Conn // set once detached
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

// newWriter begins the answer on w: 200, held by the server's writer until the first write.
func newWriter(w http.ResponseWriter, writeTimeout time.Duration) *writer {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream; charset=utf-8")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusOK)
	return &writer{w: w, rc: http.NewResponseController(w), writeTimeout: writeTimeout}
}

// event adds an event whose data is v as JSON.
func (e *writer) event(name, id string, v any) {
	data, err := json.Marshal(v)
	if err != nil {
		data = []byte(strconv.Quote(err.Error()))
	}
	e.raw(name, id, data)
}

// raw adds an event whose data is one line of JSON already encoded.
func (e *writer) raw(name, id string, data []byte) {
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
func (e *writer) line(s string) {
	e.buf.WriteString(s)
	e.buf.WriteString("\n\n")
}

// send writes what the buffer holds.
func (e *writer) send() {
	if e.err == nil && e.buf.Len() > 0 {
		deadline := time.Time{}
		if e.writeTimeout > 0 {
			deadline = time.Now().Add(e.writeTimeout)
		}
		if e.conn != nil {
			_ = e.conn.SetWriteDeadline(deadline)
			e.err = e.chunk(e.buf.Bytes())
		} else {
			if !deadline.IsZero() {
				_ = e.rc.SetWriteDeadline(deadline)
			}
			_, e.err = e.w.Write(e.buf.Bytes())
		}
	}
	e.buf.Reset()
}

// chunk writes data as one chunk of the chunked answer, in one write.
func (e *writer) chunk(data []byte) error {
	head := strconv.AppendInt(make([]byte, 0, 18), int64(len(data)), 16)
	head = append(head, '\r', '\n')
	bufs := net.Buffers{head, data, crlf}
	_, err := bufs.WriteTo(e.conn)
	return err
}

var crlf = []byte("\r\n")

// flush sends what was added, through every buffer on the way to the client.
func (e *writer) flush() error {
	e.send()
	if e.buf.Cap() > sseKeep {
		e.buf = bytes.Buffer{}
	}
	if e.err == nil && e.conn == nil {
		e.err = e.rc.Flush()
	}
	return e.err
}

// detach sends what was added, then takes the connection from the HTTP server, and returns it: from
// then on the stream writes to it itself. It returns nil where the connection cannot be taken (HTTP/2,
// where streams share a connection, or a writer that does not allow it) or a write failed: the stream
// then goes on through the server.
func (e *writer) detach() net.Conn {
	if e.flush() != nil {
		return nil
	}
	// The server's own writer is asked: gin's refuses once a body has begun, which is the point here
	// (everything written so far is flushed, and the answer is chunked: see chunk).
	rw := e.w
	if u, ok := rw.(interface{ Unwrap() http.ResponseWriter }); ok {
		rw = u.Unwrap()
	}
	conn, _, err := http.NewResponseController(rw).Hijack() // the server's buffers for the connection are let go
	if err != nil {
		return nil
	}
	e.conn, e.w, e.rc = conn, nil, nil
	return conn
}

// end ends a detached answer: the chunked answer's last chunk, then the connection closed.
func (e *writer) end() {
	if e.conn == nil {
		return
	}
	if e.err == nil {
		_ = e.conn.SetWriteDeadline(time.Now().Add(time.Second))
		_, _ = e.conn.Write([]byte("0\r\n\r\n"))
	}
	_ = e.conn.Close()
}
