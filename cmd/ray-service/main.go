// Command ray-service serves the ray-service REST API: it manages KubeRay's RayCluster, RayJob and
// RayService on Kubernetes for the openFuyao platform.
//
//	@title						ray-service API
//	@version					1.0
//	@description				Manages Ray on Kubernetes (KubeRay ray.io/v1) for openFuyao. Every JSON response is an
//	@description				envelope {code, msg, data} whose code is the HTTP status; errors add reason and details.
//	@BasePath					/
//	@securityDefinitions.apikey	Bearer
//	@in							header
//	@name						Authorization
//	@description				"Bearer <token>" (X-OpenFuyao-Authorization is read first when present)
package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"os/signal"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/leaderelection/resourcelock"

	"ray-service/internal/api"
	"ray-service/internal/audit"
	"ray-service/internal/auth"
	"ray-service/internal/cache"
	"ray-service/internal/certs"
	"ray-service/internal/config"
	"ray-service/internal/dashboard"
	"ray-service/internal/dashproxy"
	"ray-service/internal/history"
	"ray-service/internal/idle"
	"ray-service/internal/k8s"
	"ray-service/internal/keys"
	"ray-service/internal/metrics"
	"ray-service/internal/notify"
	"ray-service/internal/queues"
	"ray-service/internal/ray"
	"ray-service/internal/stream"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "ray-service:", err)
		os.Exit(1)
	}
}

