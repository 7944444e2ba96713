package stream

import (
	"bytes"
	"context"
	"encoding/json"
	"time"

	"ray-service/internal/cache"
	"ray-service/internal/ray"
)

// Overview streams the overview of ns ("": everywhere) in the scopes the caller may see now
// (Rules.Overview, asked by the handler): OVERVIEW with figures(scopes) at once, then whenever it
// changes, at most once per pace.
func (e *Engine) Overview(rq Request, ns string, scopes map[*ray.Kind]cache.Scopes, pace time.Duration,
	figures func(map[*ray.Kind]cache.Scopes) any) error {
	return e.serve(rq, &overviewStream{e: e, ns: ns, token: rq.Token, scopes: scopes, figures: figures}, pace)
}

// overviewStream is the state of one overview stream: its rights, and the data it last sent.
type overviewStream struct {
	e       *Engine
	ns      string
	token   string
	w       *writer
	scopes  map[*ray.Kind]cache.Scopes
	figures func(map[*ray.Kind]cache.Scopes) any
	last    []byte
}

func (o *overviewStream) start(_ context.Context, w *writer) { o.w = w }
func (o *overviewStream) woken() <-chan struct{}             { return nil }
func (o *overviewStream) changed() <-chan struct{}           { return o.e.Store.Changed() }
func (o *overviewStream) stop()                              {}

// send sends OVERVIEW when the figures differ from those last sent; what changes within the pace
// that follows is in the next.
func (o *overviewStream) send() bool {
	data, err := json.Marshal(o.figures(o.scopes))
	if err != nil || bytes.Equal(data, o.last) {
		return false
	}
	o.w.raw(EventOverview, noID, data)
	o.last = data
	return true
}

// recheck moves the stream to the caller's rights now.
func (o *overviewStream) recheck(ctx context.Context) error {
	next, err := o.e.Rules.Overview(ctx, o.token, o.ns)
	if err == nil {
		o.scopes = next
	}
	return err
}
