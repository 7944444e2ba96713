package api

import (
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"
	"go.uber.org/zap"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"ray-service/internal/auth"
	"ray-service/internal/cache"
	"ray-service/internal/k8s"
	"ray-service/internal/promql"
	"ray-service/internal/ray"
)

// Counts are the overview's counts per kind.
type Counts struct {
	RayClusters ray.KindCount `json:"rayclusters"`
	RayJobs     ray.KindCount `json:"rayjobs"`
	RayServices ray.KindCount `json:"rayservices"`
	// RayCronJobs are zero where the cluster has no RayCronJob CRD; active: not suspended.
	RayCronJobs       ray.KindCount `json:"raycronjobs"`
	ActiveRayClusters int           `json:"activeRayClusters"`
	// IdleRayClusters are the Ray clusters the idle detection finds idle (see idle in a summary), and
	// IdleHolding what their pods request and so hold: 0 where it is off.
	IdleRayClusters int64         `json:"idleRayClusters"`
	IdleHolding     ray.Resources `json:"idleHolding"`
}

// OverviewData is the data of the overview and of a cluster's metrics.
type OverviewData struct {
	Window    promql.Window    `json:"window"`
	Counts    *Counts          `json:"counts,omitempty"`
	Allocated cache.Allocation `json:"allocated"`
	// Pending is what the Ray objects a queue manager (Volcano) has not admitted request: the demand
	// waiting beside what is allocated. Absent from a cluster's metrics.
	Pending    *ray.Resources `json:"pending,omitempty"`
	Used       promql.Used    `json:"used"`
	Series     promql.Series  `json:"series"`
	GrafanaURL string         `json:"grafanaURL,omitempty"`
	// UtilizationURL (the overview only, with a history database) is the utilization report of the top
	// five holders of idle GPUs and NPUs over the last seven days, by namespace.
	UtilizationURL string   `json:"utilizationURL,omitempty" example:"/rest/ray/v1/utilization?groupBy=namespace&sortBy=idleAcceleratorHours&pageSize=5"`
	Warnings       []string `json:"warnings"`
}

// of returns the count of kind k: the contract names one field per kind.
func (c *Counts) of(k *ray.Kind) *ray.KindCount {
	return map[string]*ray.KindCount{"rayclusters": &c.RayClusters, "rayjobs": &c.RayJobs, "rayservices": &c.RayServices,
		"raycronjobs": &c.RayCronJobs}[k.Resource]
}

// Grafana is where the overview links to.
type Grafana struct {
	URL, DashboardUID string
}

// overview reports counts, requested and used resources of Ray.
//
//	@Summary		Overview
//	@ID				getOverview
//	@Description	Counts per kind (total including templates; active: not Stopped, Succeeded or Failed) and the
//	@Description	Ray clusters with running pods; allocated: the summed effective requests of every Pending or
//	@Description	Running Ray pod (exact, from Kubernetes) and the Ray logical resources their nodes offer; used:
//	@Description	what Prometheus measured at the end of the window (CPU cores, working-set memory, GPUs and NPUs
//	@Description	busy, their memory, Ray logical resources in use); series over the window. Only namespaces the
//	@Description	caller may list are counted. Prometheus trouble never fails the answer: each figure it could not
//	@Description	measure is null with a warning. Named ranges end now, aligned to their step.
//	@Description	GPUs and NPUs, allocated and used, are device equivalents: a slice counts as its share of a
//	@Description	device. Used: a whole GPU's DCGM_FI_DEV_GPU_UTIL/100; a MIG instance's (dcgm-exporter series
//	@Description	labelled GPU_I_PROFILE) DCGM_FI_PROF_GR_ENGINE_ACTIVE times its compute slices over its GPU's
//	@Description	(taken as a share of the instance; not established by NVIDIA); a whole chip's
//	@Description	container_npu_utilization/100; a vNPU's vnpu_pod_aicore_utilization/100 times aicore_count/8
//	@Description	(npu-exporter writes it for Ascend 310P only: vNPUs of a 910 are named in a warning and left
//	@Description	out; where they are all the NPUs held, used npu is null). The allocated series value each
//	@Description	resource as the allocated totals do at the end of the window; a slice resource no Ray pod in
//	@Description	scope holds then is left out of them.
//	@Tags			overview
//	@Produce		json
//	@Security		Bearer
//	@Param			range			query		string	false	"named window"	Enums(10m, 30m, 1h, 3h, 6h, 12h, 24h, 7d)	default(30m)
//	@Param			start			query		string	false	"window start (RFC 3339 or Unix seconds), with end"
//	@Param			end				query		string	false	"window end, with start"
//	@Param			step			query		string	false	"step with start and end (e.g. 30s)"
//	@Param			namespace		query		string	false	"only this namespace"
//	@Success		200				{object}	Envelope{data=OverviewData}
//	@Failure		400,401,403,503	{object}	Envelope
//	@Router			/rest/ray/v1/overview [get]
func (s *Server) overview(c *gin.Context) (*response, error) {
	w, ns, err := windowAndNamespace(c)
	if err != nil {
		return nil, err
	}
	scopes, err := s.rules.Overview(c.Request.Context(), token(c), ns)
	if err != nil {
		return nil, err
	}
	counts, alloc, pending := s.countsIn(scopes)
	data := s.figures(c, w, promql.Scope{Namespaces: scopes[s.Kinds.Cluster()].Instances.List()}, alloc, counts)
	data.Pending = &pending
	return ok(data), nil
}

