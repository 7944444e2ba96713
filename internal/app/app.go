// Package app builds the service from its configuration and runs it: the clients, the watch cache,
// the features and their loops, the Lease, and the HTTP servers.
package app

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"ray-service/internal/api"
	"ray-service/internal/audit"
	"ray-service/internal/auth"
	"ray-service/internal/cache"
	"ray-service/internal/config"
	"ray-service/internal/dashboard"
	"ray-service/internal/dashproxy"
	"ray-service/internal/history"
	"ray-service/internal/idle"
	"ray-service/internal/k8s"
	"ray-service/internal/metrics"
	"ray-service/internal/notify"
	"ray-service/internal/promql"
	"ray-service/internal/queues"
	"ray-service/internal/ray"
	"ray-service/internal/signing"
	"ray-service/internal/stream"
	"ray-service/internal/usage"
)

// parts are what the features are wired from.
type parts struct {
	cfg       *config.Config
	log       *zap.Logger
	core      kubernetes.Interface
	kinds     *ray.Kinds
	templates *signing.Signer
	store     *cache.Store
	manager   *k8s.Manager
	// instance names this replica (its host name); leading tells whether it holds the Lease.
	instance string
	leading  func() bool
}

// Run runs the service as cfg says until ctx ends (the service is told to stop), then drains: not ready
// first, then no new requests, then the streams and the Lease given up.
func Run(ctx context.Context, cfg *config.Config) error {
	log, err := newLogger(cfg.LogLevel)
	if err != nil {
		return err
	}
	defer func() { _ = log.Sync() }()

	restCfg, err := restConfig(cfg.Kubeconfig)
	if err != nil {
		return err
	}
	core, err := kubernetes.NewForConfig(restCfg)
	if err != nil {
		return err
	}
	// The watch caches' clients wait out an apiserver that refuses connections (a restart) instead of
	// failing into their reflectors' growing backoff: the lists catch up as soon as it is back.
	watchCfg := rest.CopyConfig(restCfg)
	watchCfg.Dial = k8s.PatientDial(30*time.Second, 250*time.Millisecond)
	watchCore, err := kubernetes.NewForConfig(watchCfg)
	if err != nil {
		return err
	}
	dyn, err := dynamic.NewForConfig(watchCfg)
	if err != nil {
		return err
	}
	key, err := signingKey(cfg.TemplateKeyFile, cfg.TemplateKeySecret, core)
	if err != nil {
		return err
	}
	templates, err := signing.New(key)
	if err != nil {
		return err
	}
	auditKey, err := readAuditKey(cfg, core, key)
	if err != nil {
		return err
	}
	kinds := ray.NewKinds()
	store, err := cache.NewStore(dyn, watchCore, kinds, templates, cfg.ResyncPeriod)
	if err != nil {
		return err
	}
	clients, err := k8s.NewClientFactory(restCfg)
	if err != nil {
		return err
	}
	reviewer := auth.NewReviewer(clients.ReviewerFor, cfg.AuthCacheTTL, cfg.AuthCacheSize)
	dashboards := dashboard.NewDashboards(cfg.ClusterDomain, cfg.DashboardTimeout)
	dashboards.Log = log
	registry, httpMetrics := metrics.NewRegistry()
	// The RayCronJobs' series name each one (namespace and name), which only callers who may list them
	// see: they are served on the metrics address of its own alone, never on the API's, which answers
	// without a token.
	named := prometheus.NewRegistry()
	named.MustRegister(metrics.NewRunsCollector(store.EachRunState))
	named.MustRegister(metrics.NewHealthCollector(store.EachDegraded, store.EachIdle))
	metrics.RegisterSize(registry, "ray_service_auth_cache_entries", "Access review verdicts and user names cached.", reviewer.Len)
	registry.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "ray_service_watch_errors_total",
		Help: "Lists and watches of the Ray objects, their pods, their templates or their resource claims that failed: while they fail, the watch cache falls behind."},
		func() float64 { return float64(store.WatchErrors()) }))
	var resourceUse api.Usage // none without Prometheus
	var clusterHealth api.ClusterHealth
	var detector *idle.Detector // none without Prometheus
	var clusterUse usage.Use    // none without Prometheus
	if cfg.PrometheusURL != "" {
		querier, err := promql.NewQuerier(cfg.PrometheusURL, cfg.PrometheusTimeout, cfg.PrometheusCacheSize)
		if err != nil {
			return err
		}
		metrics.RegisterSize(registry, "ray_service_prometheus_cache_entries", "Answers of Prometheus cached for the overview.", querier.CacheLen)
		registerQueries(registry, querier)
		resourceUse, clusterHealth, clusterUse = querier, querier, querier
		if cfg.IdleWindow > 0 {
			detector = &idle.Detector{Work: idle.Queries{Prometheus: querier}, Clusters: store, Log: log, Settings: idle.Settings{Window: cfg.IdleWindow,
				Interval: cfg.IdleInterval, Step: idle.StepOf(cfg.IdleWindow), Lookback: 24 * time.Hour,
				CPUShare: cfg.IdleCPUShare, AcceleratorPercent: cfg.IdleAcceleratorPercent}}
		}
	}
	manager := &k8s.Manager{Clients: clients, Dashboards: dashboards, Cache: store, Templates: templates, Authz: reviewer,
		DeleteWait: cfg.DeleteWait}
	p := &parts{cfg: cfg, log: log, core: core, kinds: kinds, templates: templates, store: store, manager: manager}

	p.instance, _ = os.Hostname()
	// One replica acts for all (writes the history, credits the utilization, acts on idle policies,
	// delivers notifications): the holder of the Lease, whichever of those are on.
	elected, err := newLease(cfg, restCfg, p.instance, log)
	if err != nil {
		return err
	}
	registry.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "ray_service_leader",
		Help: "1 while this replica holds the Lease, and so acts for all."}, func() float64 {
		if elected.Leading() {
			return 1
		}
		return 0
	}))
	p.leading = elected.Leading
	var hist api.History // none without a history database
	var auditStore audit.Store
	var notices *notify.SQLStore // where notifications are kept: none without the service's database
	var utilization api.Utilization
	if cfg.HistoryDSN != "" {
		db, err := openDatabase(ctx, cfg.HistoryDSN)
		if err != nil {
			return err
		}
		defer func() { _ = db.Close() }()
		own, err := ownClientsOf(restCfg)
		if err != nil {
			return err
		}
		notices = notify.NewSQLStore(db)
		changes := func(ctx context.Context, cs []history.StatusChange) error {
			return notices.AddNotices(ctx, noticesOf(cs))
		}
		recorder, records := startHistory(ctx, p, db, own, registry, changes)
		accountant, figures, err := startUtilization(ctx, p, db, own, clusterUse)
		if err != nil {
			return err
		}
		defer func() { _ = figures.Close() }()
		elected.Add(recorder.Hooks())
		elected.Add(accountant.Hooks())
		store.SetObserver(cache.Observers{recorder, accountant})
		hist, auditStore, utilization = records, audit.NewSQLStore(db), figures
		if detector != nil {
			detector.Clusters = idleTo{Store: store, accounting: accountant}
		}
	}
	released := make(chan struct{})
	go func() {
		defer close(released)
		elected.Run(ctx)
	}()
	// The Lease is given up when the service is told to stop, so that another replica takes over at
	// once rather than when it expires: wait for that before exiting.
	defer func() {
		select {
		case <-released:
		case <-time.After(5 * time.Second):
		}
	}()
	// The optional kinds (RayCronJob) are served while the cluster has their CRD, and the fields a KubeRay
	// version added (a RayService's spec.suspend) used where the CRD declares them: asked now and every
	// 30 s, as KubeRay is upgraded or its feature gate turned on.
	checkCRDs := func(context.Context) {
		changed, err := store.CheckInstalled(core.Discovery())
		if err != nil {
			log.Warn("discovering the optional Ray kinds", zap.Error(err))
		}
		for k, installed := range changed {
			log.Info("an optional Ray kind's CRD", zap.String("kind", k.Kind), zap.Bool("installed", installed))
		}
		fields, err := store.CheckDeclared(core.Discovery())
		if err != nil {
			log.Warn("reading which fields the Ray CRDs declare", zap.Error(err))
		}
		for _, f := range fields {
			log.Info("a Ray CRD's field", zap.String("field", f), zap.Bool("declared", kinds.Declared().Has(f)))
		}
	}
	checkCRDs(ctx)
	store.Start(ctx)
	go wait.UntilWithContext(ctx, checkCRDs, cfg.CRDPollInterval)
	var bindings *auth.Bindings // where RoleBindings name callers: their reviews by class
	var rightsVersion func() uint64
	if !cfg.ReviewEveryNamespace {
		if bindings, err = auth.NewBindings(watchCore, cfg.ResyncPeriod); err != nil {
			return err
		}
		go bindings.Run(ctx)
		reviewer.UseBindings(bindings)
		rightsVersion = bindings.Version
	}

	// Streams (log follows, watches) end when the server stops serving, after the shutdown delay: a
	// client that reconnects then reaches another replica.
	serving, endStreams := context.WithCancel(context.Background())
	defer endStreams()
	events := cache.NewEventWatches(watchCore)
	// The trail writes one event per write made through the service and lists them for the audit
	// route: a client of its own, whose rate is not the default 5 a second shared with readiness.
	auditCfg := rest.CopyConfig(restCfg)
	auditCfg.QPS, auditCfg.Burst = 100, 200
	auditCore, err := kubernetes.NewForConfig(auditCfg)
	if err != nil {
		return err
	}
	trail := &audit.Trail{Key: auditKey, Store: auditStore, Events: auditCore.CoreV1(), Log: log, Instance: p.instance}
	defer trail.Wait() // the mirror events under way
	registry.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "ray_service_audit_reads_total",
		Help: "Pages of the audit trail read from its store."}, func() float64 { return float64(trail.Reads()) }))
	registry.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "ray_service_audit_append_failures_total",
		Help: "Writes the audit trail's store could not take (each is logged in full)."}, func() float64 { return float64(trail.Failures()) }))
	if auditStore != nil && cfg.AuditVerifyEvery > 0 {
		checker := &audit.Checker{Trail: trail, Every: cfg.AuditVerifyEvery, Log: log}
		go checker.Run(ctx)
		registry.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "ray_service_audit_chain_walk_failures_total",
			Help: "Walks of the audit trail's chain that failed: the store unreachable, or a row it cannot read (the chain is then unverified)."},
			func() float64 { return float64(checker.WalkFailures()) }))
		registry.MustRegister(metrics.NewChainCollector(func() (bool, bool, int64) {
			if v := checker.Last(); v != nil {
				return true, v.Intact, v.Entries
			}
			return false, false, 0
		}))
	}
	guard, err := newGuard(cfg)
	if err != nil {
		return err
	}
	var subscriptions api.Subscriptions
	var addNotice func(context.Context, notify.Notice) error
	if notices != nil {
		subscriptions = notices
		addNotice = deliverNotices(ctx, p, notices, guard, registry)
	}
	var idlePolicies func(string) (api.IdlePolicies, error)
	if detector != nil {
		idlePolicies = enforceIdlePolicies(ctx, p, detector, trail, auditCore.CoreV1(), addNotice)
	}
	draining := &drain{}
	ready := &lastReadiness{}
	registry.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "ray_service_ready",
		Help: "1 when the last readiness check (/readyz, as the kubelet asks it) passed, else 0."}, ready.value))
	detached := &stream.Detached{} // streams that hold their connection: the shutdown waits for them too
	// /metrics is served on the API's address unless it has an address of its own.
	var apiMetrics prometheus.Gatherer = registry
	if cfg.MetricsListen != "" {
		apiMetrics = nil
	} else {
		log.Info("the RayCronJobs' run series (ray_service_runs*) are served on metrics-listen alone: none is set")
	}
	deps := api.Deps{
		Kinds: kinds,
		Store: store,
		Queues: &queues.Lister{Dynamic: func(token string) (dynamic.Interface, error) {
			c, err := clients.ForToken(token)
			if err != nil {
				return nil, err
			}
			return c.Dynamic, nil
		}},
		Objects: func(k *ray.Kind, token string) (api.Objects, error) {
			return manager.For(k, token)
		},
		Dashboards: dashboards,
		Dashboard: dashproxy.Site{Origin: cfg.DashboardOrigin, Port: cfg.DashboardPort,
			SameOrigin: cfg.DashboardSameOrigin},
		Proxies:        dashproxy.NewLimit(cfg.MaxDashboardRequests, cfg.MaxDashboardRequestsPerCaller, cfg.MaxDashboardDuration),
		TrustedProxies: cfg.TrustedProxyPrefixes,
		Authz:          reviewer,
		RightsVersion:  rightsVersion,
		// A kept page reuses verdicts: no longer than they are kept.
		PageReuse:   min(api.MaxPageReuse, cfg.AuthCacheTTL),
		Log:         log,
		Gatherer:    apiMetrics,
		HTTP:        httpMetrics,
		Usage:       resourceUse,
		Health:      clusterHealth,
		Grafana:     api.Grafana{URL: cfg.GrafanaURL, DashboardUID: cfg.GrafanaDashboardUID},
		Shutdown:    serving,
		Follows:     stream.NewFollowLimit(cfg.MaxLogFollows, cfg.MaxLogFollowsPerCaller, cfg.MaxLogFollowDuration),
		Watches:     stream.NewWatchLimit(cfg.MaxWatches, cfg.MaxWatchesPerCaller, cfg.MaxWatchDuration),
		Streams:     stream.Options{Heartbeat: cfg.WatchHeartbeat, Reauthorize: cfg.AuthCacheTTL},
		Detached:    detached,
		WatchEvents: func(ns string) stream.NamespaceEvents { return events.Acquire(ns) },
		DetailEvents: func(ns string) (stream.NamespaceEvents, bool) {
			if hold, ok := events.Lingering(ns); ok {
				return hold, true
			}
			return nil, false
		},
		Audit:         trail,
		History:       hist,
		Subscriptions: subscriptions,
		Guard:         guard,
		IdlePolicies:  idlePolicies,
		Utilization:   utilization,
		Quotas:        k8s.Quotas{Core: core.CoreV1()},
		Ready:         ready.track(draining.ready(readiness(store, bindings, core.Discovery(), kinds))),
	}
	return serveUntilDone(ctx, cfg, log, deps, prometheus.Gatherers{registry, named}, restCfg.Host, draining, endStreams, detached)
}

