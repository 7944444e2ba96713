package writes

import (
	"context"
	"sync"

	"k8s.io/apimachinery/pkg/types"

	"ray-service/internal/audit"
)

// Caller is who makes the writes of one request, as the apiserver names the holder of its token. It is
// asked at most once, at its first use: the creator stamped on what a create makes and the user the
// audit trail records are one answer, whichever of the two asks first. A request that records nothing
// and creates nothing never asks.
type Caller struct {
	ask  func(ctx context.Context) (string, error)
	once sync.Once
	name string
	err  error
}

// NewCaller returns the caller that ask names (auth.Reviewer.UserName with the request's token).
func NewCaller(ask func(ctx context.Context) (string, error)) *Caller {
	return &Caller{ask: ask}
}

// Name is the caller's user name, or why it is not known.
func (c *Caller) Name(ctx context.Context) (string, error) {
	c.once.Do(func() { c.name, c.err = c.ask(ctx) })
	return c.name, c.err
}

// Trail is where writes are recorded (audit.Trail). Record appends a write to the trail's store before it
// returns, so that no write the service answered for is missing from the trail; it never fails the write.
type Trail interface {
	Record(ctx context.Context, w audit.Write)
}

// Audit is the audit hook of one request: the trail, who writes, and the request's id.
type Audit struct {
	// Trail is nil when writes are not recorded.
	Trail     Trail
	Caller    *Caller
	RequestID string
}

// Record records a write that succeeded of anything the service writes, named by its kind: a Ray kind,
// or a Subscription or an IdlePolicy. A write whose caller cannot be named is recorded as made by
// "unknown (why)": it happened, and the trail holds it.
func (a Audit) Record(ctx context.Context, action, kind, ns, name string, uid types.UID, detail string) {
	if a.Trail == nil {
		return
	}
	user, err := a.Caller.Name(ctx)
	if err != nil {
		user = "unknown (" + err.Error() + ")"
	}
	a.Trail.Record(ctx, audit.Write{Action: action, Kind: kind, Namespace: ns, Name: name, UID: uid, User: user,
		RequestID: a.RequestID, Detail: detail})
}
