// Package config loads the service's configuration from a file, RAY_SERVICE_* environment variables and
// command-line flags (in rising priority), through viper.
package config

import (
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"github.com/spf13/viper"
	"k8s.io/apimachinery/pkg/api/resource"

	"ray-service/internal/keys"
)

// Config is everything the service reads at start-up.
type Config struct {
	// Listen is the address of the HTTP server, e.g. ":8080" or "127.0.0.1:8080".
	Listen string `mapstructure:"listen"`
	// MetricsListen, when set, is the address /metrics is served on, apart from the API; empty serves it
	// on Listen.
	MetricsListen string `mapstructure:"metrics-listen"`
	// TLSCertFile and TLSKeyFile, when set, make the API speak HTTPS with that pair, read again when the
	// files change.
	TLSCertFile string `mapstructure:"tls-cert-file"`
	TLSKeyFile  string `mapstructure:"tls-key-file"`
	// Kubeconfig is the path of a kubeconfig file; empty means in-cluster configuration.
	Kubeconfig string `mapstructure:"kubeconfig"`
	// PrometheusURL is the base URL of the Prometheus HTTP API used by the overview.
	PrometheusURL string `mapstructure:"prometheus-url"`
	// PrometheusTimeout bounds each Prometheus query of the overview.
	PrometheusTimeout time.Duration `mapstructure:"prometheus-timeout"`
	// PrometheusCacheSize bounds the Prometheus answers cached for the overview.
	PrometheusCacheSize int `mapstructure:"prometheus-cache-size"`
	// IdleWindow is how long a Ray cluster must do no Ray work to be idle (0: no idle detection);
	// IdleInterval how often the clusters are judged; IdleCPUShare the share of its requested CPU its
	// containers may use and IdleAcceleratorPercent the utilization of its GPUs and NPUs, for it to be idle.
	IdleWindow             time.Duration `mapstructure:"idle-window"`
	IdleInterval           time.Duration `mapstructure:"idle-interval"`
	IdleCPUShare           float64       `mapstructure:"idle-cpu-share"`
	IdleAcceleratorPercent float64       `mapstructure:"idle-accelerator-percent"`
	// IdleStopIdentity is the ServiceAccount (namespace/name) the service stops idle clusters as, by
	// their policies ("": no stop by policy); IdleStopWarning how long ahead a stop is announced.
	IdleStopIdentity string        `mapstructure:"idle-stop-identity"`
	IdleStopWarning  time.Duration `mapstructure:"idle-stop-warning"`
	// IdlePolicyStore is the ConfigMap (namespace/name) that keeps the generations of the namespaces'
	// idle policies, which their signatures cover ("": ray-service-idle-policies in the service's own
	// namespace).
	IdlePolicyStore string `mapstructure:"idle-policy-store"`
	// UsageCreditEvery is how often the utilization accounting credits what each Ray cluster holds;
	// UsageMeasureEvery how often it reads their use from Prometheus, sampled every UsageMeasureStep;
	// UsageRetention how long its daily figures are kept (0: always).
	UsageCreditEvery  time.Duration `mapstructure:"usage-credit-every"`
	UsageMeasureEvery time.Duration `mapstructure:"usage-measure-every"`
	UsageMeasureStep  time.Duration `mapstructure:"usage-measure-step"`
	UsageRetention    time.Duration `mapstructure:"usage-retention"`
	// NotifyAllowCIDRs are the ranges a webhook may be in although they are not public (by default a
	// webhook reaches public addresses only); NotifyDenyCIDRs the cluster's own ranges (its services' and
	// pods'), refused even where NotifyAllowCIDRs holds them.
	NotifyAllowCIDRs []string `mapstructure:"notify-allow-cidrs"`
	NotifyDenyCIDRs  []string `mapstructure:"notify-deny-cidrs"`
	// NotifyRetryFor bounds how long a notification is retried; NotifyMaxBackoff the wait between two
	// tries; NotifyTimeout one try.
	NotifyRetryFor   time.Duration `mapstructure:"notify-retry-for"`
	NotifyMaxBackoff time.Duration `mapstructure:"notify-max-backoff"`
	NotifyTimeout    time.Duration `mapstructure:"notify-timeout"`
	// GrafanaURL is the base URL of Grafana for the overview's deep links.
	GrafanaURL string `mapstructure:"grafana-url"`
	// GrafanaDashboardUID is the uid of the Ray dashboard in Grafana.
	GrafanaDashboardUID string `mapstructure:"grafana-dashboard-uid"`
	// LogLevel is one of debug, info, warn, error.
	LogLevel string `mapstructure:"log-level"`
	// ClusterDomain is the cluster's DNS domain, used to reach Ray dashboards by service name.
	ClusterDomain string `mapstructure:"cluster-domain"`
	// ShutdownTimeout bounds the graceful shutdown, after the delay.
	ShutdownTimeout time.Duration `mapstructure:"shutdown-timeout"`
	// ShutdownDelay is how long the service, told to stop, still serves while /readyz says not ready,
	// so that load balancers stop sending before it stops accepting.
	ShutdownDelay time.Duration `mapstructure:"shutdown-delay"`
	// ReadTimeout bounds reading a whole request, body included; IdleTimeout how long a keep-alive
	// connection may wait for its next request; WriteTimeout writing an answer (streams lift it).
	ReadTimeout  time.Duration `mapstructure:"read-timeout"`
	WriteTimeout time.Duration `mapstructure:"write-timeout"`
	IdleTimeout  time.Duration `mapstructure:"idle-timeout"`
	// DashboardTimeout bounds connecting to a Ray dashboard and waiting for its answer's headers.
	DashboardTimeout time.Duration `mapstructure:"dashboard-timeout"`
	// MaxLogFollows and MaxLogFollowsPerCaller bound the log follows open at once, in all and per
	// caller; MaxLogFollowDuration how long one may last.
	MaxLogFollows          int           `mapstructure:"max-log-follows"`
	MaxLogFollowsPerCaller int           `mapstructure:"max-log-follows-per-caller"`
	MaxLogFollowDuration   time.Duration `mapstructure:"max-log-follow-duration"`
	// MaxWatches and MaxWatchesPerCaller bound the watch streams open at once; MaxWatchDuration how
	// long one lasts (an EventSource then reconnects and resumes); WatchHeartbeat how often an idle
	// stream sends a comment.
	MaxWatches          int           `mapstructure:"max-watches"`
	MaxWatchesPerCaller int           `mapstructure:"max-watches-per-caller"`
	MaxWatchDuration    time.Duration `mapstructure:"max-watch-duration"`
	WatchHeartbeat      time.Duration `mapstructure:"watch-heartbeat"`
	// AuthCacheTTL is how long an access review verdict is reused for the same token.
	AuthCacheTTL time.Duration `mapstructure:"auth-cache-ttl"`
	// AuthCacheSize bounds the access review verdicts and user names cached.
	AuthCacheSize int `mapstructure:"auth-cache-size"`
	// ReviewEveryNamespace reviews a caller in every namespace a list across namespaces may show, not
	// only where a RoleBinding names it: for an apiserver whose authorizers other than RBAC grant per
	// namespace.
	ReviewEveryNamespace bool `mapstructure:"review-every-namespace"`
	// ResyncPeriod is the informers' resync period (0 disables resync).
	ResyncPeriod time.Duration `mapstructure:"resync-period"`
	// DashboardListen is the address of the listener that serves the Ray dashboard proxy and nothing
	// else, on an origin of its own; DashboardOrigin (scheme://host[:port]) is where browsers reach it
	// (empty: the API request's host with DashboardListen's port). DashboardSameOrigin has the API's
	// listener serve the proxy too, its pages sandboxed. DashboardPort is DashboardListen's port.
	DashboardListen     string `mapstructure:"dashboard-listen"`
	DashboardOrigin     string `mapstructure:"dashboard-origin"`
	DashboardSameOrigin bool   `mapstructure:"dashboard-same-origin"`
	DashboardPort       string `mapstructure:"-"`
	// MaxDashboardRequests and MaxDashboardRequestsPerCaller bound the requests the dashboard proxy holds
	// open at once, in all and per caller; MaxDashboardDuration how long one may last.
	MaxDashboardRequests          int           `mapstructure:"max-dashboard-requests"`
	MaxDashboardRequestsPerCaller int           `mapstructure:"max-dashboard-requests-per-caller"`
	MaxDashboardDuration          time.Duration `mapstructure:"max-dashboard-duration"`
	// TrustedProxies are the addresses or ranges of the gateways whose X-Forwarded-Proto and
	// X-Forwarded-Host are believed (none by default); TrustedProxyPrefixes are them parsed.
	TrustedProxies       []string       `mapstructure:"trusted-proxies"`
	TrustedProxyPrefixes []netip.Prefix `mapstructure:"-"`
	// PprofListen, when set, is a loopback address where the Go profiler is served (off by default).
	PprofListen string `mapstructure:"pprof-listen"`
	// TemplateKeyFile holds the key the service signs its templates with (at least 32 bytes; every
	// replica the same): a ConfigMap without its signature is no template.
	TemplateKeyFile string `mapstructure:"template-key-file"`
	// TemplateKeySecret (namespace/name), instead of TemplateKeyFile, is a Secret that holds the key
	// (data "key"): the first replica to start makes it with a random key, and every later one reads it.
	TemplateKeySecret string `mapstructure:"template-key-secret"`
	// AuditKeyFile holds the key the audit trail is chained and its events signed with (at least 32
	// bytes; every replica the same; not the template key).
	AuditKeyFile string `mapstructure:"audit-key-file"`
	// AuditKeySecret (namespace/name), instead of AuditKeyFile, is a Secret that holds the audit key
	// (data "key"), made as the template key's Secret is.
	AuditKeySecret string `mapstructure:"audit-key-secret"`
	// HistoryDSN is where the history is kept: sqlite:<file> (embedded) or a PostgreSQL URL
	// (postgres://…, for several replicas); empty: no history.
	HistoryDSN string `mapstructure:"history-dsn"`
	// Lease names the Lease whose holder acts for all the replicas (writes the history, credits the
	// utilization, acts on idle policies, delivers notifications); LeaseNamespace is its namespace
	// (empty: the service's own, else default). HistoryLease and HistoryLeaseNamespace are their former
	// names, read where the new ones are not set.
	Lease                 string `mapstructure:"lease"`
	LeaseNamespace        string `mapstructure:"lease-namespace"`
	HistoryLease          string `mapstructure:"history-lease"`
	HistoryLeaseNamespace string `mapstructure:"history-lease-namespace"`
	// LeaseDuration, LeaseRenewDeadline and LeaseRetryPeriod are the Lease's timings: how long a claim
	// lasts unrenewed, how long the holder tries to renew before it gives the lead up, how often a
	// replica tries to take or renew it.
	LeaseDuration      time.Duration `mapstructure:"lease-duration"`
	LeaseRenewDeadline time.Duration `mapstructure:"lease-renew-deadline"`
	LeaseRetryPeriod   time.Duration `mapstructure:"lease-retry-period"`
	// HistoryEndingEvents, HistoryEndingLogLines and HistoryEndingLogBytes bound what the history
	// keeps of an object's end: its last events, and the last lines of its head's (or submitter's) log.
	HistoryEndingEvents   int    `mapstructure:"history-ending-events"`
	HistoryEndingLogLines int    `mapstructure:"history-ending-log-lines"`
	HistoryEndingLogBytes string `mapstructure:"history-ending-log-bytes"`
	HistoryEndingBytes    int64  `mapstructure:"-"`
	// DeleteWait bounds how long a re-run waits for the finished object to go before it creates the
	// object again.
	DeleteWait time.Duration `mapstructure:"delete-wait"`
	// CRDPollInterval is how often the cluster is asked whether the optional kinds' CRDs (RayCronJob)
	// are installed, and which fields of newer KubeRay versions the Ray CRDs declare.
	CRDPollInterval time.Duration `mapstructure:"crd-poll-interval"`
	// AuditVerifyEvery is how often the audit trail's chain is walked to find it changed, cut or added
	// to outside the service (0, the default: never; GET /audit/verify walks it when asked). On SQLite
	// the walk holds the database's one connection for its length, and appends meanwhile may time out.
	AuditVerifyEvery time.Duration `mapstructure:"audit-verify-every"`
	// HistoryMaxAge and HistoryMaxPerNamespace bound the records of ended objects (0: no bound).
	HistoryMaxAge          time.Duration `mapstructure:"history-max-age"`
	HistoryMaxPerNamespace int           `mapstructure:"history-max-per-namespace"`
	// HistoryNamespaceQuota and HistoryQuota bound in bytes what the records of one namespace and of
	// all take (quantities such as 64Mi; 0: no bound): past them the records of ended objects are
	// removed, oldest first. HistoryNamespaceBytes and HistoryBytes are their values.
	HistoryNamespaceQuota string `mapstructure:"history-namespace-quota"`
	HistoryQuota          string `mapstructure:"history-quota"`
	HistoryNamespaceBytes int64  `mapstructure:"-"`
	HistoryBytes          int64  `mapstructure:"-"`
}