func run() error {
	cfg, err := config.Load(os.Args[1:])
	if err != nil {
		return err
	}
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
	templates, err := ray.NewTemplateSigner(key)
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
	metrics.RegisterSize(registry, "ray_service_auth_cache_entries", "Access review verdicts and user names cached.", reviewer.Len)
	var usage api.Usage // none without Prometheus
	var clusterHealth api.ClusterHealth
	var detector *idle.Detector // none without Prometheus
	var clusterUse history.Use  // none without Prometheus
	if cfg.PrometheusURL != "" {
		querier, err := metrics.NewQuerier(cfg.PrometheusURL, cfg.PrometheusTimeout, cfg.PrometheusCacheSize)
		if err != nil {
			return err
		}
		metrics.RegisterSize(registry, "ray_service_prometheus_cache_entries", "Answers of Prometheus cached for the overview.", querier.CacheLen)
		usage, clusterHealth, clusterUse = querier, querier, querier
		if cfg.IdleWindow > 0 {
			detector = &idle.Detector{Work: querier, Clusters: store, Log: log, Settings: idle.Settings{Window: cfg.IdleWindow,
				Interval: cfg.IdleInterval, Step: idle.StepOf(cfg.IdleWindow), Lookback: 24 * time.Hour,
				CPUShare: cfg.IdleCPUShare, AcceleratorPercent: cfg.IdleAcceleratorPercent}}
		}
	}
	manager := &k8s.Manager{Clients: clients, Dashboards: dashboards, Cache: store, Templates: templates, Authz: reviewer,
		DeleteWait: 30 * time.Second}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	defer stop()
	instance, _ := os.Hostname()
	var hist api.History // none without a history database
	var auditStore audit.Store
	var notices *history.Store // where notifications are kept: none without a history database
	var leading func() bool    // whether this replica writes the history, and so acts for all
	var utilization api.Utilization
	if cfg.HistoryDSN != "" {
		recorder, store2, released, err := startHistory(ctx, cfg, restCfg, kinds, templates, store.Serves, log, instance, registry, clusterUse)
		if err != nil {
			return err
		}
		defer func() { _ = store2.Close() }()
		// The Lease is given up when the service is told to stop, so that another replica takes over at
		// once rather than when it expires: wait for that before exiting.
		defer func() {
			select {
			case <-released:
			case <-time.After(5 * time.Second):
			}
		}()
		store.SetObserver(recorder)
		hist, auditStore = store2, store2.Audit()
		notices, leading, utilization = store2, recorder.Leading, store2
		if detector != nil {
			detector.Clusters = idleTo{Store: store, accounting: recorder}
		}
	}
	// The optional kinds (RayCronJob) are served while the cluster has their CRD: asked now and every
	// 30 s, as KubeRay is upgraded or its feature gate turned on.
	checkCRDs := func(context.Context) {
		changed, err := store.CheckInstalled(core.Discovery())
		if err != nil {
			log.Warn("discovering the optional Ray kinds", zap.Error(err))
		}
		for k, installed := range changed {
			log.Info("an optional Ray kind's CRD", zap.String("kind", k.Kind), zap.Bool("installed", installed))
		}
	}
	checkCRDs(ctx)
	store.Start(ctx)
	go wait.UntilWithContext(ctx, checkCRDs, 30*time.Second)
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
	trail := &audit.Trail{Key: auditKey, Store: auditStore, Events: auditCore.CoreV1(), Log: log, Instance: instance}
	defer trail.Wait() // the mirror events under way
	registry.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "ray_service_audit_reads_total",
		Help: "Pages of the audit trail read from its store."}, func() float64 { return float64(trail.Reads()) }))
	registry.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "ray_service_audit_append_failures_total",
		Help: "Writes the audit trail's store could not take (each is logged in full)."}, func() float64 { return float64(trail.Failures()) }))
	guard, err := newGuard(cfg)
	if err != nil {
		return err
	}
	var subscriptions api.Subscriptions
	var addNotice func(context.Context, notify.Notice) error
	if notices != nil {
		subscriptions = notices
		addNotice = func(ctx context.Context, n notify.Notice) error { return notices.AddNotices(ctx, []notify.Notice{n}) }
		// Each delivery is authorized as the subscription's creator, asked by the service's own identity.
		readKinds := map[string]auth.Attributes{}
		for _, k := range kinds.All() {
			readKinds[k.Kind] = auth.Attributes{Group: ray.RayGroupVersion.Group, Resource: k.Resource}
		}
		d := &notify.Deliverer{Store: notices, Sender: &notify.Sender{Client: guard.Client(cfg.NotifyTimeout), Source: "/ray-service"},
			Leading: leading, RetryFor: cfg.NotifyRetryFor, MaxBackoff: cfg.NotifyMaxBackoff, Poll: 2 * time.Second, Log: log,
			Access: auth.NewSubjects(core.AuthorizationV1().SubjectAccessReviews(), cfg.AuthCacheTTL), Kinds: readKinds}
		go d.Run(ctx)
	}
	var idlePolicies func(string) (api.IdlePolicies, error)
	if detector != nil {
		policy := &idle.Policy{Warning: cfg.IdleStopWarning, Leading: leading, Log: log}
		enforcer := &idle.Enforcer{Audit: trail.Record, Events: auditCore.CoreV1(), Notify: addNotice, Instance: instance, Log: log}
		if cfg.IdleStopIdentity != "" {
			ns, name, _ := strings.Cut(cfg.IdleStopIdentity, "/")
			identity := &k8s.TokenSource{Accounts: core.CoreV1(), Namespace: ns, Name: name}
			enforcer.Identity = identity.User()
			enforcer.StopCluster = func(ctx context.Context, ns, name string) (types.UID, error) {
				tok, err := identity.Token(ctx)
				if err != nil {
					return "", fmt.Errorf("a token of %s: %w", identity.User(), err)
				}
				objs, err := manager.For(kinds.Cluster(), tok)
				if err != nil {
					return "", err
				}
				cur, err := objs.Stop(ctx, ns, name)
				if err != nil {
					return "", err
				}
				if cur.Instance != nil {
					return cur.Instance.GetUID(), nil
				}
				return "", nil
			}
			storeNS, storeName, _ := strings.Cut(cfg.IdlePolicyStore, "/")
			if cfg.IdlePolicyStore == "" {
				storeNS, storeName = serviceNamespace(), "ray-service-idle-policies"
			}
			manager.PolicyGenerations = &k8s.PolicyGenerations{ConfigMaps: core.CoreV1().ConfigMaps(storeNS), Name: storeName}
			log.Info("idle policies", zap.String("generations", storeNS+"/"+storeName))
			policy.Stopping = true
			policy.Namespaces = func(ctx context.Context, ns string) (*idle.NamespacePolicy, error) {
				p, err := k8s.ReadIdlePolicy(ctx, core.CoreV1(), templates, manager.PolicyGenerations, ns)
				if p == nil || err != nil {
					return nil, err
				}
				after, err := ray.ParseIdleStopAfter(p.StopAfter)
				if err != nil {
					return nil, err
				}
				return &idle.NamespacePolicy{StopAfter: after, Name: p.Name()}, nil
			}
			idlePolicies = func(tok string) (api.IdlePolicies, error) { return manager.IdlePolicies(tok) }
		}
		policy.Enforce = enforcer
		detector.Policy = policy
		go func() {
			if store.WaitForSync(ctx) {
				detector.Run(ctx)
			}
		}()
	}
	draining := &drain{}
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
		Usage:       usage,
		Health:      clusterHealth,
		Grafana:     api.Grafana{URL: cfg.GrafanaURL, DashboardUID: cfg.GrafanaDashboardUID},
		Shutdown:    serving,
		Follows:     stream.NewFollowLimit(cfg.MaxLogFollows, cfg.MaxLogFollowsPerCaller, cfg.MaxLogFollowDuration),
		Watches:     stream.NewWatchLimit(cfg.MaxWatches, cfg.MaxWatchesPerCaller, cfg.MaxWatchDuration),
		Streams:     stream.Options{Heartbeat: cfg.WatchHeartbeat, Reauthorize: cfg.AuthCacheTTL},
		Detached:    detached,
		WatchEvents: func(ns string) stream.NamespaceEvents { return events.Acquire(ns) },
		DetailEvents: func(ns string) (api.NamespaceEvents, bool) {
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
		Ready:         draining.ready(readiness(store, bindings, core.Discovery(), kinds)),
	}
	srv := &http.Server{Addr: cfg.Listen, Handler: api.NewRouter(deps), ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout: cfg.ReadTimeout, WriteTimeout: cfg.WriteTimeout, IdleTimeout: cfg.IdleTimeout,
		// The request line and headers together; past it the server answers 431.
		MaxHeaderBytes: api.MaxHeaderBytes}
	// The Ray dashboards on an origin of their own: the same server but for its address and handler.
	var dashSrv *http.Server
	if cfg.DashboardListen != "" {
		dashSrv = &http.Server{Addr: cfg.DashboardListen, Handler: api.NewDashboardRouter(deps), ReadHeaderTimeout: 10 * time.Second,
			ReadTimeout: cfg.ReadTimeout, WriteTimeout: cfg.WriteTimeout, IdleTimeout: cfg.IdleTimeout, MaxHeaderBytes: api.MaxHeaderBytes}
	}

	if cfg.PprofListen != "" {
		go servePprof(cfg.PprofListen, log)
	}
	errc := make(chan error, 3)
	if cfg.MetricsListen != "" {
		msrv := &http.Server{Addr: cfg.MetricsListen, Handler: promhttp.HandlerFor(prometheus.Gatherers{registry, named}, promhttp.HandlerOpts{}),
			ReadHeaderTimeout: 10 * time.Second, ReadTimeout: cfg.ReadTimeout, WriteTimeout: cfg.WriteTimeout}
		defer func() { _ = msrv.Close() }()
		mln, err := listen(msrv)
		if err != nil {
			return err
		}
		go func() {
			log.Info("metrics listening", zap.String("address", cfg.MetricsListen))
			if err := msrv.Serve(mln); !errors.Is(err, http.ErrServerClosed) {
				errc <- fmt.Errorf("metrics server: %w", err)
			}
		}()
	}
	if cfg.TLSCertFile != "" {
		reloader, err := certs.New(cfg.TLSCertFile, cfg.TLSKeyFile, func(err error) {
			log.Error("reading the renewed serving certificate; the one before is still served", zap.Error(err))
		})
		if err != nil {
			return err
		}
		srv.TLSConfig = reloader.TLSConfig()
	}
	// Every address is taken before any is served: a port that is not free ends the start at once,
	// before the API answers ready, rather than a listener failing beside one that serves.
	ln, err := listen(srv)
	if err != nil {
		return err
	}
	var dashLn net.Listener
	if dashSrv != nil {
		dashSrv.TLSConfig = srv.TLSConfig
		if dashLn, err = listen(dashSrv); err != nil {
			_ = ln.Close()
			return err
		}
	}
	go func() {
		log.Info("listening", zap.String("address", cfg.Listen), zap.Bool("tls", srv.TLSConfig != nil), zap.String("apiserver", restCfg.Host))
		errc <- serve(srv, ln)
	}()
	if dashSrv != nil {
		go func() {
			log.Info("Ray dashboards listening", zap.String("address", cfg.DashboardListen), zap.String("origin", cfg.DashboardOrigin))
			errc <- serve(dashSrv, dashLn)
		}()
	}
	select {
	case err := <-errc:
		if !errors.Is(err, http.ErrServerClosed) {
			return err
		}
	case <-ctx.Done():
	}
	// Not ready first, still serving, so that load balancers stop sending; then stop accepting and let
	// what is in flight finish.
	draining.start()
	log.Info("shutting down", zap.Duration("delay", cfg.ShutdownDelay), zap.Duration("timeout", cfg.ShutdownTimeout))
	select {
	case <-time.After(cfg.ShutdownDelay):
	case err := <-errc:
		return err
	}
	endStreams()
	sctx, cancel := context.WithTimeout(context.Background(), cfg.ShutdownTimeout)
	defer cancel()
	dashDone := make(chan error, 1)
	go func() {
		if dashSrv == nil {
			dashDone <- nil
			return
		}
		dashDone <- dashSrv.Shutdown(sctx)
	}()
	if err := srv.Shutdown(sctx); err != nil {
		return err
	}
	if err := <-dashDone; err != nil {
		return err
	}
	return detached.Wait(sctx)
}

