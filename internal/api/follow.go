package api

import (
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/gin-gonic/gin"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// FollowLimit bounds the log follows (or the watch streams) open at once, in all and per caller (per
// user name, whatever the token), and how long one lasts: each holds a connection, a goroutine and an
// apiserver stream.
type FollowLimit struct {
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
func NewFollowLimit(maxFollows, perCaller int, duration time.Duration) *FollowLimit {
	return &FollowLimit{noun: "log follows", max: maxFollows, perCaller: perCaller, duration: duration, byCaller: map[string]int{}}
}

// NewWatchLimit is the same bound for watch streams.
func NewWatchLimit(maxStreams, perCaller int, duration time.Duration) *FollowLimit {
	return &FollowLimit{noun: "watch streams", max: maxStreams, perCaller: perCaller, duration: duration, byCaller: map[string]int{}}
}

// NewProxyLimit is the same bound for the requests the Ray dashboard proxy holds open.
func NewProxyLimit(maxRequests, perCaller int, duration time.Duration) *FollowLimit {
	return &FollowLimit{noun: "Ray dashboard requests", max: maxRequests, perCaller: perCaller, duration: duration, byCaller: map[string]int{}}
}

// acquireFor takes a place of l for the caller of c, counted by its user name as the apiserver
// authenticates its token: a user who mints tokens holds no more places than with one.
func (s *Server) acquireFor(c *gin.Context, l *FollowLimit) (release func(), err error) {
	if l == nil {
		return func() {}, nil
	}
	user, err := s.Authz.UserName(c.Request.Context(), token(c))
	if err != nil {
		return nil, err
	}
	return l.acquire(user)
}

// acquire takes a place for caller (a user name), or says why there is none (429).
func (l *FollowLimit) acquire(caller string) (release func(), err error) {
	if l == nil {
		return func() {}, nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case l.max > 0 && l.total >= l.max:
		return nil, statusError(http.StatusTooManyRequests, metav1.StatusReasonTooManyRequests,
			fmt.Sprintf("%d %s are open, the most the service holds at once: try again later", l.total, l.noun))
	case l.perCaller > 0 && l.byCaller[caller] >= l.perCaller:
		return nil, statusError(http.StatusTooManyRequests, metav1.StatusReasonTooManyRequests,
			fmt.Sprintf("this caller has %d %s open, the most it may: close one first", l.byCaller[caller], l.noun))
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

// maxDuration is how long one follow may last, 0 for no bound.
func (l *FollowLimit) maxDuration() time.Duration {
	if l == nil {
		return 0
	}
	return l.duration
}