// Load reads the configuration. args are the command-line arguments without the program name.
func Load(args []string) (*Config, error) {
	v := viper.New()
	fs := Flags()
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if err := v.BindPFlags(fs); err != nil {
		return nil, err
	}
	v.SetEnvPrefix("RAY_SERVICE")
	v.SetEnvKeyReplacer(strings.NewReplacer("-", "_"))
	v.AutomaticEnv()
	if file := v.GetString("config"); file != "" {
		v.SetConfigFile(file)
		if err := v.ReadInConfig(); err != nil {
			return nil, fmt.Errorf("reading config file %s: %w", file, err)
		}
	}
	var c Config
	if err := v.Unmarshal(&c); err != nil {
		return nil, fmt.Errorf("decoding configuration: %w", err)
	}
	if (c.TemplateKeyFile == "") == (c.TemplateKeySecret == "") {
		return nil, fmt.Errorf("give one of template-key-file and template-key-secret: the service signs the templates it stores " +
			"with that key and trusts no other (see the chart's templateKey)")
	}
	if c.TemplateKeySecret != "" {
		if _, _, err := keys.ParseSecretRef(c.TemplateKeySecret); err != nil {
			return nil, fmt.Errorf("template-key-secret %w", err)
		}
	}
	if c.IdleWindow < 0 || (c.IdleWindow > 0 && (c.IdleInterval <= 0 || c.IdleInterval > c.IdleWindow)) {
		return nil, fmt.Errorf("idle-window %s and idle-interval %s: want a window of 0 (off) or more than 0, and an interval "+
			"above 0 and at most the window", c.IdleWindow, c.IdleInterval)
	}
	if c.IdlePolicyStore != "" {
		if ns, name, ok := strings.Cut(c.IdlePolicyStore, "/"); !ok || ns == "" || name == "" || strings.Contains(name, "/") {
			return nil, fmt.Errorf("idle-policy-store %q: want the ConfigMap as namespace/name", c.IdlePolicyStore)
		}
	}
	if c.IdleStopIdentity != "" {
		if ns, name, ok := strings.Cut(c.IdleStopIdentity, "/"); !ok || ns == "" || name == "" || strings.Contains(name, "/") {
			return nil, fmt.Errorf("idle-stop-identity %q: want the ServiceAccount as namespace/name", c.IdleStopIdentity)
		}
	}
	if c.UsageCreditEvery <= 0 || c.UsageMeasureStep <= 0 || c.UsageMeasureEvery < c.UsageMeasureStep || c.UsageMeasureEvery > time.Hour ||
		c.UsageRetention < 0 {
		return nil, fmt.Errorf("usage-credit-every %s, usage-measure-every %s, usage-measure-step %s and usage-retention %s: want "+
			"the credit's period and the step above 0, the reading's period from the step up to an hour, and a retention of 0 "+
			"(always) or more", c.UsageCreditEvery, c.UsageMeasureEvery, c.UsageMeasureStep, c.UsageRetention)
	}
	if 24*time.Hour%c.UsageMeasureStep != 0 {
		// A reading is split at UTC midnights into spans of whole steps; a midnight between two steps left
		// a span shorter than a step, which Prometheus is not asked for: the reading failed, and each after
		// it, from the same point, until an hour had gone unmeasured.
		return nil, fmt.Errorf("usage-measure-step %s: want a step that divides a day (24h), so that every UTC midnight falls "+
			"on a step", c.UsageMeasureStep)
	}
	if c.IdleStopWarning <= 0 || c.NotifyRetryFor <= 0 || c.NotifyMaxBackoff <= 0 || c.NotifyTimeout <= 0 {
		return nil, fmt.Errorf("idle-stop-warning %s, notify-retry-for %s, notify-max-backoff %s and notify-timeout %s: want each "+
			"more than 0 (a stop by policy is always announced ahead)", c.IdleStopWarning, c.NotifyRetryFor, c.NotifyMaxBackoff, c.NotifyTimeout)
	}
	if c.IdleCPUShare < 0 || c.IdleCPUShare > 1 || c.IdleAcceleratorPercent < 0 || c.IdleAcceleratorPercent > 100 {
		return nil, fmt.Errorf("idle-cpu-share %g and idle-accelerator-percent %g: want a share from 0 to 1 and a percent from 0 to 100",
			c.IdleCPUShare, c.IdleAcceleratorPercent)
	}
	if (c.TLSCertFile == "") != (c.TLSKeyFile == "") {
		return nil, fmt.Errorf("tls-cert-file and tls-key-file go together: give both to serve HTTPS, or neither")
	}
	if c.MetricsListen != "" && c.MetricsListen == c.Listen {
		return nil, fmt.Errorf("metrics-listen %q is the API's own address: leave it empty to serve /metrics there", c.MetricsListen)
	}
	if c.AuditVerifyEvery < 0 {
		return nil, fmt.Errorf("audit-verify-every %s: want 0 (never) or more", c.AuditVerifyEvery)
	}
	if (c.AuditKeyFile == "") == (c.AuditKeySecret == "") {
		return nil, fmt.Errorf("give one of audit-key-file and audit-key-secret: the service chains its audit trail and signs its " +
			"events with that key (see the chart's auditKey)")
	}
	if c.AuditKeySecret != "" {
		if _, _, err := keys.ParseSecretRef(c.AuditKeySecret); err != nil {
			return nil, fmt.Errorf("audit-key-secret %w", err)
		}
	}
	if c.PprofListen != "" {
		host, _, err := net.SplitHostPort(c.PprofListen)
		if ip := net.ParseIP(host); err != nil || (host != "localhost" && (ip == nil || !ip.IsLoopback())) {
			return nil, fmt.Errorf("pprof-listen %q: want a loopback address such as 127.0.0.1:6060", c.PprofListen)
		}
	}
	if err := checkDashboards(&c); err != nil {
		return nil, err
	}
	if c.HistoryLease != "" && !v.IsSet("lease") {
		c.Lease = c.HistoryLease
	}
	if c.HistoryLeaseNamespace != "" && !v.IsSet("lease-namespace") {
		c.LeaseNamespace = c.HistoryLeaseNamespace
	}
	if c.Lease == "" {
		return nil, fmt.Errorf("lease is empty: the replicas need a Lease to choose the one that acts for all")
	}
	if c.LeaseRetryPeriod <= 0 || c.LeaseRenewDeadline <= c.LeaseRetryPeriod || c.LeaseDuration <= c.LeaseRenewDeadline {
		return nil, fmt.Errorf("lease-duration %s, lease-renew-deadline %s and lease-retry-period %s: want a retry period above 0, "+
			"a renew deadline above it and a duration above that", c.LeaseDuration, c.LeaseRenewDeadline, c.LeaseRetryPeriod)
	}
	if c.DeleteWait <= 0 || c.CRDPollInterval <= 0 || c.HistoryEndingEvents < 0 || c.HistoryEndingLogLines < 0 {
		return nil, fmt.Errorf("delete-wait %s and crd-poll-interval %s: want more than 0; history-ending-events %d and "+
			"history-ending-log-lines %d: want 0 or more", c.DeleteWait, c.CRDPollInterval, c.HistoryEndingEvents, c.HistoryEndingLogLines)
	}
	if c.HistoryMaxAge < 0 || c.HistoryMaxPerNamespace < 0 {
		return nil, fmt.Errorf("history-max-age and history-max-per-namespace: want 0 (no bound) or more")
	}
	for _, q := range []struct {
		flag, value string
		to          *int64
	}{{"history-namespace-quota", c.HistoryNamespaceQuota, &c.HistoryNamespaceBytes}, {"history-quota", c.HistoryQuota, &c.HistoryBytes}} {
		v, err := resource.ParseQuantity(q.value)
		if err != nil || v.Sign() < 0 {
			return nil, fmt.Errorf("%s %q: want a size in bytes such as 64Mi or 1Gi (0: no bound)", q.flag, q.value)
		}
		*q.to = v.Value()
	}
	endBytes, perr := resource.ParseQuantity(c.HistoryEndingLogBytes)
	if perr != nil || endBytes.Sign() < 0 {
		return nil, fmt.Errorf("history-ending-log-bytes %q: want a size in bytes such as 256Ki (0: no log kept)", c.HistoryEndingLogBytes)
	}
	c.HistoryEndingBytes = endBytes.Value()
	switch c.LogLevel {
	case "debug", "info", "warn", "error":
	default:
		return nil, fmt.Errorf("log-level %q: want debug, info, warn or error", c.LogLevel)
	}
	return &c, nil
}

