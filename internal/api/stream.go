package api

import (
	"context"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// StreamOptions shape every watch stream.
type StreamOptions struct {
	// Heartbeat is how often an idle stream sends a comment, so that proxies keep it open.
	Heartbeat time.Duration
	// Reauthorize is how often a stream checks its caller's rights again (the verdict cache's TTL).
	Reauthorize time.Duration
	// WriteTimeout is how long sending one batch of events may take before the stream is dropped.
	WriteTimeout time.Duration
}

func (o StreamOptions) withDefaults() StreamOptions {
	if o.Heartbeat <= 0 {
		o.Heartbeat = 15 * time.Second
	}
	if o.Reauthorize <= 0 {
		o.Reauthorize = 30 * time.Second
	}
	if o.WriteTimeout <= 0 {
		o.WriteTimeout = 10 * time.Second
	}
	return o
}

// stream is an open watch stream: its context (ended by the client, the shutdown or the time limit),
// its writer, the ticks of its heartbeat and of its rights check, and what closes it.
type stream struct {
	ctx               context.Context
	w                 *sseWriter
	heartbeat, reauth <-chan time.Time
	close             func()
}

// openStream takes a place among the watch streams for the caller (429 when there is none), bounds the
// stream's life (the limit's duration, the service's shutdown, the client leaving), lifts the server's
// deadlines and starts the answer.
func (s *Server) openStream(c *gin.Context) (*stream, error) {
	release, err := s.acquireFor(c, s.Watches)
	if err != nil {
		return nil, err
	}
	var cancel context.CancelFunc
	ctx := c.Request.Context()
	if d := s.Watches.maxDuration(); d > 0 {
		ctx, cancel = context.WithTimeout(ctx, d)
	} else {
		ctx, cancel = context.WithCancel(ctx)
	}
	stop := func() bool { return true }
	if s.Shutdown != nil {
		stop = context.AfterFunc(s.Shutdown, cancel)
	}
	liftDeadlines(c.Writer)
	opts := s.Streams.withDefaults()
	w := newSSEWriter(c, opts.WriteTimeout)
	w.line("retry: 3000")
	heartbeat, reauth := time.NewTicker(opts.Heartbeat), time.NewTicker(opts.Reauthorize)
	return &stream{ctx: ctx, w: w, heartbeat: heartbeat.C, reauth: reauth.C, close: func() {
		heartbeat.Stop()
		reauth.Stop()
		stop()
		cancel()
		release()
	}}, nil
}

// revoked tells whether err says the caller may no longer do what its stream shows.
func revoked(err error) bool { return apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err) }

// endWith sends err as the stream's last event.
func (s *Server) endWith(w *sseWriter, err error) {
	env, _ := errorEnvelope(err)
	w.event(EventError, noID, env)
	_ = w.flush()
}

// liftDeadlines clears the server's read and write deadlines of a streaming answer's connection.
func liftDeadlines(w http.ResponseWriter) {
	rc := http.NewResponseController(w)
	_ = rc.SetReadDeadline(time.Time{})
	_ = rc.SetWriteDeadline(time.Time{})
}