// countsIn counts the objects of each kind in their scopes and sums what the Ray pods in the Ray
// clusters' scope request.
func (s *Server) countsIn(scopes map[*ray.Kind]cache.Scopes) (*Counts, cache.Allocation, ray.Resources) {
	counts := &Counts{}
	for _, k := range s.Kinds.All() {
		*counts.of(k) = s.Store.Count(k, scopes[k])
	}
	alloc := s.Store.Allocated(scopes[s.Kinds.Cluster()].Instances, "")
	counts.ActiveRayClusters = alloc.ActiveRayClusters
	counts.IdleRayClusters, counts.IdleHolding = s.Store.IdleTotals(scopes[s.Kinds.Cluster()].Instances)
	return counts, alloc, s.Store.Pending(scopes)
}

// clusterMetrics reports one Ray cluster's requested and used resources.
//
//	@Summary		Metrics of a Ray cluster
//	@ID				getRayClusterMetrics
//	@Description	The overview's allocated, used and series for one RayCluster (its detail page's monitoring
//	@Description	tab). For callers who may get the RayCluster.
//	@Tags			overview
//	@Produce		json
//	@Security		Bearer
//	@Param			namespace			path		string	true	"namespace"
//	@Param			name				path		string	true	"RayCluster name"
//	@Param			range				query		string	false	"named window"	Enums(10m, 30m, 1h, 3h, 6h, 12h, 24h, 7d)	default(30m)
//	@Param			start				query		string	false	"window start (RFC 3339 or Unix seconds), with end"
//	@Param			end					query		string	false	"window end, with start"
//	@Param			step				query		string	false	"step with start and end (e.g. 30s)"
//	@Success		200					{object}	Envelope{data=OverviewData}
//	@Failure		400,401,403,404,503	{object}	Envelope
//	@Router			/rest/ray/v1/namespaces/{namespace}/rayclusters/{name}/metrics [get]
func (s *Server) clusterMetrics(c *gin.Context) (*response, error) {
	if !req(c).kind.IsCluster {
		return nil, statusError(http.StatusNotFound, metav1.StatusReasonNotFound, "metrics are per RayCluster: use rayclusters")
	}
	w, _, err := windowAndNamespace(c)
	if err != nil {
		return nil, err
	}
	_, cur, err := s.resolve(c)
	if err != nil {
		return nil, err
	}
	ns, name := c.Param("namespace"), c.Param("name")
	alloc := s.Store.Allocated(auth.Namespaces(ns), name)
	if cur.Template != nil {
		alloc = cache.Allocation{Ray: map[string]float64{}}
	}
	return ok(s.figures(c, w, promql.Scope{Namespaces: []string{ns}, Cluster: name}, alloc, nil)), nil
}

// figures are the overview's figures of a scope: counts and allocated as given, used and series from
// Prometheus.
func (s *Server) figures(c *gin.Context, w promql.Window, scope promql.Scope, alloc cache.Allocation, counts *Counts) OverviewData {
	data := OverviewData{Window: w, Counts: counts, Allocated: alloc, Warnings: []string{},
		GrafanaURL: promql.GrafanaURL(s.Grafana.URL, s.Grafana.DashboardUID, w, scope.Cluster)}
	if counts != nil && s.Utilization != nil {
		data.UtilizationURL = BasePath + "/utilization?groupBy=namespace&sortBy=idleAcceleratorHours&pageSize=5"
		if ns := c.Query("namespace"); ns != "" && namespaceProblem(ns) == "" {
			data.UtilizationURL += "&namespace=" + ns
		}
	}
	if s.Usage == nil {
		data.Used = promql.Used{Ray: map[string]float64{}}
		data.Series = promql.Series{Used: map[string][]promql.Point{}, Allocated: map[string][]promql.Point{}, RayUsed: map[string][]promql.Point{}}
		data.Warnings = append(data.Warnings, "no Prometheus is configured: used figures and series are not measured")
	} else {
		// The allocated series value slices as the allocated totals do.
		scope.Held = alloc.Accelerators
		// A caller that goes away stops waiting; queries that no other caller waits for are cancelled.
		used, series, warnings := s.Usage.Usage(c.Request.Context(), w, scope)
		data.Used, data.Series = used, series
		data.Warnings = append(data.Warnings, warnings...)
	}
	return data
}

