package api

import (
	"strconv"
	"strings"
	"time"

	"github.com/gin-gonic/gin"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"

	"ray-service/internal/cache"
	"ray-service/internal/history"
	"ray-service/internal/promql"
	"ray-service/internal/ray"
)

// checkPathNames refuses, before any access review or Kubernetes call, a namespace that is no
// namespace name and an object name that is no Kubernetes object name ("" where the path has none).
func checkPathNames(ns, name string) error {
	if p := namespaceProblem(ns); p != "" {
		return badRequest("namespace %q in the path is not a namespace name: %s", ns, p)
	}
	if p := nameProblem(name); p != "" {
		return badRequest("name %q in the path is not a Kubernetes object name: %s", name, p)
	}
	return nil
}

// namespaceQuery reads the optional namespace query parameter, refusing what is no namespace name.
func namespaceQuery(c *gin.Context) (string, error) {
	ns := c.Query("namespace")
	if p := namespaceProblem(ns); p != "" {
		return "", badRequest("namespace %q is not a namespace name: %s", ns, p)
	}
	return ns, nil
}

// namespaceProblem says what makes ns no namespace name, "" when it is one or empty.
func namespaceProblem(ns string) string {
	if ns == "" {
		return ""
	}
	return strings.Join(validation.IsDNS1123Label(ns), "; ")
}

// nameProblem says what makes name no Kubernetes object name, "" when it is one or empty.
func nameProblem(name string) string {
	if name == "" {
		return ""
	}
	return strings.Join(validation.IsDNS1123Subdomain(name), "; ")
}

// parseListQuery reads and checks the list parameters.
func parseListQuery(c *gin.Context) (*cache.Query, error) {
	q := &cache.Query{Search: c.Query("search"), SortBy: cache.SortByCreatedAt, Desc: true, Page: 1, PageSize: 20}
	q.Statuses = splitList(c.Query("status"))
	q.RayVersions = splitList(c.Query("rayVersion"))
	q.Creators = splitList(c.Query("creator"))
	q.Healths = splitList(c.Query("health"))
	for _, h := range q.Healths {
		switch h {
		case ray.HealthHealthy, ray.HealthProgressing, ray.HealthDegraded, ray.HealthFailed, ray.HealthStopped:
		default:
			return nil, badRequest("health %q: want Healthy, Progressing, Degraded, Failed or Stopped", h)
		}
	}
	q.LastOutcomes = splitList(c.Query("lastOutcome"))
	for _, o := range q.LastOutcomes {
		switch o {
		case ray.StatusSucceeded, ray.StatusFailed, ray.OutcomeNone:
		default:
			return nil, badRequest("lastOutcome %q: want Succeeded, Failed or none", o)
		}
	}
	if c.Query("idle") != "" {
		idle, err := boolParam(c, "idle")
		if err != nil {
			return nil, err
		}
		q.Idle = &idle
	}
	switch t := c.Query("type"); t {
	case "", ray.TypeInstance, ray.TypeTemplate:
		q.Type = t
	default:
		return nil, badRequest("type %q: want instance or template", t)
	}
	switch by := c.Query("sortBy"); by {
	case "":
	case cache.SortByName, cache.SortByCreatedAt, cache.SortByStatus, cache.SortByRayVersion:
		q.SortBy = by
	default:
		return nil, badRequest("sortBy %q: want name, createdAt, status or rayVersion", by)
	}
	var err error
	if q.Desc, err = descParam(c); err != nil {
		return nil, err
	}
	if q.Page, q.PageSize, err = pageParams(c); err != nil {
		return nil, err
	}
	if sel := c.Query("labelSelector"); sel != "" {
		if q.Labels, err = labels.Parse(sel); err != nil {
			return nil, badRequest("labelSelector: %v", err)
		}
	}
	return q, nil
}

