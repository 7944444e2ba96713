package api

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/gin-gonic/gin"
	"go.uber.org/zap"
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
// its writer, the ticks of its heartbeat and of its rights check, its logger, and what closes it.
type stream struct {
	ctx               context.Context
	w                 *sseWriter
	heartbeat, reauth <-chan time.Time
	log               *zap.Logger
	// request lets go of the request's context: the stream's own ends with it until detach.
	request func() bool
	cancel  context.CancelFunc
	close   func()
}

// openStream takes a place among the watch streams for the caller (429 when there is none), bounds the
// stream's life (the limit's duration, the service's shutdown, the client leaving), lifts the server's
// deadlines and starts the answer.
func (s *Server) openStream(c *gin.Context) (*stream, error) {
	release, err := s.acquireFor(c, s.Watches)
	if err != nil {
		return nil, err
	}
	// The stream's context outlives the request's once the stream holds its connection (detach); until
	// then it ends with it.
	var cancel context.CancelFunc
	ctx := context.WithoutCancel(c.Request.Context())
	if d := s.Watches.maxDuration(); d > 0 {
		ctx, cancel = context.WithTimeout(ctx, d)
	} else {
		ctx, cancel = context.WithCancel(ctx)
	}
	request := context.AfterFunc(c.Request.Context(), cancel)
	stop := func() bool { return true }
	if s.Shutdown != nil {
		stop = context.AfterFunc(s.Shutdown, cancel)
	}
	liftDeadlines(c.Writer)
	opts := s.Streams.withDefaults()
	w := newSSEWriter(c, opts.WriteTimeout)
	w.line("retry: 3000")
	heartbeat, reauth := time.NewTicker(opts.Heartbeat), time.NewTicker(opts.Reauthorize)
	return &stream{ctx: ctx, w: w, heartbeat: heartbeat.C, reauth: reauth.C, log: logger(c), request: request, cancel: cancel,
		close: func() {
			heartbeat.Stop()
			reauth.Stop()
			request()
			stop()
			cancel()
			release()
			w.end()
		}}, nil
}

// detach has the stream hold its connection itself, on HTTP/1.1: the server's buffers and goroutine
// for the connection are let go, which is most of what an idle stream held. The client's leaving is
// then seen by a read of the connection, which returns when the client closes it (or sends anything,
// which a stream's client does not). It tells whether the stream was detached; if not, it goes on
// through the server as it began.
func (st *stream) detach(r *http.Request) bool {
	if !r.ProtoAtLeast(1, 1) || r.ProtoAtLeast(2, 0) {
		return false // HTTP/1.0 is not chunked; HTTP/2 streams share their connection
	}
	conn := st.w.detach()
	if conn == nil {
		return false
	}
	st.request()
	go func() {
		var b [1]byte
		_, _ = conn.Read(b[:])
		st.cancel()
	}()
	return true
}

// Detached counts the streams that hold their connection themselves (see stream.detach), and those
// about to. The HTTP server's Shutdown waits for the requests it serves, and a detached stream is no
// longer one: whoever shuts the service down waits for these too, so that each ends its answer before
// the process exits.
type Detached struct{ wg sync.WaitGroup }

// Wait waits until every detached stream has ended, or ctx is done.
func (d *Detached) Wait(ctx context.Context) error {
	done := make(chan struct{})
	go func() {
		d.wg.Wait()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("watch streams still ending: %w", ctx.Err())
	}
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

// A streamer is what makes one kind of watch stream: what it sends, and which rights it keeps
// checking. serveStream does the rest, the same for the list, object and overview streams.
type streamer interface {
	// start sends what the stream starts with, once the answer has begun; ctx ends with the stream.
	start(ctx context.Context, w *sseWriter)
	// send sends what changed since it was last called (at the first call, what the stream shows
	// first), and tells whether to go round again at once rather than wait for the next change.
	send() (again bool)
	// changed is closed at the next change of the store the stream follows: of its kind for a list
	// stream, any for the others. Taken before send reads.
	changed() <-chan struct{}
	// woken is closed at a change the stream follows besides the store's; nil when there is none.
	woken() <-chan struct{}
	// recheck checks the caller's rights again and makes what the stream shows follow them. An error
	// that says the caller may no longer see it (revoked) ends the stream; another one is logged and
	// the stream goes on as it was, to be checked again at the next tick.
	recheck(ctx context.Context) error
	// stop lets go of what the stream holds.
	stop()
}

// serveStream serves h as a watch stream: it takes a place among the streams (an error before the
// first byte, such as 429, is returned to be answered as any other), then sends what h sends whenever
// the store or h changes, at most once per pace where h asks to go round again (0: at once), a
// heartbeat comment when nothing happens, and checks the caller's rights at each Reauthorize tick,
// until the client leaves, the service shuts down or the stream's time is up.
func (s *Server) serveStream(c *gin.Context, h streamer, pace time.Duration) error {
	st, err := s.openStream(c)
	if err != nil {
		return err
	}
	detached := false
	if s.Detached != nil {
		// Counted before the answer begins, so that a shutdown that starts once the client has seen it
		// waits for it, detached or not.
		s.Detached.wg.Add(1)
		defer func() {
			if !detached {
				s.Detached.wg.Done()
			}
		}()
	}
	h.start(st.ctx, st.w)
	if s.Detached != nil && st.detach(c.Request) {
		// The answer has begun; the request is done for the server, and the stream goes on by itself.
		detached = true
		go func() {
			defer s.Detached.wg.Done()
			defer st.close()
			defer h.stop()
			defer func() { // what the server's recovery did for the stream before it was detached
				if v := recover(); v != nil {
					st.log.Error("panic in a watch stream", zap.Any("panic", v), zap.Stack("stack"))
				}
			}()
			s.follow(st, h, pace)
		}()
		return nil
	}
	defer st.close()
	defer h.stop()
	s.follow(st, h, pace)
	return nil
}

// follow sends what h sends until the stream ends (see serveStream).
func (s *Server) follow(st *stream, h streamer, pace time.Duration) {
	ctx, w := st.ctx, st.w
	for {
		// Taken before send reads, so that a change made meanwhile wakes the stream.
		changed, woken := h.changed(), h.woken()
		again := h.send()
		if err := w.flush(); err != nil {
			return
		}
		if again {
			if pace > 0 {
				select {
				case <-ctx.Done():
					return
				case <-time.After(pace):
				}
			}
			continue
		}
		select {
		case <-ctx.Done():
			return
		case <-changed:
		case <-woken:
		case <-st.heartbeat:
			w.line(": heartbeat")
		case <-st.reauth:
			switch err := h.recheck(ctx); {
			case revoked(err):
				s.endWith(w, err)
				return
			case err != nil:
				// The rights could not be checked (the apiserver is away): the stream goes on as it was
				// and tries again at the next tick.
				st.log.Warn("checking a watch stream's rights", zap.Error(err))
			}
		}
	}
}
