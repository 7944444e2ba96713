// Package stream is the engine of the watch streams: Server-Sent Events framing, resumption (event
// ids, the store's epochs), heartbeats, the re-checks of the caller's rights, and the bounds on
// long-held answers (Limit). The HTTP handlers parse a stream's request and hand it to an Engine.
package stream

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"time"

	"go.uber.org/zap"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"ray-service/internal/access"
	"ray-service/internal/auth"
	"ray-service/internal/cache"
	"ray-service/internal/ray"
)

// Store is the watch cache as the streams read it (cache.Store): the store's run, a channel closed at
// its next change, the visible items a query matches, in its order, and the number of the last change,
// and what changed since a number.
type Store interface {
	Epoch() string
	Changed() <-chan struct{}
	// KindChanged is closed at the next change of what a kind publishes, which its list streams follow.
	KindChanged(k *ray.Kind) <-chan struct{}
	Matching(k *ray.Kind, sc cache.Scopes, q *cache.Query) ([]*cache.Item, uint64)
	Since(k *ray.Kind, seq uint64, before, now cache.Scopes) ([]cache.Change, uint64, error)
	// Published is the item of one object (its instance, else its template), nil without one.
	Published(k *ray.Kind, ns, name string) *cache.Item
	// CachedPods describes the cached Ray pods of an object's clusters.
	CachedPods(k *ray.Kind, s *ray.Summary) []ray.PodInfo
}

// Authorizer answers who a caller is and whether it may do something (auth.Reviewer).
type Authorizer interface {
	Allowed(ctx context.Context, token string, a auth.Attributes) (bool, error)
	UserName(ctx context.Context, token string) (string, error)
}

// Rules are the rules of what a caller may see (access.Rules), asked again at each check of its rights.
type Rules interface {
	Visible(ctx context.Context, tok string, k *ray.Kind, ns string, templates bool) (cache.Scopes, error)
	Overview(ctx context.Context, tok, ns string) (map[*ray.Kind]cache.Scopes, error)
	Ask(ctx context.Context, token string, k *ray.Kind) *access.Asked
}

// NamespaceEvents is one stream's hold on the Kubernetes events of a namespace (cache.NamespaceEvents).
type NamespaceEvents interface {
	// Changed returns a channel closed at the next event added or updated.
	Changed() <-chan struct{}
	// Synced tells whether the namespace's events have been read once.
	Synced() bool
	// Of returns the events of an object, its clusters, the named pods and its submitter, newest first.
	Of(k *ray.Kind, s *ray.Summary, pods []string) []ray.EventInfo
	Release()
}

// Engine serves the watch streams.
type Engine struct {
	Store Store
	Authz Authorizer
	Rules Rules
	// Events holds the Kubernetes events of a namespace for object streams; nil: they send none.
	// RecentEvents is how many of an object's events its stream sends first.
	Events       func(ns string) NamespaceEvents
	RecentEvents int
	// Limit bounds the streams open at once and how long each lasts; nil: no bound. Options shape them.
	Limit   *Limit
	Options Options
	// Detached, when set, lets HTTP/1.1 streams hold their connection themselves once started, and
	// counts them for the shutdown to wait on; nil: they stay with the server.
	Detached *Detached
	// Shutdown is done when the service shuts down; it ends the streams.
	Shutdown context.Context
	// Envelope is the data of the ERROR event that ends a stream with an error: the body an answer of
	// that error has.
	Envelope func(err error) any
}

// Request is the request a stream answers: where it writes, what was asked, the caller's token, and
// the request's logger.
type Request struct {
	W     http.ResponseWriter
	R     *http.Request
	Token string
	Log   *zap.Logger
}

// Options shape every watch stream.
type Options struct {
	// Heartbeat is how often an idle stream sends a comment, so that proxies keep it open.
	Heartbeat time.Duration
	// Reauthorize is how often a stream checks its caller's rights again (the verdict cache's TTL).
	Reauthorize time.Duration
	// WriteTimeout is how long sending one batch of events may take before the stream is dropped.
	WriteTimeout time.Duration
}