// clusterHealth reports the cluster health tab of the Ray cluster an object runs on.
//
//	@Summary		Cluster health
//	@ID				getObjectHealth
//	@Description	Four panels from Ray's own Prometheus metrics, for the Ray cluster of the object (a RayCluster
//	@Description	itself; a RayJob's or RayService's current cluster), selected by the namespace and the
//	@Description	ray_io_cluster label that KubeRay's PodMonitor sets from the pods' ray.io/cluster label. Each
//	@Description	panel tries its sources in order and names the one that answered in source:
//	@Description	gcsEventPressure (ms; warning from 100, critical from 1000): the mean queueing time of
//	@Description	gcs_server's main event loop from the ray_operation_queue_time_ms histogram (Ray 2.50 and
//	@Description	later, Name="gcs_server_main_io_context"), else the longest wait of gcs_server's handlers from
//	@Description	the older gauge (Ray 2.49 and before with RAY_event_stats_metrics=1), else
//	@Description	ray_io_context_event_loop_lag_ms, else, for a caller who may get services/proxy in the
//	@Description	namespace, the "Main service Event stats" gcs_server.out prints every minute, read through the
//	@Description	cluster's Ray dashboard (/api/v0/logs/file), with figures eventsPerSecond and activeEvents
//	@Description	(where the dashboard refuses, the reason names its status only; a redirect is not followed).
//	@Description	nodeHealthChecks (ms; 1000, 5000): the p99 latency of the GCS's node health checks
//	@Description	(ray_health_check_rpc_latency_ms). jobAPIPressure (s; 1, 5): the p95 latency of the job API
//	@Description	(submit_job, stop_job, delete_job, get_job_info, list_jobs, get_job_logs, or their paths;
//	@Description	log streams left out) from ray_dashboard_api_requests_duration_seconds, its label endpoint or,
//	@Description	scraped without honorLabels, exported_endpoint; split by method (POST, DELETE, GET).
//	@Description	dashboardPressure (s; 1, 5): the p95 latency of every dashboard API call but log streams.
//	@Description	The dashboard's histogram is exported on its own port 44227, which must be declared (named
//	@Description	dash-metrics) and scraped. Each panel has its value at the end of the window, its series, its
//	@Description	level (ok, warning, critical, or no data with what to do), its thresholds, its metric and the
//	@Description	query that produced it; the verdict is the worst level. Prometheus trouble never fails the
//	@Description	answer: panels say no data, with a warning. For callers who may get the object; a template has
//	@Description	no cluster (409).
//	@Tags			overview
//	@Produce		json
//	@Security		Bearer
//	@Param			namespace				path		string	true	"namespace"
//	@Param			kind					path		string	true	"kind"	Enums(rayclusters, rayjobs, rayservices, raycronjobs)
//	@Param			name					path		string	true	"name"
//	@Param			range					query		string	false	"named window"	Enums(10m, 30m, 1h, 3h, 6h, 12h, 24h, 7d)	default(30m)
//	@Param			start					query		string	false	"window start (RFC 3339 or Unix seconds), with end"
//	@Param			end						query		string	false	"window end, with start"
//	@Param			step					query		string	false	"step with start and end (e.g. 30s)"
//	@Success		200						{object}	Envelope{data=promql.ClusterHealth}
//	@Failure		400,401,403,404,409,503	{object}	Envelope
//	@Router			/rest/ray/v1/namespaces/{namespace}/{kind}/{name}/health [get]
func (s *Server) clusterHealth(c *gin.Context) (*response, error) {
	w, _, err := windowAndNamespace(c)
	if err != nil {
		return nil, err
	}
	r, cur, err := s.resolve(c)
	if err != nil {
		return nil, err
	}
	sum := r.objects.Summarize(cur)
	cluster := r.kind.CurrentCluster(&sum)
	if cur.Template != nil || cluster == "" {
		return nil, statusError(http.StatusConflict, metav1.StatusReasonConflict, "it has no Ray cluster: start it first")
	}
	if s.Health == nil {
		return ok(promql.ClusterHealth{Window: w, Cluster: cluster, Panels: []promql.Panel{},
			Verdict:  promql.Verdict{Level: promql.LevelNoData, Message: "no Prometheus is configured"},
			Warnings: []string{"no Prometheus is configured: the cluster health tab is not measured"}}), nil
	}
	h := s.Health.ClusterHealth(c.Request.Context(), w, c.Param("namespace"), cluster)
	s.gcsLog(c, r.objects, r.kind, cur, &sum, cluster, &h)
	return ok(h), nil
}