// listen takes srv's address.
func listen(srv *http.Server) (net.Listener, error) {
	ln, err := net.Listen("tcp", srv.Addr)
	if err != nil {
		return nil, fmt.Errorf("listening on %s: %w", srv.Addr, err)
	}
	return ln, nil
}

// serve serves srv on ln, with TLS where it has a configuration for it.
func serve(srv *http.Server, ln net.Listener) error {
	if srv.TLSConfig != nil {
		return srv.ServeTLS(ln, "", "")
	}
	return srv.Serve(ln)
}

// idleTo hands the idle detection's judgement to the watch cache and to the utilization accounting.
type idleTo struct {
	*cache.Store
	accounting *history.Recorder
}

func (t idleTo) SetIdle(idle map[cache.ClusterRef]*ray.Idle) {
	t.Store.SetIdle(idle)
	t.accounting.SetIdle(idle)
}

// startHistory opens the history database and starts its recorder, which writes while this replica
// holds the history's Lease.
func startHistory(ctx context.Context, cfg *config.Config, restCfg *rest.Config, kinds *ray.Kinds, signer *ray.TemplateSigner,
	serves func(*ray.Kind) bool, log *zap.Logger,
	instance string, registry *prometheus.Registry, use history.Use) (*history.Recorder, *history.Store, <-chan struct{}, error) {
	octx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	hs, err := history.Open(octx, cfg.HistoryDSN)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("opening the history: %w", err)
	}
	ownCfg := rest.CopyConfig(restCfg)
	ownCfg.QPS, ownCfg.Burst = 50, 100
	core, err := kubernetes.NewForConfig(ownCfg)
	if err != nil {
		return nil, nil, nil, err
	}
	dyn, err := dynamic.NewForConfig(ownCfg)
	if err != nil {
		return nil, nil, nil, err
	}
	ns := cfg.HistoryLeaseNamespace
	if ns == "" {
		ns = serviceNamespace()
	}
	r := &history.Recorder{Store: hs, Kinds: kinds, Serves: serves, Dynamic: dyn, Core: core, Log: log, Signer: signer,
		Limits: ray.EndingLimits{Events: 100, LogLines: 2000, LogBytes: 256 << 10},
		MaxAge: cfg.HistoryMaxAge, MaxPerNamespace: cfg.HistoryMaxPerNamespace,
		NamespaceMaxBytes: cfg.HistoryNamespaceBytes, MaxBytes: cfg.HistoryBytes,
		Accounting: history.Accounting{CreditEvery: cfg.UsageCreditEvery, Use: use, MeasureEvery: cfg.UsageMeasureEvery,
			MeasureStep: cfg.UsageMeasureStep, Retention: cfg.UsageRetention}}
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
	lock := &resourcelock.LeaseLock{LeaseMeta: metav1.ObjectMeta{Name: cfg.HistoryLease, Namespace: ns},
		Client: core.CoordinationV1(), LockConfig: resourcelock.ResourceLockConfig{Identity: instance + "-" + uuid.NewString()[:8]}}
	released := make(chan struct{})
	go func() {
		defer close(released)
		r.Run(ctx, history.Election{Lock: lock, LeaseDuration: 15 * time.Second, RenewDeadline: 10 * time.Second, RetryPeriod: 2 * time.Second})
	}()
	log.Info("history", zap.String("database", history.Redact(cfg.HistoryDSN)), zap.String("lease", ns+"/"+cfg.HistoryLease))
	return r, hs, released, nil
}

