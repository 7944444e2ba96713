// Package promql asks Prometheus what the service shows and decides on, through one Querier (a client
// with a cache of answers): the overview's and a cluster's utilization, the cluster health tab and the
// utilization accounting's use here, the idle detection's work in internal/idle through Instants and
// the shared helpers (shared.go). The service's own metrics are internal/metrics.
package promql

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	promapi "github.com/prometheus/client_golang/api"
	promv1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/common/model"
)

// Querier asks Prometheus the service's questions. A range query (the overview, a cluster's metrics and
// health tab) asked again at once shares the evaluation under way, which is cancelled once every caller
// waiting for it has gone; its answers are cached for a step, at most MaxCacheTTL, and at most maxCached of
// them. Instant queries (the idle detection, the accounting) are asked each time.
type Querier struct {
	api       promv1.API
	timeout   time.Duration
	maxCached int

	mu    sync.Mutex
	calls map[string]*evaluation
	cache map[string]cached

	// answered and failed count the queries Prometheus answered and those it did not (Answered, Failed).
	answered, failed atomic.Int64
}

// Answered is how many queries Prometheus answered.
func (q *Querier) Answered() int64 { return q.answered.Load() }

// Failed is how many queries got no answer from Prometheus: it was not reached, refused, did not answer
// within the timeout, or answered with an error. A query whose callers all went away counts as neither.
func (q *Querier) Failed() int64 { return q.failed.Load() }

// count counts a query's outcome.
func (q *Querier) count(err error) {
	switch {
	case err == nil:
		q.answered.Add(1)
	case !errors.Is(err, context.Canceled):
		q.failed.Add(1)
	}
}

// MaxCacheTTL bounds how long an answer of Prometheus is reused.
const MaxCacheTTL = time.Minute

// DefaultCacheSize bounds the answers cached where NewQuerier is given 0.
const DefaultCacheSize = 1024

// evaluation is one query under way, shared by the callers asking it.
type evaluation struct {
	done    chan struct{}
	matrix  model.Matrix
	err     error
	waiters int
	cancel  context.CancelFunc
}

type cached struct {
	matrix  model.Matrix
	expires time.Time
}

// NewQuerier returns a Querier for the Prometheus at url; each query may take at most timeout, and at
// most cacheSize answers are cached (0: DefaultCacheSize).
func NewQuerier(url string, timeout time.Duration, cacheSize int) (*Querier, error) {
	c, err := promapi.NewClient(promapi.Config{Address: url})
	if err != nil {
		return nil, err
	}
	if cacheSize <= 0 {
		cacheSize = DefaultCacheSize
	}
	return &Querier{api: promv1.NewAPI(c), timeout: timeout, maxCached: cacheSize,
		calls: map[string]*evaluation{}, cache: map[string]cached{}}, nil
}

// CacheLen is how many answers are cached.
func (q *Querier) CacheLen() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.cache)
}

// rangeQuery evaluates one query over the window, or takes the cached answer, or waits for the same
// question already under way. A caller that goes away stops waiting; the evaluation goes on only while
// some caller still waits for it.
func (q *Querier) rangeQuery(ctx context.Context, expr string, w Window) (model.Matrix, error) {
	key := fmt.Sprintf("%s|%d|%d|%d", expr, w.Start.Unix(), w.End.Unix(), w.Step/time.Second)
	q.mu.Lock()
	if c, ok := q.cache[key]; ok && time.Now().Before(c.expires) {
		q.mu.Unlock()
		return c.matrix, nil
	}
	ev, ok := q.calls[key]
	if !ok {
		qctx, cancel := context.WithTimeout(context.Background(), q.timeout)
		ev = &evaluation{done: make(chan struct{}), cancel: cancel}
		q.calls[key] = ev
		go q.evaluate(qctx, key, expr, w, ev)
	}
	ev.waiters++
	q.mu.Unlock()
	select {
	case <-ev.done:
		return ev.matrix, ev.err
	case <-ctx.Done():
		q.mu.Lock()
		if ev.waiters--; ev.waiters == 0 {
			ev.cancel()
			if q.calls[key] == ev {
				delete(q.calls, key)
			}
		}
		q.mu.Unlock()
		return nil, ctx.Err()
	}
}

// evaluate asks Prometheus, caches a good answer and hands it to the waiters.
func (q *Querier) evaluate(ctx context.Context, key, expr string, w Window, ev *evaluation) {
	defer ev.cancel()
	val, _, _, err := q.api.QueryRange(ctx, expr, promv1.Range{Start: w.Start, End: w.End, Step: w.Step})
	q.count(err)
	var m model.Matrix
	if err == nil {
		var ok bool
		if m, ok = val.(model.Matrix); !ok {
			err = fmt.Errorf("unexpected answer type %s", val.Type())
		}
	}
	q.mu.Lock()
	if q.calls[key] == ev {
		delete(q.calls, key)
	}
	if err == nil {
		q.putLocked(key, m, time.Now().Add(min(w.Step, MaxCacheTTL)))
	}
	q.mu.Unlock()
	ev.matrix, ev.err = m, err
	close(ev.done)
}

// putLocked caches an answer, making room first: stale answers go, and when the cache is full all the
// same, a tenth of it.
func (q *Querier) putLocked(key string, m model.Matrix, expires time.Time) {
	now := time.Now()
	for k, c := range q.cache {
		if !now.Before(c.expires) {
			delete(q.cache, k)
		}
	}
	if len(q.cache) >= q.maxCached {
		drop := len(q.cache) - q.maxCached*9/10
		for k := range q.cache {
			if drop <= 0 {
				break
			}
			delete(q.cache, k)
			drop--
		}
	}
	q.cache[key] = cached{matrix: m, expires: expires}
}

// Instants asks Prometheus the named instant queries at once, at the same time; an error is the first
// query's that failed, named after what asked (e.g. "idle detection, cpu: …").
func (q *Querier) Instants(ctx context.Context, what string, qs map[string]string, at time.Time) (map[string]model.Vector, error) {
	answers := map[string]model.Vector{}
	var mu sync.Mutex
	var firstErr error
	var wg sync.WaitGroup
	for name, expr := range qs {
		wg.Go(func() {
			v, err := q.Instant(ctx, expr, at)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				if firstErr == nil {
					firstErr = fmt.Errorf("%s, %s: %w", what, name, err)
				}
				return
			}
			answers[name] = v
		})
	}
	wg.Wait()
	if firstErr != nil {
		return nil, firstErr
	}
	return answers, nil
}

// Instant asks Prometheus one instant query, bounded by the querier's timeout.
func (q *Querier) Instant(ctx context.Context, expr string, at time.Time) (model.Vector, error) {
	ctx, cancel := context.WithTimeout(ctx, q.timeout)
	defer cancel()
	val, _, _, err := q.api.Query(ctx, expr, at, promv1.WithTimeout(q.timeout))
	q.count(err)
	if err != nil {
		return nil, err
	}
	v, ok := val.(model.Vector)
	if !ok {
		return nil, fmt.Errorf("unexpected answer type %s", val.Type())
	}
	return v, nil
}
