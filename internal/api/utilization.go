package api

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/gin-gonic/gin"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"ray-service/internal/access"
	"ray-service/internal/auth"
	"ray-service/internal/promql"
	"ray-service/internal/ray"
	"ray-service/internal/usage"
)

// Utilization reads the utilization accounting's daily figures (history.Store).
type Utilization interface {
	Utilization(ctx context.Context, q usage.Query) (usage.Result, error)
	UsageNamespaces(ctx context.Context) ([]string, error)
}

// Quotas reads the ResourceQuotas of namespaces, by namespace (k8s.Quotas).
type Quotas interface {
	Quotas(ctx context.Context, namespaces []string) (map[string][]usage.QuotaFigure, error)
}

// defaultUtilizationDays is the window of a report asked for without from: the last seven UTC days,
// today included.
const defaultUtilizationDays = 7

// maxUtilizationDays bounds a report's window.
const maxUtilizationDays = 400

// csvContentType is the content type of a report as CSV.
const csvContentType = "text/csv; charset=utf-8"

// utilization reports who held and who used the Ray clusters' resources, over whole UTC days.
//
//	@Summary		Utilization
//	@ID				getUtilization
//	@Description	Allocated and used resource-hours of the Ray clusters, by group (groupBy: namespace, creator, kind or
//	@Description	cluster) between from and to (RFC 3339 or Unix seconds; default the last seven UTC days, today included).
//	@Description	The figures are kept per UTC day, so the window is widened to whole days: the answer's from and to say
//	@Description	which. Allocated hours are each Ray cluster's requests (head and every worker replica) times the time
//	@Description	it was Pending or Running, counted to the object that made it (a RayJob or RayService, where the
//	@Description	cluster's owner reference to its UID backs KubeRay's labels, from when that object's status names the
//	@Description	cluster; a RayService's cluster an upgrade replaced stays the RayService's until KubeRay deletes it) and
//	@Description	that object's creator; they are kept after the objects are gone. Only a creator the service signed (a
//	@Description	create made through it) is billed: one written by anyone who may edit the object is shown as an empty
//	@Description	creator (unverified). A RayJob a RayCronJob's schedule made is billed to the RayCronJob's signed creator
//	@Description	where its owner reference, label and tick match that RayCronJob, it was made at that tick (up to two
//	@Description	minutes after), status.lastScheduleTime has reached it, and no other RayJob claims, or claimed, the same tick,
//	@Description	nor was made for an earlier tick after it (KubeRay runs none of the ticks it passes over).
//	@Description	Used hours are what its pods used, read
//	@Description	from Prometheus (cAdvisor, DCGM, npu-exporter) by the service as the days go: measured shows how much
//	@Description	of the window was, and where none was the used figures are null with a warning. Idle hours are those a
//	@Description	cluster holding GPUs or NPUs spent idle, as the idle detection judges it. GPUs and NPUs are counted in
//	@Description	device equivalents (a vNPU slice as its AI cores over its chip's, a MIG instance as its compute slices
//	@Description	over its GPU's, a shared GPU's replica as one over its replicas, a device allocated through a resource
//	@Description	claim as the device it is); accelerators gives beside them, per resource and model, the raw unit-hours
//	@Description	and the device-hours, which sum to the GPU- and NPU-hours. Objects counts the Ray
//	@Description	clusters that held anything in the window, runs the times one began to; share is a row's part of the
//	@Description	whole (every group the caller may see). Grouped by namespace, each row carries the namespace's
//	@Description	ResourceQuotas for CPU, memory, GPUs and NPUs (whole, sliced, shared, and DRA's per device class:
//	@Description	<class>.deviceclass.resource.k8s.io/devices), where the caller may list ResourceQuotas there. A caller sees only the namespaces where it may list
//	@Description	the kind counted (RayClusters, RayJobs, RayServices). Accept: text/csv answers the rows as CSV (all of
//	@Description	them unless page or pageSize is given). 503 when the service runs without a history database.
//	@Tags			utilization
//	@Produce		json
//	@Produce		text/csv
//	@Security		Bearer
//	@Param			from				query		string	false	"start: RFC 3339 or Unix seconds (its UTC day)"
//	@Param			to					query		string	false	"end: RFC 3339 or Unix seconds (to the end of its UTC day); default now"
//	@Param			groupBy				query		string	false	"grouping"	Enums(namespace, creator, kind, cluster)	default(namespace)
//	@Param			namespace			query		string	false	"only this namespace"
//	@Param			kind				query		string	false	"only these kinds, comma-separated"
//	@Param			creator				query		string	false	"only these creators, comma-separated"
//	@Param			sortBy				query		string	false	"sort key; ties by name, ascending (by cluster: namespace, then cluster, then UID)"	Enums(name, cpuCoreHours, memoryGiBHours, gpuHours, npuHours, heldHours, idleHours, idleAcceleratorHours, usedCpuCoreHours, usedMemoryGiBHours, usedGpuHours, usedNpuHours, objects, runs)	default(cpuCoreHours)
//	@Param			order				query		string	false	"sort order"		Enums(asc, desc)																																											default(desc)
//	@Param			page				query		int		false	"page, from 1"		default(1)
//	@Param			pageSize			query		int		false	"items per page"	default(20)	maximum(500)
//	@Success		200					{object}	Envelope{data=usage.Report}
//	@Failure		400,401,403,406,503	{object}	Envelope
//	@Router			/rest/ray/v1/utilization [get]
func (s *Server) utilization(c *gin.Context) (*response, error) {
	ns, err := namespaceQuery(c)
	if err != nil {
		return nil, err
	}
	return s.utilizationIn(c, ns)
}