// descParam reads order: desc (the default) or asc.
func descParam(c *gin.Context) (bool, error) {
	switch o := c.Query("order"); o {
	case "", "desc":
		return true, nil
	case "asc":
		return false, nil
	default:
		return false, badRequest("order %q: want asc or desc", o)
	}
}

// pageParams reads page (from 1) and pageSize (20 by default, at most 500), as every list pages.
func pageParams(c *gin.Context) (page, size int, err error) {
	if page, err = intParam(c, "page", 1, 1, 1<<30); err != nil {
		return 0, 0, err
	}
	size, err = intParam(c, "pageSize", 20, 1, 500)
	return page, size, err
}

func splitList(v string) []string {
	var out []string
	for p := range strings.SplitSeq(v, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

func intParam(c *gin.Context, name string, def, lo, hi int) (int, error) {
	v := c.Query(name)
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < lo || n > hi {
		return 0, badRequest("%s %q: want a whole number from %d to %d", name, v, lo, hi)
	}
	return n, nil
}

func boolParam(c *gin.Context, name string) (bool, error) {
	v := c.Query(name)
	if v == "" {
		return false, nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return false, badRequest("%s %q: want true or false", name, v)
	}
	return b, nil
}

func logOptions(c *gin.Context) (*corev1.PodLogOptions, error) {
	opts := &corev1.PodLogOptions{}
	var err error
	if opts.Follow, err = boolParam(c, "follow"); err != nil {
		return nil, err
	}
	if opts.Previous, err = boolParam(c, "previous"); err != nil {
		return nil, err
	}
	tail, err := intParam(c, "tailLines", DefaultTailLines, 0, MaxTailLines)
	if err != nil {
		return nil, err
	}
	t := int64(tail)
	opts.TailLines = &t
	if v := c.Query("sinceSeconds"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 1 {
			return nil, badRequest("sinceSeconds %q: want a whole number of seconds from 1", v)
		}
		opts.SinceSeconds = &n
	}
	limit := int64(MaxLimitBytes)
	if v := c.Query("limitBytes"); v != "" {
		n, err := intParam(c, "limitBytes", 0, 1, MaxLimitBytes)
		if err != nil {
			return nil, err
		}
		limit = int64(n)
		opts.LimitBytes = &limit
	} else if !opts.Follow {
		opts.LimitBytes = &limit
	}
	return opts, nil
}

func parseHistoryQuery(c *gin.Context, k *ray.Kind) (history.Query, error) {
	var err error
	q := history.Query{Kind: k.Kind, Search: c.Query("search"), Statuses: splitList(c.Query("status")),
		Creators: splitList(c.Query("creator")), SortBy: c.DefaultQuery("sortBy", "createdAt")}
	switch q.SortBy {
	case "name", "createdAt", "finishedAt", "status":
	default:
		return q, badRequest("sortBy %q: want name, createdAt, finishedAt or status", q.SortBy)
	}
	if q.Desc, err = descParam(c); err != nil {
		return q, err
	}
	for _, b := range []struct {
		name string
		to   **time.Time
	}{{"finishedAfter", &q.FinishedAfter}, {"finishedBefore", &q.FinishedBefore}} {
		if v := c.Query(b.name); v != "" {
			t, err := time.Parse(time.RFC3339, v)
			if err != nil {
				return q, badRequest("%s %q: want an RFC 3339 time such as 2026-12-01T10:00:00Z", b.name, v)
			}
			*b.to = &t
		}
	}
	q.Page, q.PageSize, err = pageParams(c)
	return q, err
}

// windowAndNamespace reads the window of the overview's figures (range, or start, end and step) and
// the optional namespace.
func windowAndNamespace(c *gin.Context) (promql.Window, string, error) {
	w, err := promql.ParseWindow(c.Query("range"), c.Query("start"), c.Query("end"), c.Query("step"), time.Now())
	if err != nil {
		return w, "", badRequest("%v", err)
	}
	ns, err := namespaceQuery(c)
	return w, ns, err
}