// newGuard is the guard of the webhooks' addresses the configuration asks for.
func newGuard(cfg *config.Config) (*notify.Guard, error) {
	allow, err := notify.ParsePrefixes(cfg.NotifyAllowCIDRs)
	if err != nil {
		return nil, fmt.Errorf("notify-allow-cidrs: %w", err)
	}
	deny, err := notify.ParsePrefixes(cfg.NotifyDenyCIDRs)
	if err != nil {
		return nil, fmt.Errorf("notify-deny-cidrs: %w", err)
	}
	return &notify.Guard{Allow: allow, Deny: deny}, nil
}

func restConfig(kubeconfig string) (*rest.Config, error) {
	if kubeconfig == "" {
		return rest.InClusterConfig()
	}
	return clientcmd.BuildConfigFromFlags("", kubeconfig)
}

func newLogger(level string) (*zap.Logger, error) {
	lvl, err := zapcore.ParseLevel(level)
	if err != nil {
		return nil, err
	}
	c := zap.NewProductionConfig()
	c.Level = zap.NewAtomicLevelAt(lvl)
	c.EncoderConfig.TimeKey = "time"
	c.EncoderConfig.EncodeTime = zapcore.ISO8601TimeEncoder
	return c.Build()
}

// registerQueries counts the queries Prometheus answered and those it did not.
func registerQueries(registry prometheus.Registerer, q *promql.Querier) {
	for result, n := range map[string]func() int64{"answered": q.Answered, "failed": q.Failed} {
		registry.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "ray_service_prometheus_queries_total",
			Help:        "Queries asked of Prometheus, by result: answered, or failed (not reached, refused, timed out or an error).",
			ConstLabels: prometheus.Labels{"result": result}}, func() float64 { return float64(n()) }))
	}
}
