package api

import (
	"fmt"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	utilrand "k8s.io/apimachinery/pkg/util/rand"

	"ray-service/internal/ray"
)

// runKind is the kind of the runs the path's object makes, 404 for a kind that makes none.
func (s *Server) runKind(k *ray.Kind) (*ray.Kind, error) {
	if k.Runs != nil {
		if rk, ok := s.Kinds.Lookup(k.Runs.Resource); ok {
			return rk, nil
		}
	}
	return nil, statusError(http.StatusNotFound, metav1.StatusReasonNotFound, fmt.Sprintf("a %s makes no runs", k.Kind))
}

// runs lists the runs an object made: a RayCronJob's RayJobs.
//
//	@Summary		Runs
//	@ID				listObjectRuns
//	@Description	The runs a RayCronJob made (its RayJobs, labelled ray.io/cronjob-name by the operator or by
//	@Description	run now), newest first, answered as the RayJob list answers: its filters, sort and pages, from
//	@Description	the watch cache, 403 where the caller may not list RayJobs. Each item names its RayJob, whose
//	@Description	detail, logs and history record are the RayJob routes'. 404 for a kind that makes no runs.
//	@Tags			resources
//	@Produce		json
//	@Security		Bearer
//	@Param			namespace			path		string	true	"namespace"
//	@Param			kind				path		string	true	"kind"	Enums(raycronjobs)
//	@Param			name				path		string	true	"name"
//	@Param			search				query		string	false	"case-insensitive substring of the name"
//	@Param			status				query		string	false	"normalized status, comma-separated"
//	@Param			health				query		string	false	"health state, comma-separated (Healthy, Progressing, Degraded, Failed, Stopped)"
//	@Param			sortBy				query		string	false	"sort key"			Enums(name, createdAt, status, rayVersion)	default(createdAt)
//	@Param			order				query		string	false	"sort order"		Enums(asc, desc)							default(desc)
//	@Param			page				query		int		false	"page, from 1"		default(1)
//	@Param			pageSize			query		int		false	"items per page"	default(20)	maximum(500)
//	@Success		200					{object}	Envelope{data=Page[ray.Summary]}
//	@Failure		400,401,403,404,503	{object}	Envelope
//	@Router			/rest/ray/v1/namespaces/{namespace}/{kind}/{name}/runs [get]
func (s *Server) runs(c *gin.Context) (*response, error) {
	k := req(c).kind
	// The caller's right to list the kind there is asked first: who may not is told no more.
	if _, err := s.rules.Visible(c.Request.Context(), token(c), k, c.Param("namespace"), false); err != nil {
		return nil, err
	}
	rk, err := s.runKind(k)
	if err != nil {
		return nil, err
	}
	q, err := parseListQuery(c)
	if err != nil {
		return nil, err
	}
	of, err := labels.NewRequirement(k.Runs.Label, selection.Equals, []string{c.Param("name")})
	if err != nil {
		return nil, badRequest("name %q: %v", c.Param("name"), err)
	}
	if q.Labels == nil {
		q.Labels = labels.NewSelector()
	}
	q.Labels, q.Type = q.Labels.Add(*of), ray.TypeInstance
	return s.answerList(c, rk, q)
}

// runNow makes one run now.
//
//	@Summary		Run now
//	@ID				runObjectNow
//	@Description	Makes one run of a RayCronJob now, as the caller: a RayJob from its job template, named,
//	@Description	labelled, annotated and owned as the operator makes its scheduled runs (so it is listed among
//	@Description	its runs and deleted with it), whether or not the RayCronJob is suspended. Needs the rights to
//	@Description	get the RayCronJob and to create RayJobs. Answers the run's detail (201). On KubeRay v1.7 (the
//	@Description	installed CRD declares spec.timeZone) the run is named as v1.7 names its runs,
//	@Description	<name>-<minutes since 1970 UTC>, so a RayCronJob makes at most one run a minute: a second run
//	@Description	in the same minute, or one at the minute of a tick the operator has run, is 409; on v1.6,
//	@Description	<name>-<5 random characters>. A RayCronJob being deleted makes no run (409).
//	@Tags			lifecycle
//	@Produce		json
//	@Security		Bearer
//	@Param			namespace					path		string	true	"namespace"
//	@Param			kind						path		string	true	"kind"	Enums(raycronjobs)
//	@Param			name						path		string	true	"name"
//	@Success		201							{object}	Envelope{data=Detail}
//	@Failure		400,401,403,404,409,422,503	{object}	Envelope
//	@Router			/rest/ray/v1/namespaces/{namespace}/{kind}/{name}/run [post]
func (s *Server) runNow(c *gin.Context) (*response, error) {
	r := req(c)
	ctx := c.Request.Context()
	cur, err := r.objects.Resolve(ctx, c.Param("namespace"), c.Param("name")) // as the caller: 403 first
	if err != nil {
		return nil, err
	}
	rk, err := s.runKind(r.kind)
	if err != nil {
		return nil, err
	}
	if cur.Instance == nil {
		return nil, statusError(http.StatusConflict, metav1.StatusReasonConflict,
			fmt.Sprintf("%s %s/%s is a template: start it first", r.kind.Kind, c.Param("namespace"), c.Param("name")))
	}
	if cur.Instance.GetDeletionTimestamp() != nil { // its runs go with it: none is made of what goes
		return nil, statusError(http.StatusConflict, metav1.StatusReasonConflict,
			fmt.Sprintf("%s %s/%s is being deleted", r.kind.Kind, c.Param("namespace"), c.Param("name")))
	}
	run := r.kind.NewRun(cur.Instance, time.Now(), utilrand.String(5))
	runs, err := s.Objects(rk, token(c))
	if err != nil {
		return nil, err
	}
	d, err := s.writePath(c, &request{kind: rk, objects: runs}).Run(ctx, run, r.kind.Kind+" "+c.Param("name"))
	if err != nil {
		return nil, err
	}
	return withCode(http.StatusCreated, d), nil
}
