package stream

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Limit bounds the long-held answers of one sort (log follows, watch streams, proxied dashboard
// requests) open at once, in all and per caller (per user name, whatever the token), and how long one
// lasts: each holds a connection, a goroutine and often an apiserver stream.
type Limit struct {
	// noun names what is bounded, in messages.
	noun           string
	max, perCaller int
	duration       time.Duration

	mu       sync.Mutex
	total    int
	byCaller map[string]int
}

// NewFollowLimit returns a limit of max follows in all and perCaller for each caller, each lasting at
// most duration. Zero or less means no bound for that figure.
func NewFollowLimit(maxFollows, perCaller int, duration time.Duration) *Limit {
	return NewLimit("log follows", maxFollows, perCaller, duration)
}

// NewWatchLimit is the same bound for watch streams.
func NewWatchLimit(maxStreams, perCaller int, duration time.Duration) *Limit {
	return NewLimit("watch streams", maxStreams, perCaller, duration)
}

// NewLimit is the same bound for what noun names (in messages).
func NewLimit(noun string, maxOpen, perCaller int, duration time.Duration) *Limit {
	return &Limit{noun: noun, max: maxOpen, perCaller: perCaller, duration: duration, byCaller: map[string]int{}}
}

// Users names the caller of a token as the apiserver authenticates it (auth.Reviewer).
type Users interface {
	UserName(ctx context.Context, token string) (string, error)
}

// AcquireFor takes a place of l for the caller holding token, counted by its user name as the
// apiserver authenticates it: a user who mints tokens holds no more places than with one.
func (l *Limit) AcquireFor(ctx context.Context, users Users, token string) (release func(), err error) {
	if l == nil {
		return func() {}, nil
	}
	user, err := users.UserName(ctx, token)
	if err != nil {
		return nil, err
	}
	return l.acquire(user)
}

// acquire takes a place for caller (a user name), or says why there is none (429).
func (l *Limit) acquire(caller string) (release func(), err error) {
	if l == nil {
		return func() {}, nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case l.max > 0 && l.total >= l.max:
		return nil, tooMany(fmt.Sprintf("%d %s are open, the most the service holds at once: try again later", l.total, l.noun))
	case l.perCaller > 0 && l.byCaller[caller] >= l.perCaller:
		return nil, tooMany(fmt.Sprintf("this caller has %d %s open, the most it may: close one first", l.byCaller[caller], l.noun))
	}
	l.total++
	l.byCaller[caller]++
	var once sync.Once
	return func() {
		once.Do(func() {
			l.mu.Lock()
			defer l.mu.Unlock()
			l.total--
			if l.byCaller[caller]--; l.byCaller[caller] <= 0 {
				delete(l.byCaller, caller)
			}
		})
	}, nil
}

// MaxDuration is how long one follow may last, 0 for no bound.
func (l *Limit) MaxDuration() time.Duration {
	if l == nil {
		return 0
	}
	return l.duration
}

// tooMany is the error of a place refused: a Kubernetes status error, as the API maps every error.
func tooMany(msg string) error {
	return &apierrors.StatusError{ErrStatus: metav1.Status{
		Status: metav1.StatusFailure, Code: http.StatusTooManyRequests, Reason: metav1.StatusReasonTooManyRequests, Message: msg,
	}}
}