func (o Options) withDefaults() Options {
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
	w                 *writer
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
func (e *Engine) openStream(rq Request) (*stream, error) {
	release, err := e.Limit.AcquireFor(rq.R.Context(), e.Authz, rq.Token)
	if err != nil {
		return nil, err
	}
	// The stream's context outlives the request's once the stream holds its connection (detach); until
	// then it ends with it.
	var cancel context.CancelFunc
	ctx := context.WithoutCancel(rq.R.Context())
	if d := e.Limit.MaxDuration(); d > 0 {
		ctx, cancel = context.WithTimeout(ctx, d)
	} else {
		ctx, cancel = context.WithCancel(ctx)
	}
	request := context.AfterFunc(rq.R.Context(), cancel)
	stop := func() bool { return true }
	if e.Shutdown != nil {
		stop = context.AfterFunc(e.Shutdown, cancel)
	}
	LiftDeadlines(rq.W)
	opts := e.Options.withDefaults()
	w := newWriter(rq.W, opts.WriteTimeout)
	w.line("retry: 3000")
	heartbeat, reauth := time.NewTicker(opts.Heartbeat), time.NewTicker(opts.Reauthorize)
	return &stream{ctx: ctx, w: w, heartbeat: heartbeat.C, reauth: reauth.C, log: rq.Log, request: request, cancel: cancel,
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
func (e *Engine) endWith(w *writer, err error) {
	w.event(EventError, noID, e.Envelope(err))
	_ = w.flush()
}

// LiftDeadlines clears the server's read and write deadlines of a streaming answer's connection.
func LiftDeadlines(w http.ResponseWriter) {
	rc := http.NewResponseController(w)
	_ = rc.SetReadDeadline(time.Time{})
	_ = rc.SetWriteDeadline(time.Time{})
}

// A streamer is what makes one kind of watch stream: what it sends, and which rights it keeps
// checking. serve does the rest, the same for the list, object and overview streams.
type streamer interface {
	// start sends what the stream starts with, once the answer has begun; ctx ends with the stream.
	start(ctx context.Context, w *writer)
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

// serve serves h as a watch stream: it takes a place among the streams (an error before the
// first byte, such as 429, is returned to be answered as any other), then sends what h sends whenever
// the store or h changes, at most once per pace where h asks to go round again (0: at once), a
// heartbeat comment when nothing happens, and checks the caller's rights at each Reauthorize tick,
// until the client leaves, the service shuts down or the stream's time is up.
func (e *Engine) serve(rq Request, h streamer, pace time.Duration) error {
	st, err := e.openStream(rq)
	if err != nil {
		return err
	}
	detached := false
	if e.Detached != nil {
		// Counted before the answer begins, so that a shutdown that starts once the client has seen it
		// waits for it, detached or not.
		e.Detached.wg.Add(1)
		defer func() {
			if !detached {
				e.Detached.wg.Done()
			}
		}()
	}
	h.start(st.ctx, st.w)
	if e.Detached != nil && st.detach(rq.R) {
		// The answer has begun; the request is done for the server, and the stream goes on by itself.
		detached = true
		go func() {
			defer e.Detached.wg.Done()
			defer st.close()
			defer h.stop()
			defer func() { // what the server's recovery did for the stream before it was detached
				if v := recover(); v != nil {
					st.log.Error("panic in a watch stream", zap.Any("panic", v), zap.Stack("stack"))
				}
			}()
			e.follow(st, h, pace)
		}()
		return nil
	}
	defer st.close()
	defer h.stop()
	e.follow(st, h, pace)
	return nil
}

// follow sends what h sends until the stream ends (see serve).
func (e *Engine) follow(st *stream, h streamer, pace time.Duration) {
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
				e.endWith(w, err)
				return
			case err != nil:
				// The rights could not be checked (the apiserver is away): the stream goes on as it was
				// and tries again at the next tick.
				st.log.Warn("checking a watch stream's rights", zap.Error(err))
			}
		}
	}
}