// namespacedUtilization is the report of one namespace.
//
//	@Summary		Utilization of a namespace
//	@ID				getNamespacedUtilization
//	@Description	The utilization report (see GET /rest/ray/v1/utilization) of one namespace: 403 where the caller may
//	@Description	list none of the kinds counted there.
//	@Tags			utilization
//	@Produce		json
//	@Produce		text/csv
//	@Security		Bearer
//	@Param			namespace			path		string	true	"namespace"
//	@Param			from				query		string	false	"start: RFC 3339 or Unix seconds (its UTC day)"
//	@Param			to					query		string	false	"end: RFC 3339 or Unix seconds (to the end of its UTC day); default now"
//	@Param			groupBy				query		string	false	"grouping"	Enums(namespace, creator, kind, cluster)	default(namespace)
//	@Param			kind				query		string	false	"only these kinds, comma-separated"
//	@Param			creator				query		string	false	"only these creators, comma-separated"
//	@Param			sortBy				query		string	false	"sort key; ties by name, ascending (by cluster: namespace, then cluster, then UID)"	Enums(name, cpuCoreHours, memoryGiBHours, gpuHours, npuHours, heldHours, idleHours, idleAcceleratorHours, usedCpuCoreHours, usedMemoryGiBHours, usedGpuHours, usedNpuHours, objects, runs)	default(cpuCoreHours)
//	@Param			order				query		string	false	"sort order"		Enums(asc, desc)																																											default(desc)
//	@Param			page				query		int		false	"page, from 1"		default(1)
//	@Param			pageSize			query		int		false	"items per page"	default(20)	maximum(500)
//	@Success		200					{object}	Envelope{data=usage.Report}
//	@Failure		400,401,403,406,503	{object}	Envelope
//	@Router			/rest/ray/v1/namespaces/{namespace}/utilization [get]
func (s *Server) namespacedUtilization(c *gin.Context) (*response, error) {
	ns := c.Param("namespace")
	if p := namespaceProblem(ns); p != "" {
		return nil, badRequest("namespace %q: %s", ns, p)
	}
	return s.utilizationIn(c, ns)
}

// wantsCSV tells whether the caller asks for CSV; an Accept naming neither JSON nor CSV is 406.
func wantsCSV(c *gin.Context) (bool, error) {
	accept := c.GetHeader("Accept")
	if accept == "" {
		return false, nil
	}
	switch c.NegotiateFormat(gin.MIMEJSON, "text/csv") {
	case "text/csv":
		return true, nil
	case gin.MIMEJSON:
		return false, nil
	}
	return false, statusError(http.StatusNotAcceptable, metav1.StatusReasonNotAcceptable,
		"Accept "+accept+": this route answers application/json or text/csv")
}