// Flags defines every setting as a flag, with its default and its help. Load binds each to its RAY_SERVICE_*
// variable and to the configuration file's key of the same name; docs/reference/settings.md is generated
// from it (go test ./internal/config -run TestSettingsReference -update), and that test fails while the
// page is behind or a setting says nothing of the chart.
func Flags() *pflag.FlagSet {
	fs := pflag.NewFlagSet("ray-service", pflag.ContinueOnError)
	fs.String("config", "", "path of a configuration file (YAML, JSON or TOML)")
	fs.String("listen", ":8080", "HTTP listen address")
	fs.String("metrics-listen", "", "address to serve /metrics on, apart from the API (e.g. :9091); empty: on the API's address")
	fs.String("tls-cert-file", "", "PEM certificate (chain) to serve HTTPS with, read again when it changes; empty: plain HTTP")
	fs.String("tls-key-file", "", "PEM private key of tls-cert-file")
	fs.String("kubeconfig", "", "path of a kubeconfig file; empty uses the in-cluster configuration")
	fs.String("prometheus-url", "http://prometheus-k8s.monitoring.svc:9090", "Prometheus base URL")
	fs.Duration("prometheus-timeout", 10*time.Second, "timeout of each Prometheus query")
	fs.Int("prometheus-cache-size", 1024, "the most Prometheus answers cached for the overview")
	fs.Duration("idle-window", 30*time.Minute, "how long a Ray cluster must do no Ray work, by Prometheus, to be idle (0: no idle detection)")
	fs.Duration("idle-interval", time.Minute, "how often the Ray clusters are judged idle or not")
	fs.Float64("idle-cpu-share", 0.05, "the share of its requested CPU an idle cluster's containers may use")
	fs.Float64("idle-accelerator-percent", 5, "the utilization (percent) an idle cluster's GPUs and NPUs may have")
	fs.String("idle-stop-identity", "", "the ServiceAccount (namespace/name) idle clusters are stopped as, by their policies (empty: no stop by policy)")
	fs.String("idle-policy-store", "", "the ConfigMap (namespace/name) that keeps the idle policies' generations, apart from their namespaces (empty: ray-service-idle-policies in the service's namespace)")
	fs.Duration("idle-stop-warning", 15*time.Minute, "how long ahead a stop by an idle policy is announced (a Warning event and a notification)")
	fs.Duration("usage-credit-every", time.Minute, "how often the utilization accounting credits what each Ray cluster holds")
	fs.Duration("usage-measure-every", 5*time.Minute, "how often the Ray clusters' use is read from Prometheus for the utilization accounting")
	fs.Duration("usage-measure-step", 15*time.Second, "how finely the Ray clusters' use is sampled (at least the scrape interval, and dividing a day)")
	fs.Duration("usage-retention", 400*24*time.Hour, "how long the utilization's daily figures are kept (0: always)")
	fs.StringSlice("notify-allow-cidrs", nil, "ranges a webhook may be in although they are not public (refused by default: private, shared, loopback, link-local, unique-local, ...)")
	fs.StringSlice("notify-deny-cidrs", nil, "ranges no webhook may be in, even where notify-allow-cidrs holds them: the cluster's service and pod ranges")
	fs.Duration("notify-retry-for", time.Hour, "how long a notification is retried before it is given up")
	fs.Duration("notify-max-backoff", 5*time.Minute, "the longest wait between two tries of a notification")
	fs.Duration("notify-timeout", 10*time.Second, "how long one try of a notification may take")
	fs.String("grafana-url", "", "Grafana base URL for deep links (empty: no link)")
	fs.String("grafana-dashboard-uid", "rayDefaultDashboard", "uid of the Ray dashboard in Grafana")
	fs.String("log-level", "info", "log level: debug, info, warn or error")
	fs.String("cluster-domain", "cluster.local", "cluster DNS domain")
	fs.Duration("shutdown-timeout", 15*time.Second, "how long a graceful shutdown may take, after the delay")
	fs.Duration("shutdown-delay", 5*time.Second, "how long to keep serving, not ready, once told to stop")
	fs.Duration("read-timeout", time.Minute, "how long reading a whole request may take")
	fs.Duration("write-timeout", time.Minute, "how long writing an answer may take (log follows and the dashboard proxy lift it)")
	fs.Duration("idle-timeout", 2*time.Minute, "how long a keep-alive connection may wait for its next request")
	fs.Duration("dashboard-timeout", 30*time.Second, "how long connecting to a Ray dashboard and waiting for its answer may take")
	fs.Int("max-log-follows", 256, "the most log follows open at once")
	fs.Int("max-log-follows-per-caller", 8, "the most log follows one caller may have open at once")
	fs.Duration("max-log-follow-duration", time.Hour, "how long one log follow may last")
	fs.Int("max-watches", 2000, "the most watch streams open at once")
	fs.Int("max-watches-per-caller", 16, "the most watch streams one caller may have open at once")
	fs.Duration("max-watch-duration", 30*time.Minute, "how long one watch stream may last")
	fs.Duration("watch-heartbeat", 15*time.Second, "how often an idle watch stream sends a heartbeat comment")
	fs.Duration("auth-cache-ttl", 30*time.Second, "how long an access review verdict is cached (and how often watch streams check rights again)")
	fs.Int("auth-cache-size", 10000, "the most access review verdicts and user names cached")
	fs.Bool("review-every-namespace", false, "review a caller's rights in every namespace of a list across namespaces, not only where a RoleBinding names it (for authorizers other than RBAC that grant per namespace)")
	fs.Duration("resync-period", 0, "informer resync period (0: none)")
	fs.String("dashboard-listen", ":8081", "address of the listener that serves the Ray dashboard proxy, and nothing else, on an origin of its own")
	fs.String("dashboard-origin", "", "where browsers reach dashboard-listen (scheme://host[:port]); empty: the API request's host with dashboard-listen's port")
	fs.Bool("dashboard-same-origin", false, "serve the Ray dashboard proxy on the API's origin too, its pages sandboxed (their scripts reach no API)")
	fs.Int("max-dashboard-requests", 1024, "the most requests the Ray dashboard proxy holds open at once")
	fs.Int("max-dashboard-requests-per-caller", 64, "the most requests one caller may have open through the Ray dashboard proxy at once")
	fs.Duration("max-dashboard-duration", time.Hour, "how long one request through the Ray dashboard proxy may last")
	fs.StringSlice("trusted-proxies", nil, "addresses or CIDRs of the gateways whose X-Forwarded-Proto and X-Forwarded-Host are believed (none by default)")
	fs.String("pprof-listen", "", "a loopback address (e.g. 127.0.0.1:6060) to serve the Go profiler on; empty: off")
	fs.String("template-key-file", "", "file holding the key templates are signed with (at least 32 bytes); or template-key-secret")
	fs.String("template-key-secret", "", "namespace/name of a Secret holding the template key (data \"key\"), made with a random key when missing")
	fs.String("audit-key-file", "", "file holding the key the audit trail is chained and signed with (at least 32 bytes, not the template key); or audit-key-secret")
	fs.String("audit-key-secret", "", "namespace/name of a Secret holding the audit key (data \"key\"), made with a random key when missing")
	fs.String("history-dsn", "sqlite:/var/lib/ray-service/history.db", "where the history is kept: sqlite:<file> or postgres://…; empty: no history")
	// The Lease keeps the name it had when only the history used it: replicas of a version before and
	// after, side by side in a rolling upgrade, compete for the same one.
	fs.String("lease", "ray-service-history", "the Lease whose holder acts for all replicas: writes the history, credits the utilization, acts on idle policies, delivers notifications")
	fs.String("lease-namespace", "", "the Lease's namespace (empty: the service's own namespace, else default)")
	fs.String("history-lease", "", "the former name of lease")
	fs.String("history-lease-namespace", "", "the former name of lease-namespace")
	_ = fs.MarkDeprecated("history-lease", "use lease")
	_ = fs.MarkDeprecated("history-lease-namespace", "use lease-namespace")
	fs.Duration("lease-duration", 15*time.Second, "how long the Lease's holder keeps it without renewing it")
	fs.Duration("lease-renew-deadline", 10*time.Second, "how long the Lease's holder tries to renew it before giving the lead up")
	fs.Duration("lease-retry-period", 2*time.Second, "how often a replica tries to take or renew the Lease")
	fs.Int("history-ending-events", 100, "the most events the history keeps of an object's end")
	fs.Int("history-ending-log-lines", 2000, "the most log lines the history keeps of an object's end")
	fs.String("history-ending-log-bytes", "256Ki", "the most bytes of log the history keeps of an object's end")
	fs.Duration("delete-wait", 30*time.Second, "how long a re-run waits for the finished object to go")
	fs.Duration("audit-verify-every", 0, "how often the audit trail's chain is walked to find it changed, cut or added to outside the service (0: never; on SQLite the walk holds the database for its length)")
	fs.Duration("crd-poll-interval", 30*time.Second, "how often the cluster is asked whether the optional kinds' CRDs (RayCronJob) are installed, and which fields of newer KubeRay versions its Ray CRDs declare")
	fs.Duration("history-max-age", 30*24*time.Hour, "how long records of ended objects are kept (0: no bound)")
	fs.Int("history-max-per-namespace", 10000, "the most records of ended objects kept per namespace (0: no bound)")
	fs.String("history-namespace-quota", "64Mi", "the most bytes the records of one namespace take; past it the oldest ended are removed (0: no bound)")
	fs.String("history-quota", "1Gi", "the most bytes all records take; past it the oldest ended are removed (0: no bound)")
	return fs
}

