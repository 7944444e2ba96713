package app

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"ray-service/internal/auth"
	"ray-service/internal/history"
	"ray-service/internal/notify"
	"ray-service/internal/ray"
)

// deliverNotices starts the delivery of the notices kept in the service's database, which the Lease's
// holder alone sends (and prunes), and returns how a notice is added.
func deliverNotices(ctx context.Context, p *parts, notices *notify.SQLStore, guard *notify.Guard,
	registry prometheus.Registerer) func(context.Context, notify.Notice) error {
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
	registry.MustRegister(
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "ray_service_notifications_delivered_total",
			Help: "Notices this replica delivered to their webhooks."}, func() float64 { return float64(d.Delivered()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "ray_service_notification_tries_failed_total",
			Help: "Tries to deliver a notice that failed: the webhook refused or was not reached, answered with an error, " +
				"or the subscription's creator may no longer read the object (each retried until notify-retry-for)."},
			func() float64 { return float64(d.FailedTries()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "ray_service_notifications_given_up_total",
			Help: "Notices this replica gave up: tried for notify-retry-for, refused, or no longer allowed."},
			func() float64 { return float64(d.GivenUp()) }))
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
