package app

import (
	"context"
	"time"

	"ray-service/internal/auth"
	"ray-service/internal/history"
	"ray-service/internal/notify"
	"ray-service/internal/ray"
)

// deliverNotices starts the delivery of the notices kept in the service's database, which the Lease's
// holder alone sends (and prunes), and returns how a notice is added.
func deliverNotices(ctx context.Context, p *parts, notices *notify.SQLStore, guard *notify.Guard) func(context.Context, notify.Notice) error {
	// Each delivery is authorized as the subscription's creator, asked by the service's own identity.
	readKinds := map[string]auth.Attributes{}
	for _, k := range p.kinds.All() {
		readKinds[k.Kind] = auth.Attributes{Group: ray.RayGroupVersion.Group, Resource: k.Resource}
	}
	d := &notify.Deliverer{Store: notices, Sender: &notify.Sender{Client: guard.Client(p.cfg.NotifyTimeout), Source: "/ray-service"},
		Leading: p.leading, RetryFor: p.cfg.NotifyRetryFor, MaxBackoff: p.cfg.NotifyMaxBackoff, Poll: 2 * time.Second, Log: p.log,
		Access: auth.NewSubjects(p.core.AuthorizationV1().SubjectAccessReviews(), p.cfg.AuthCacheTTL), Kinds: readKinds,
		// A delivery log is kept as long as the history's records.
		Prune: notices.PruneNotices, KeepDeliveries: p.cfg.HistoryMaxAge}
	go d.Run(ctx)
	return func(ctx context.Context, n notify.Notice) error { return notices.AddNotices(ctx, []notify.Notice{n}) }
}

// noticesOf are the notifications the history's recorder hands on, as the outbox keeps them.
func noticesOf(changes []history.StatusChange) []notify.Notice {
	out := make([]notify.Notice, len(changes))
	for i, c := range changes {
		out[i] = notify.Notice{Type: c.Type, Kind: c.Kind, Namespace: c.Namespace, Name: c.Name, UID: c.UID, Time: c.Time,
			Labels: c.Labels, Data: c.Data}
	}
	return out
}