// checkDashboards checks where the Ray dashboard proxy is served, and the gateways trusted to say where
// a browser sees it.
func checkDashboards(c *Config) error {
	if c.DashboardListen == "" && !c.DashboardSameOrigin {
		return fmt.Errorf("dashboard-listen is empty: the Ray dashboards need an origin of their own (whoever runs a Ray " +
			"cluster controls what its dashboard answers); or set dashboard-same-origin to serve them sandboxed on the API's")
	}
	if c.DashboardListen != "" {
		_, port, err := net.SplitHostPort(c.DashboardListen)
		if err != nil || port == "" || port == "0" {
			return fmt.Errorf("dashboard-listen %q: want host:port with a port, e.g. :8081", c.DashboardListen)
		}
		if c.DashboardListen == c.Listen || c.DashboardListen == c.MetricsListen {
			return fmt.Errorf("dashboard-listen %q is the API's or the metrics' address: the dashboards need one of their own", c.DashboardListen)
		}
		c.DashboardPort = port
	}
	if c.DashboardOrigin != "" {
		u, err := url.Parse(c.DashboardOrigin)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.Path != "" || u.RawQuery != "" || u.User != nil {
			return fmt.Errorf("dashboard-origin %q: want scheme://host[:port], nothing after", c.DashboardOrigin)
		}
		if c.DashboardListen == "" {
			return fmt.Errorf("dashboard-origin %q needs dashboard-listen, the listener it reaches", c.DashboardOrigin)
		}
	}
	if c.MaxDashboardRequests < 0 || c.MaxDashboardRequestsPerCaller < 0 || c.MaxDashboardDuration < 0 {
		return fmt.Errorf("max-dashboard-requests, max-dashboard-requests-per-caller and max-dashboard-duration: want 0 (no bound) or more")
	}
	for _, p := range c.TrustedProxies {
		prefix, err := netip.ParsePrefix(p)
		if err != nil {
			addr, aerr := netip.ParseAddr(p)
			if aerr != nil {
				return fmt.Errorf("trusted-proxies %q: want an IP address or a CIDR", p)
			}
			prefix = netip.PrefixFrom(addr.Unmap(), addr.Unmap().BitLen())
		}
		c.TrustedProxyPrefixes = append(c.TrustedProxyPrefixes, prefix.Masked())
	}
	return nil
}
