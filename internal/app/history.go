package app

import (
	"context"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"ray-service/internal/audit"
	"ray-service/internal/cache"
	"ray-service/internal/history"
	"ray-service/internal/notify"
	"ray-service/internal/ray"
	"ray-service/internal/sqldb"
	"ray-service/internal/usage"
)

// idleTo hands the idle detection's judgement to the watch cache and to the utilization accounting.
type idleTo struct {
	*cache.Store
	accounting *usage.Accountant
}

func (t idleTo) SetIdle(idle map[ray.ClusterRef]*ray.Idle) {
	t.Store.SetIdle(idle)
	t.accounting.SetIdle(idle)
}

// ownClients are the service's own clients for what the replica holding the Lease reads: the listings
// that catch the history and the accounting up, and how objects ended.
type ownClients struct {
	core    kubernetes.Interface
	dynamic dynamic.Interface
}

func ownClientsOf(restCfg *rest.Config) (ownClients, error) {
	cfg := rest.CopyConfig(restCfg)
	cfg.QPS, cfg.Burst = 50, 100
	core, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return ownClients{}, err
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return ownClients{}, err
	}
	return ownClients{core: core, dynamic: dyn}, nil
}

// startHistory starts the history in db and its recorder, which writes while this replica holds the
// Lease (its hooks are the Lease's to add) and hands the changes of status that make notifications to
// changes.
func startHistory(ctx context.Context, p *parts, db *sqldb.DB, own ownClients, registry *prometheus.Registry,
	changes func(context.Context, []history.StatusChange) error) (*history.Recorder, *history.Store) {
	cfg, log := p.cfg, p.log
	hs := history.New(db)
	r := &history.Recorder{Store: hs, Kinds: p.kinds, Serves: p.store.Serves, Dynamic: own.dynamic, Core: own.core, Log: log, Signer: p.templates,
		Limits: ray.EndingLimits{Events: cfg.HistoryEndingEvents, LogLines: int64(cfg.HistoryEndingLogLines), LogBytes: cfg.HistoryEndingBytes},
		MaxAge: cfg.HistoryMaxAge, MaxPerNamespace: cfg.HistoryMaxPerNamespace, Changes: changes,
		NamespaceMaxBytes: cfg.HistoryNamespaceBytes, MaxBytes: cfg.HistoryBytes}
	registry.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "ray_service_history_leader",
		Help: "1 while this replica writes the history."}, func() float64 {
		if r.Leading() {
			return 1
		}
		return 0
	}))
	registry.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "ray_service_history_writes_total",
		Help: "Records this replica wrote into the history."}, func() float64 { return float64(r.Writes()) }))
	registry.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "ray_service_history_dropped_total",
		Help: "Changes of deleted objects a full write queue of the history dropped."}, func() float64 { return float64(r.Dropped()) }))
	registry.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "ray_service_history_write_failures_total",
		Help: "Writes of an object's changes into the history that failed (each is tried again a second later)."},
		func() float64 { return float64(r.Failures()) }))
	registry.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "ray_service_history_pending",
		Help: "Objects whose changes wait to be written into the history, besides those being written."},
		func() float64 { return float64(r.Pending()) }))
	r.Start(ctx)
	log.Info("history", zap.String("database", sqldb.Redact(cfg.HistoryDSN)))
	return r, hs
}

// startUtilization starts the utilization's figures in db and its accountant, which credits the Ray
// clusters while this replica holds the Lease (its hooks are the Lease's to add) and reads their use
// with use (nil: none is read).
func startUtilization(ctx context.Context, p *parts, db *sqldb.DB, own ownClients, use usage.Use) (*usage.Accountant, *usage.Store, error) {
	cfg := p.cfg
	octx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	figures, err := usage.NewStore(octx, db)
	if err != nil {
		return nil, nil, fmt.Errorf("opening the utilization's figures: %w", err)
	}
	a := &usage.Accountant{Store: figures, Kinds: p.kinds, Serves: p.store.Serves, Dynamic: own.dynamic, Log: p.log, Signer: p.templates, Value: p.store.Valued,
		Settings: usage.Settings{CreditEvery: cfg.UsageCreditEvery, Use: use, MeasureEvery: cfg.UsageMeasureEvery,
			MeasureStep: cfg.UsageMeasureStep, Retention: cfg.UsageRetention}}
	a.Start(ctx)
	return a, figures, nil
}

// openDatabase opens the service's database (history-dsn), where each stored feature keeps its tables,
// and brings it to the one schema their migrations make.
func openDatabase(ctx context.Context, dsn string) (*sqldb.DB, error) {
	schema, err := schema()
	if err != nil {
		return nil, err
	}
	octx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	db, err := sqldb.Open(octx, dsn, schema)
	if err != nil {
		return nil, fmt.Errorf("opening the history: %w", err)
	}
	return db, nil
}

// schema is the service's database schema: the migrations of every stored feature, in one numbering.
func schema() ([]sqldb.Migration, error) {
	return sqldb.Schema(history.Migrations(), audit.Migrations(), notify.Migrations(), usage.Migrations())
}