// serviceNamespace is the service's own namespace (its ServiceAccount's), else default.
func serviceNamespace() string {
	if b, err := os.ReadFile("/var/run/secrets/kubernetes.io/serviceaccount/namespace"); err == nil && len(b) > 0 {
		return strings.TrimSpace(string(b))
	}
	return "default"
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

// signingKey reads a key from its file, or from its Secret (made with a new key by the first replica
// to start).
func signingKey(file, secret string, core kubernetes.Interface) ([]byte, error) {
	if file != "" {
		return keys.FromFile(file)
	}
	ns, name, err := keys.ParseSecretRef(secret)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return keys.FromSecret(ctx, core.CoreV1().Secrets(ns), ns, name, keys.DataKey)
}

// readAuditKey reads the audit key, which must not be the template key: each signs what the other
// must not stand for.
func readAuditKey(cfg *config.Config, core kubernetes.Interface, templateKey []byte) (audit.Key, error) {
	b, err := signingKey(cfg.AuditKeyFile, cfg.AuditKeySecret, core)
	if err != nil {
		return nil, fmt.Errorf("the audit key: %w", err)
	}
	if bytes.Equal(bytes.TrimSpace(b), bytes.TrimSpace(templateKey)) {
		return nil, errors.New("the audit key is the template key: give the audit trail a key of its own (audit-key-file or audit-key-secret)")
	}
	return audit.NewKey(b)
}

// drain turns readiness off once the service is told to stop.
type drain struct{ on atomic.Bool }

func (d *drain) start() { d.on.Store(true) }

// ready is check, unless the service is stopping.
func (d *drain) ready(check func(context.Context) error) func(context.Context) error {
	return func(ctx context.Context) error {
		if d.on.Load() {
			return errors.New("shutting down")
		}
		return check(ctx)
	}
}

// servePprof serves the Go profiler on a loopback address, apart from the API.
func servePprof(addr string, log *zap.Logger) {
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	log.Info("profiler listening", zap.String("address", addr))
	srv := &http.Server{Addr: addr, Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	if err := srv.ListenAndServe(); err != nil {
		log.Error("profiler stopped", zap.Error(err))
	}
}

// readiness: ready once the caches have synced, the apiserver is ready itself (its storage answers)
// and it serves the KubeRay resources every KubeRay version has.
func readiness(store *cache.Store, bindings *auth.Bindings, disc discovery.DiscoveryInterface, kinds *ray.Kinds) func(context.Context) error {
	return func(ctx context.Context) error {
		if !store.HasSynced() {
			return errors.New("watch caches not synced yet")
		}
		if bindings != nil && !bindings.HasSynced() {
			return errors.New("the RoleBindings not listed yet")
		}
		if err := disc.RESTClient().Get().AbsPath("/readyz").Do(ctx).Error(); err != nil {
			return fmt.Errorf("the apiserver is not ready: %w", err)
		}
		list, err := disc.ServerResourcesForGroupVersion(ray.RayGroupVersion.String())
		if err != nil {
			return fmt.Errorf("KubeRay CRDs (%s): %w", ray.RayGroupVersion, err)
		}
		served := map[string]bool{}
		for _, r := range list.APIResources {
			served[r.Name] = true
		}
		for _, k := range kinds.All() {
			if !served[k.Resource] && !k.Optional {
				return fmt.Errorf("the apiserver does not serve %s.%s", k.Resource, k.GVR().GroupVersion())
			}
		}
		return nil
	}
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