func (s *Server) utilizationIn(c *gin.Context, ns string) (*response, error) {
	if s.Utilization == nil {
		return nil, statusError(http.StatusServiceUnavailable, metav1.StatusReasonServiceUnavailable,
			"the utilization is off: the service runs without a history database (history-dsn)")
	}
	csv, err := wantsCSV(c)
	if err != nil {
		return nil, err
	}
	now := time.Now().UTC()
	q, err := utilizationQuery(c, now)
	if err != nil {
		return nil, err
	}
	sortBy := c.DefaultQuery("sortBy", "cpuCoreHours")
	if !slices.Contains(usage.SortKeys, sortBy) {
		return nil, badRequest("sortBy %q: want one of %s", sortBy, strings.Join(usage.SortKeys, ", "))
	}
	desc, err := descParam(c)
	if err != nil {
		return nil, err
	}
	order := "asc"
	if desc {
		order = "desc"
	}
	page, pageSize, err := pageParams(c)
	if err != nil {
		return nil, err
	}
	if csv && c.Query("page") == "" && c.Query("pageSize") == "" {
		pageSize = 0 // every row
	}
	kinds, err := s.utilizationKinds(c.Query("kind"))
	if err != nil {
		return nil, err
	}
	ctx := c.Request.Context()
	candidates, err := s.Utilization.UsageNamespaces(ctx)
	if err != nil {
		return nil, err
	}
	// A kind is counted in the namespaces where the caller may list it now.
	q.Scopes = map[string][]string{}
	anywhere := false
	for _, k := range kinds {
		scope, err := s.Authz.Scope(ctx, token(c), auth.Attributes{Verb: "list", Group: ray.RayGroupVersion.Group, Resource: k.Resource,
			Namespace: ns}, candidates)
		if err != nil {
			return nil, err
		}
		switch {
		case scope.IsAll() && ns == "":
			q.Scopes[k.Kind] = nil
		case scope.IsAll():
			q.Scopes[k.Kind] = []string{ns}
		default:
			q.Scopes[k.Kind] = slices.Clone(scope.List())
		}
		anywhere = anywhere || !scope.IsEmpty()
	}
	if ns != "" && !anywhere {
		return nil, access.Forbidden(s.Kinds.Cluster(), "list", ns)
	}
	if q.GroupBy == usage.ByCluster {
		// The database sorts and pages the clusters, and reads those on the page alone whole (CSV, every
		// row: every cluster summed, without its days).
		q.Page = &usage.Page{SortBy: sortBy, Desc: desc, Offset: (page - 1) * pageSize, Limit: pageSize}
	}
	res, err := s.Utilization.Utilization(ctx, q)
	if err != nil {
		return nil, err
	}
	rep := usage.Build(q, res, sortBy, order, page, pageSize)
	if q.GroupBy == usage.ByNamespace && s.Quotas != nil && len(rep.Items) > 0 {
		names := make([]string, len(rep.Items))
		for i := range rep.Items {
			names[i] = rep.Items[i].Namespace
		}
		// The quotas are read with the service's identity: a row carries them only where the caller may
		// list ResourceQuotas itself.
		readable, err := s.Authz.Scope(ctx, token(c), auth.Attributes{Verb: "list", Resource: "resourcequotas", Namespace: ns}, names)
		if err != nil {
			return nil, err
		}
		names = slices.DeleteFunc(names, func(n string) bool { return !readable.Contains(n) })
		quotas, err := s.Quotas.Quotas(ctx, names)
		if err != nil {
			rep.Warnings = append(rep.Warnings, "the namespaces' ResourceQuotas could not be read: "+err.Error())
		}
		for i := range rep.Items {
			rep.Items[i].Quota = quotas[rep.Items[i].Namespace]
		}
	}
	if s.Usage == nil {
		rep.Warnings = append(rep.Warnings, "the service reads no Prometheus (prometheus-url): no use is measured")
	}
	if csv {
		return &response{code: http.StatusOK, contentType: csvContentType, body: usage.CSV(rep)}, nil
	}
	return ok(rep), nil
}

// utilizationKinds are the kinds a report counts: those named (by kind or resource), else the kinds
// that hold Ray clusters (RayCluster, RayJob, RayService).
func (s *Server) utilizationKinds(v string) ([]*ray.Kind, error) {
	var out []*ray.Kind
	for _, k := range s.Kinds.All() {
		if k.Runs == nil {
			out = append(out, k)
		}
	}
	names := splitList(v)
	if len(names) == 0 {
		return out, nil
	}
	var picked []*ray.Kind
	for _, n := range names {
		i := slices.IndexFunc(out, func(k *ray.Kind) bool { return strings.EqualFold(n, k.Kind) || n == k.Resource })
		if i < 0 {
			kinds := make([]string, len(out))
			for j, k := range out {
				kinds[j] = k.Kind
			}
			return nil, badRequest("kind %q: want one of %s", n, strings.Join(kinds, ", "))
		}
		if !slices.Contains(picked, out[i]) {
			picked = append(picked, out[i])
		}
	}
	return picked, nil
}

// utilizationQuery reads the window (whole UTC days), the grouping and the creators asked for.
func utilizationQuery(c *gin.Context, now time.Time) (usage.Query, error) {
	q := usage.Query{GroupBy: c.DefaultQuery("groupBy", usage.ByNamespace), Creators: splitList(c.Query("creator")), Now: now}
	if !slices.Contains(usage.GroupBys, q.GroupBy) {
		return q, badRequest("groupBy %q: want one of %s", q.GroupBy, strings.Join(usage.GroupBys, ", "))
	}
	to := now
	if v := c.Query("to"); v != "" {
		t, err := promql.ParseTime("to", v)
		if err != nil {
			return q, badRequest("%v", err)
		}
		to = t
	}
	// Days back on the UTC calendar: on the local one, a change of summer time within the week moves
	// the start an hour, into the UTC day before.
	from := time.Unix(usage.DayOf(to), 0).UTC().AddDate(0, 0, -(defaultUtilizationDays - 1))
	if v := c.Query("from"); v != "" {
		t, err := promql.ParseTime("from", v)
		if err != nil {
			return q, badRequest("%v", err)
		}
		from = t
	}
	q.From = time.Unix(usage.DayOf(from), 0).UTC()
	q.To = time.Unix(usage.DayOf(to), 0).UTC()
	if to.After(q.To) {
		q.To = q.To.Add(24 * time.Hour)
	}
	switch {
	case !q.To.After(q.From):
		return q, badRequest("from %s and to %s: want from before to", from.Format(time.RFC3339), to.Format(time.RFC3339))
	case q.To.Sub(q.From) > maxUtilizationDays*24*time.Hour:
		return q, badRequest("from %s and to %s: want at most %d days", from.Format(time.RFC3339), to.Format(time.RFC3339), maxUtilizationDays)
	}
	return q, nil
}