// gcsLog answers the GCS event pressure panel from gcs_server.out where Prometheus had nothing: read
// through the cluster's Ray dashboard, for a caller who may proxy to its services (as the dashboard
// route asks), from the head pod the cache holds.
func (s *Server) gcsLog(c *gin.Context, r Objects, k *ray.Kind, cur *k8s.Current, sum *ray.Summary, cluster string, h *promql.ClusterHealth) {
	if !h.GCSWanting() || s.Dashboards == nil || cur.Instance == nil {
		return
	}
	ctx, ns := c.Request.Context(), c.Param("namespace")
	allowed, err := s.Authz.Allowed(ctx, token(c), auth.Attributes{Verb: "get", Resource: "services", Subresource: "proxy", Namespace: ns})
	switch {
	case err != nil:
		h.NoGCSLog("the caller's right to proxy services could not be reviewed: " + err.Error())
		return
	case !allowed:
		h.NoGCSLog(fmt.Sprintf("the caller may not get services/proxy in namespace %q", ns))
		return
	}
	ip := ""
	for _, p := range s.Store.CachedPods(k, sum) {
		if p.NodeType == "head" && p.Cluster == cluster && p.IP != "" && p.Phase == "Running" {
			ip = p.IP
		}
	}
	addr := s.Dashboards.Address(k, cur.Instance, sum)
	if ip == "" || addr == "" {
		h.NoGCSLog("the cluster has no running head pod")
		return
	}
	// A token-mode cluster's log API takes its token, as the caller may read it.
	rayToken, err := r.DashboardToken(ctx, cur.Instance)
	if err != nil {
		h.NoGCSLog("its Ray dashboard takes a token the caller cannot send: " + err.Error())
		return
	}
	prints, err := s.Dashboards.GCSEventStats(ctx, addr, ip, rayToken)
	if tokenErr := k.TokenRequired(cur.Instance); errors.Is(err, ray.ErrTokenRequired) && tokenErr != nil {
		h.NoGCSLog(tokenErr.Error())
		return
	}
	if err != nil {
		logger(c).Info("reading gcs_server.out", zap.String("address", addr), zap.Error(err))
		h.NoGCSLog(err.Error())
		return
	}
	h.WithGCSLog(prints)
}

// overviewInterval is the least time between two OVERVIEW events of a stream.
const overviewInterval = time.Second

// watchOverview streams the overview's counts and allocated totals.
//
//	@Summary		Watch the overview
//	@ID				watchOverview
//	@Description	Server-Sent Events: OVERVIEW with the overview's counts and allocated totals (as the overview
//	@Description	computes them, from the watch cache) at once, then whenever they change, at most once a second.
//	@Description	Each event is the whole state, so a reconnection needs no resumption. Rights are checked again
//	@Description	at the verdict cache's TTL; a caller who may no longer list Ray clusters in the namespace gets
//	@Description	ERROR and the stream ends. Heartbeats, bounds and ends as for list streams.
//	@Tags			streams
//	@Produce		text/event-stream
//	@Produce		json
//	@Security		Bearer
//	@Param			namespace			query		string			false	"only this namespace"
//	@Success		200					{object}	OverviewLive	"a stream of OVERVIEW events, each with this data"
//	@Failure		400,401,403,429,503	{object}	Envelope
//	@Router			/rest/ray/v1/overview/watch [get]
func (s *Server) watchOverview(c *gin.Context) (*response, error) {
	ns, err := namespaceQuery(c)
	if err != nil {
		return nil, err
	}
	scopes, err := s.rules.Overview(c.Request.Context(), token(c), ns)
	if err != nil {
		return nil, err
	}
	figures := func(scopes map[*ray.Kind]cache.Scopes) any {
		counts, alloc, pending := s.countsIn(scopes)
		return OverviewLive{Counts: counts, Allocated: alloc, Pending: pending}
	}
	return nil, s.streams.Overview(s.streamRequest(c), ns, scopes, overviewInterval, figures)
}
