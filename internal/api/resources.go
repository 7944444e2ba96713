package api

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"
	"go.uber.org/zap"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"ray-service/internal/auth"
	"ray-service/internal/cache"
	"ray-service/internal/k8s"
	"ray-service/internal/ray"
	"ray-service/internal/stream"
)

// Page is the data of every paged answer: a list, the history, the audit trail. Total counts what
// matched, not what the page holds.
type Page[T any] struct {
	Items    []T `json:"items"`
	Total    int `json:"total" example:"42"`
	Page     int `json:"page" example:"1"`
	PageSize int `json:"pageSize" example:"20"`
}

// Detail is the data of a detail response: the summary, the conditions, the path of the Ray dashboard
// proxy, the recent events and the whole object.
type Detail struct {
	ray.Summary
	Conditions []any `json:"conditions"`
	// Problems are what holds the object back, each with the pod or object it was seen on: the first 32,
	// their reasons cut to 128 bytes and their messages to 1024; those read from pods or Warning events
	// only for a caller who may list them in the namespace.
	Problems []ray.Problem `json:"problems"`
	// DashboardURL is where the proxy serves the Ray dashboard: on the dashboards' own origin
	// (dashboard-origin, else the request's host with dashboard-listen's port), a path on the API's
	// origin only where it has none.
	DashboardURL string          `json:"dashboardURL,omitempty" example:"https://ray-dashboards.example.com/rest/ray/v1/namespaces/default/rayclusters/demo/dashboard/"`
	Events       []ray.EventInfo `json:"events"`
	Object       objectJSON      `json:"object" swaggertype:"object"`
	// Queued is on a start's answer only: the start put the object in its queue manager's queue (the
	// label kueue.x-k8s.io/queue-name or volcano.sh/queue-name), and it runs once admitted.
	Queued *ray.Queued `json:"queued,omitempty"`
}

// objectJSON is the whole object of a detail: encoded with the answer, or already encoded once by the
// watch cache for every detail of the version it keeps.
type objectJSON struct {
	object  map[string]any
	encoded []byte
}

func (o objectJSON) MarshalJSON() ([]byte, error) {
	if o.encoded != nil {
		return o.encoded, nil
	}
	return json.Marshal(o.object)
}

// withoutManagedFields is object without metadata.managedFields, sharing all else with it.
func withoutManagedFields(object map[string]any) map[string]any {
	meta, _ := object["metadata"].(map[string]any)
	if _, managed := meta["managedFields"]; !managed {
		return object
	}
	out, trimmed := maps.Clone(object), maps.Clone(meta)
	delete(trimmed, "managedFields")
	out["metadata"] = trimmed
	return out
}

// RecentEvents is how many events a detail shows.
const RecentEvents = 20

// DeleteData names what was deleted.
type DeleteData struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	// Deleting: the object is still there, being deleted until the finalizers on it are done (KubeRay's,
	// on a RayJob, on a RayService from v1.6.2, on a RayCluster with GCS fault tolerance); its summary
	// shows deletingSince until it is gone.
	Deleting bool `json:"deleting"`
}

// listAll lists a kind across every namespace the caller may list it in.
//
//	@Summary		List across namespaces
//	@ID				listObjects
//	@Description	Lists RayClusters, RayJobs or RayServices in every namespace the caller may list them in
//	@Description	(others are left out, not refused). Served from the watch cache. Filters combine with AND;
//	@Description	status, rayVersion, creator and health take comma-separated values that combine with OR. Ties in
//	@Description	the sort order are broken by namespace, then name. Each item carries health (state Healthy,
//	@Description	Progressing, Degraded, Failed or Stopped, with the reason, message and time of what holds it back,
//	@Description	derived in the watch cache from its status, its pods and Warning events) and actions: what the
//	@Description	caller may do now (start, stop, delete, edit, scale, logs, dashboard), from the item's state by the
//	@Description	rules the routes follow and from the caller's rights in its namespace, each distinct permission of
//	@Description	the page reviewed once. An action named is not refused for a reason known beforehand. Watch events
//	@Description	carry health, not actions. The same page asked again by the same caller while nothing of the kind
//	@Description	and no RoleBinding changed is the same answer, for up to a second.
//	@Tags			resources
//	@Produce		json
//	@Security		Bearer
//	@Param			kind			path		string	true	"kind"	Enums(rayclusters, rayjobs, rayservices, raycronjobs)
//	@Param			search			query		string	false	"case-insensitive substring of the name"
//	@Param			status			query		string	false	"normalized status, comma-separated"
//	@Param			rayVersion		query		string	false	"Ray version, comma-separated"
//	@Param			creator			query		string	false	"creator user name, comma-separated"
//	@Param			health			query		string	false	"health state, comma-separated (Healthy, Progressing, Degraded, Failed, Stopped)"
//	@Param			lastOutcome		query		string	false	"kinds that make runs (raycronjobs): status of the newest run that ended, comma-separated (Succeeded, Failed, none)"
//	@Param			idle			query		bool	false	"true: only objects whose Ray cluster is idle (see idle in the summary); false: only those whose cluster is not"
//	@Param			type			query		string	false	"instance or template"	Enums(instance, template)
//	@Param			sortBy			query		string	false	"sort key"				Enums(name, createdAt, status, rayVersion)	default(createdAt)
//	@Param			order			query		string	false	"sort order"			Enums(asc, desc)							default(desc)
//	@Param			page			query		int		false	"page, from 1"			default(1)
//	@Param			pageSize		query		int		false	"items per page"		default(20)	maximum(500)
//	@Param			labelSelector	query		string	false	"Kubernetes label selector"
//	@Success		200				{object}	Envelope{data=Page[ray.Summary]}
//	@Failure		400,401,404,503	{object}	Envelope
//	@Router			/rest/ray/v1/{kind} [get]
func (s *Server) listAll(c *gin.Context) (*response, error) { return s.list(c) }

// list lists a kind in one namespace.
//
//	@Summary		List in a namespace
//	@ID				listNamespacedObjects
//	@Description	Same parameters and answer as the list across namespaces; 403 when the caller may not list
//	@Description	the kind in the namespace.
//	@Tags			resources
//	@Produce		json
//	@Security		Bearer
//	@Param			namespace			path		string	true	"namespace"
//	@Param			kind				path		string	true	"kind"	Enums(rayclusters, rayjobs, rayservices, raycronjobs)
//	@Param			search				query		string	false	"case-insensitive substring of the name"
//	@Param			status				query		string	false	"normalized status, comma-separated"
//	@Param			rayVersion			query		string	false	"Ray version, comma-separated"
//	@Param			creator				query		string	false	"creator user name, comma-separated"
//	@Param			health				query		string	false	"health state, comma-separated (Healthy, Progressing, Degraded, Failed, Stopped)"
//	@Param			lastOutcome			query		string	false	"kinds that make runs (raycronjobs): status of the newest run that ended, comma-separated (Succeeded, Failed, none)"
//	@Param			idle				query		bool	false	"true: only objects whose Ray cluster is idle (see idle in the summary); false: only those whose cluster is not"
//	@Param			type				query		string	false	"instance or template"	Enums(instance, template)
//	@Param			sortBy				query		string	false	"sort key"				Enums(name, createdAt, status, rayVersion)	default(createdAt)
//	@Param			order				query		string	false	"sort order"			Enums(asc, desc)							default(desc)
//	@Param			page				query		int		false	"page, from 1"			default(1)
//	@Param			pageSize			query		int		false	"items per page"		default(20)	maximum(500)
//	@Param			labelSelector		query		string	false	"Kubernetes label selector"
//	@Success		200					{object}	Envelope{data=Page[ray.Summary]}
//	@Failure		400,401,403,404,503	{object}	Envelope
//	@Router			/rest/ray/v1/namespaces/{namespace}/{kind} [get]
func (s *Server) list(c *gin.Context) (*response, error) {
	k := req(c).kind
	// The versions are read before the page is made: a change in between only makes the next ask miss.
	// Only a valid query's page is kept: a kept one needs no parsing.
	key := pageKey{caller: c.GetString(callerKey{}), kind: k, namespace: c.Param("namespace"), query: c.Request.URL.RawQuery}
	objects, rights, now := s.Store.Version(k), s.rightsVersion(), time.Now()
	if body, ok := s.pages.get(key, objects, rights, now); ok {
		return &response{code: http.StatusOK, contentType: jsonContentType, body: body}, nil
	}
	q, err := parseListQuery(c)
	if err != nil {
		return nil, err
	}
	res, err := s.answerList(c, k, q)
	if err == nil {
		s.pages.put(key, objects, rights, now, res.body)
	}
	return res, err
}

// answerList answers a list query of kind k in the path's namespace (all where it has none) from the
// watch cache, in the scopes the caller may see, each item with the caller's actions.
func (s *Server) answerList(c *gin.Context, k *ray.Kind, q *cache.Query) (*response, error) {
	scopes, err := s.rules.Visible(c.Request.Context(), token(c), k, c.Param("namespace"), q.Type != ray.TypeInstance)
	if err != nil {
		return nil, err
	}
	page, total := s.Store.List(k, scopes, q)
	sums := make([]*ray.Summary, len(page))
	for i, it := range page {
		sums[i] = &it.Summary
	}
	granted, err := s.rules.Granted(c.Request.Context(), token(c), k, sums)
	if err != nil {
		return nil, err
	}
	return listPage(k, page, granted, total, q.Page, q.PageSize)
}

// rightsVersion is the version of the callers' rights besides their verdicts (Deps.RightsVersion).
func (s *Server) rightsVersion() uint64 {
	if s.RightsVersion == nil {
		return 0
	}
	return s.RightsVersion()
}

// create creates an object from a JSON, YAML or uploaded manifest, as the caller.
//
//	@Summary		Create
//	@ID				createObject
//	@Description	Creates a RayCluster, RayJob, RayService or RayCronJob from one manifest: JSON, YAML, or a file uploaded
//	@Description	in multipart field "file". kind, apiVersion and metadata.namespace may be left out; when given
//	@Description	they must match the path. status, uid, resourceVersion and managedFields are ignored. Unknown
//	@Description	fields are refused (422). The creator's user name is recorded in annotation and label
//	@Description	ray.openfuyao.com/creator. With dryRun=true the apiserver validates and nothing is stored.
//	@Tags			resources
//	@Accept			json
//	@Accept			application/yaml
//	@Accept			multipart/form-data
//	@Produce		json
//	@Security		Bearer
//	@Param			namespace					path		string	true	"namespace"
//	@Param			kind						path		string	true	"kind"	Enums(rayclusters, rayjobs, rayservices, raycronjobs)
//	@Param			dryRun						query		bool	false	"validate only"
//	@Param			queue						query		string	false	"the queue to put it in: a Volcano Queue (open) or a Kueue LocalQueue of the namespace that the caller may read; set as the label its manager reads (volcano.sh/queue-name, kueue.x-k8s.io/queue-name). Not for RayCronJobs."
//	@Param			queueManager				query		string	false	"whose queue: needed only when both have one of that name"	Enums(volcano, kueue)
//	@Param			body						body		object	true	"the manifest: a JSON or YAML object, or a multipart/form-data body whose field file holds it (the OpenAPI 3 document lists the three media types)"
//	@Success		201							{object}	Envelope{data=Detail}
//	@Success		200							{object}	Envelope{data=Detail}	"dry run: what would be created"
//	@Failure		400,401,403,404,409,413,415	{object}	Envelope
//	@Failure		422							{object}	Envelope	"invalid: details name the fields"
//	@Failure		503,504						{object}	Envelope
//	@Router			/rest/ray/v1/namespaces/{namespace}/{kind} [post]
func (s *Server) create(c *gin.Context) (*response, error) {
	r := req(c)
	obj, dryRun, err := manifestRequest(c)
	if err != nil {
		return nil, err
	}
	start := true
	if c.Query("start") != "" {
		if start, err = boolParam(c, "start"); err != nil {
			return nil, err
		}
	}
	if err := s.intoQueue(c, r, obj); err != nil {
		return nil, err
	}
	d, err := s.writePath(c, r).Create(c.Request.Context(), obj, c.Param("namespace"), start, dryRun, "")
	if err != nil {
		return nil, err
	}
	if dryRun {
		return ok(d), nil
	}
	return withCode(http.StatusCreated, d), nil
}

// get shows one object: read from the apiserver as the caller, or from its second detail on, from the
// watch cache.
//
//	@Summary		Detail
//	@ID				getObject
//	@Description	The summary, the conditions and the whole object (without managedFields). The first detail of
//	@Description	an object reads it from the apiserver as the caller; from then on the watch cache keeps its
//	@Description	manifest current (the 1,024 objects shown last), and a detail of a RayCluster or a RayService is
//	@Description	served from it: the caller's right to get the object and to list events checked by access
//	@Description	review, its events from a watch of the namespace held for two minutes after its last detail.
//	@Tags			resources
//	@Produce		json
//	@Security		Bearer
//	@Param			namespace				path		string	true	"namespace"
//	@Param			kind					path		string	true	"kind"	Enums(rayclusters, rayjobs, rayservices, raycronjobs)
//	@Param			name					path		string	true	"name"
//	@Success		200						{object}	Envelope{data=Detail}
//	@Failure		400,401,403,404,503,504	{object}	Envelope
//	@Router			/rest/ray/v1/namespaces/{namespace}/{kind}/{name} [get]
func (s *Server) get(c *gin.Context) (*response, error) {
	r := req(c)
	if d, cached := s.cachedDetail(c, r); cached {
		s.HTTP.Details.WithLabelValues("cache").Inc()
		return ok(d), nil
	}
	if err := s.callerObjects(c); err != nil {
		return nil, err
	}
	writes := s.Store.ManifestWrites()
	// Events the caller may not list are left out of the detail, not refused.
	cur, events, err := r.objects.ResolveWithEvents(c.Request.Context(), c.Param("namespace"), c.Param("name"))
	if err != nil {
		return nil, err
	}
	d := s.detail(c, r, cur)
	if events != nil {
		d.Events = events[:min(len(events), RecentEvents)]
	}
	if cur.Instance != nil {
		s.Store.KeepManifest(r.kind, cur.Instance, writes)
	}
	s.HTTP.Details.WithLabelValues("apiserver").Inc()
	return ok(d), nil
}

// cachedDetail is the detail of an instance whose manifest the watch cache keeps, read without the
// apiserver: the caller's rights to get it and to list events in its namespace from access reviews
// (their verdicts cached as for lists), its events from the namespace's watch. It is not served (false)
// where the apiserver has the answer: an object not kept, a caller who may not get it (the apiserver
// says 403 or 404), events not watched yet, and a kind with a submitter (the cache holds Ray pods,
// not the submitter's pods, whose events a detail shows).
func (s *Server) cachedDetail(c *gin.Context, r *request) (Detail, bool) {
	k, ns, name := r.kind, c.Param("namespace"), c.Param("name")
	if k.HasSubmitter || s.DetailEvents == nil {
		return Detail{}, false
	}
	kept, ok := s.Store.Manifest(k, ns, name)
	if !ok {
		return Detail{}, false
	}
	verdicts, err := s.Authz.AllowedAll(c.Request.Context(), token(c), []auth.Attributes{
		{Verb: "get", Group: ray.RayGroupVersion.Group, Resource: k.Resource, Namespace: ns, Name: name},
		{Verb: "list", Resource: "events", Namespace: ns}})
	if err != nil || !verdicts[0] {
		return Detail{}, false
	}
	var events stream.NamespaceEvents
	if verdicts[1] {
		var watched bool
		if events, watched = s.DetailEvents(ns); !watched || !events.Synced() {
			return Detail{}, false
		}
	}
	encoded, err := kept.JSON()
	if err != nil {
		return Detail{}, false
	}
	d := s.detailOf(c, r, &k8s.Current{Instance: kept.Unstructured}, s.Store.SummarizeManifest(k, kept), objectJSON{encoded: encoded})
	if events != nil {
		var pods []string
		for _, p := range s.Store.CachedPods(k, &d.Summary) {
			pods = append(pods, p.Name)
		}
		all := events.Of(k, &d.Summary, pods)
		d.Events = all[:min(len(all), RecentEvents)]
	}
	return d, true
}

// resolve reads the object of the path as the caller: the instance, else its template.
func (s *Server) resolve(c *gin.Context) (*request, *k8s.Current, error) {
	r := req(c)
	cur, err := r.objects.Resolve(c.Request.Context(), c.Param("namespace"), c.Param("name"))
	if err != nil {
		return nil, nil, err
	}
	return r, cur, nil
}

// detail shows an instance or a template.
func (s *Server) detail(c *gin.Context, r *request, cur *k8s.Current) Detail {
	var object objectJSON
	if cur.Template != nil {
		object.object = cur.Template.DetailObject().Object
	} else {
		object.object = withoutManagedFields(cur.Instance.Object)
	}
	return s.detailOf(c, r, cur, r.objects.Summarize(cur), object)
}

// detailOf is the detail of what cur holds, summarized as sum, whose whole object is object.
func (s *Server) detailOf(c *gin.Context, r *request, cur *k8s.Current, sum ray.Summary, object objectJSON) Detail {
	d := Detail{Summary: sum, Conditions: []any{}, Events: []ray.EventInfo{}, Object: object}
	one := []ray.Summary{d.Summary}
	rights := s.rules.Ask(c.Request.Context(), token(c), r.kind)
	problems := rights.VisibleProblems(d.Namespace, d.Summary.Problems())
	if err := s.withActions(c.Request.Context(), token(c), r.kind, one); err != nil {
		// The answer stands (a write it follows is done): no action is named rather than a wrong one, and
		// nothing read from pods or events is shown.
		logger(c).Warn("reviewing the actions of a detail", zap.Error(err))
		one[0].Actions, problems = []string{}, []ray.Problem{}
		if one[0].Health.SeenOn() != "" {
			one[0].Health = one[0].Health.Withheld()
		}
	}
	d.Actions, d.Health, d.Problems = one[0].Actions, one[0].Health, problems
	if r.kind.AtAnswer != nil {
		r.kind.AtAnswer(&d.Summary, time.Now())
	}
	if cur.Template != nil {
		return d
	}
	obj := cur.Instance
	d.DashboardURL = s.proxy.Origin(c.Request) + dashboardPath(obj.GetNamespace(), r.kind.Resource, obj.GetName()) + "/"
	// Encoded, not changed: the object's own conditions serve.
	if conds, ok, _ := unstructured.NestedFieldNoCopy(obj.Object, "status", "conditions"); ok {
		if conds, ok := conds.([]any); ok {
			d.Conditions = conds
		}
	}
	return d
}

// replace replaces an object from a full manifest, as the caller.
//
//	@Summary		Replace
//	@ID				replaceObject
//	@Description	Replaces the object with a full manifest (JSON, YAML or uploaded file). The name and namespace
//	@Description	cannot change (400). The creator recorded at creation is kept. status is ignored. A manifest
//	@Description	without metadata.resourceVersion replaces unconditionally. One with an older resourceVersion (an
//	@Description	export edited while KubeRay wrote the object's status) is merged, part by part, with the object
//	@Description	as it is now: spec, labels, annotations, finalizers and owner references each whole. A part sent
//	@Description	as exported keeps its current value; a part the manifest changes is written where nobody else
//	@Description	changed it since that resourceVersion, and is 409 Conflict, naming the part, where someone did.
//	@Description	The export is read back at its resourceVersion while the apiserver keeps it (etcd compaction,
//	@Description	5 to 10 minutes by default); after that, a part counts as changed by someone else unless it is
//	@Description	the same now as sent, and the spec as unchanged when metadata.generation is the current one. An
//	@Description	object deleted and created again under its name (another uid) is 409.
//	@Tags			resources
//	@Accept			json
//	@Accept			application/yaml
//	@Accept			multipart/form-data
//	@Produce		json
//	@Security		Bearer
//	@Param			namespace					path		string	true	"namespace"
//	@Param			kind						path		string	true	"kind"	Enums(rayclusters, rayjobs, rayservices, raycronjobs)
//	@Param			name						path		string	true	"name"
//	@Param			dryRun						query		bool	false	"validate only"
//	@Param			body						body		object	true	"the manifest: a JSON or YAML object, or a multipart/form-data body whose field file holds it (the OpenAPI 3 document lists the three media types)"
//	@Success		200							{object}	Envelope{data=Detail}
//	@Failure		400,401,403,404,409,413,415	{object}	Envelope
//	@Failure		422							{object}	Envelope	"invalid: details name the fields"
//	@Failure		503,504						{object}	Envelope
//	@Router			/rest/ray/v1/namespaces/{namespace}/{kind}/{name} [put]
func (s *Server) replace(c *gin.Context) (*response, error) {
	r := req(c)
	obj, dryRun, err := manifestRequest(c)
	if err != nil {
		return nil, err
	}
	d, err := s.writePath(c, r).Replace(c.Request.Context(), obj, c.Param("namespace"), c.Param("name"), dryRun)
	if err != nil {
		return nil, err
	}
	return ok(d), nil
}

// delete deletes an object as the caller.
//
//	@Summary		Delete
//	@ID				deleteObject
//	@Description	Deletes the object, and any template of the name. The answer comes once the apiserver has
//	@Description	accepted the deletion: where finalizers hold the object (KubeRay's), it is still there, being
//	@Description	deleted (data.deleting true, the summary's deletingSince set) until the operator is done; a
//	@Description	delete of an object already being deleted changes nothing and answers the same.
//	@Tags			resources
//	@Produce	json
//	@Security	Bearer
//	@Param		namespace					path		string	true	"namespace"
//	@Param		kind						path		string	true	"kind"	Enums(rayclusters, rayjobs, rayservices, raycronjobs)
//	@Param		name						path		string	true	"name"
//	@Param		force						query		bool	false	"delete even while it runs (otherwise 409 for a running object)"
//	@Success	200							{object}	Envelope{data=DeleteData}
//	@Failure	400,401,403,404,409,503,504	{object}	Envelope
//	@Router		/rest/ray/v1/namespaces/{namespace}/{kind}/{name} [delete]
func (s *Server) delete(c *gin.Context) (*response, error) {
	force, err := boolParam(c, "force")
	if err != nil {
		return nil, err
	}
	ns, name := c.Param("namespace"), c.Param("name")
	pending, err := s.writePath(c, req(c)).Delete(c.Request.Context(), ns, name, force)
	if err != nil {
		return nil, err
	}
	return ok(DeleteData{Namespace: ns, Name: name, Deleting: pending}), nil
}

// exportYAML returns the object as YAML, read from the apiserver as the caller.
//
//	@Summary		YAML export
//	@ID				getObjectYAML
//	@Description	The object as YAML without managedFields; it can be sent back unchanged with PUT.
//	@Tags			resources
//	@Produce		application/yaml
//	@Produce		json
//	@Security		Bearer
//	@Param			namespace			path		string	true	"namespace"
//	@Param			kind				path		string	true	"kind"	Enums(rayclusters, rayjobs, rayservices, raycronjobs)
//	@Param			name				path		string	true	"name"
//	@Param			download			query		bool	false	"add Content-Disposition: attachment"
//	@Success		200					{string}	string	"the manifest"
//	@Failure		400,401,403,404,503	{object}	Envelope
//	@Router			/rest/ray/v1/namespaces/{namespace}/{kind}/{name}/yaml [get]
func (s *Server) exportYAML(c *gin.Context) (*response, error) {
	download, err := boolParam(c, "download")
	if err != nil {
		return nil, err
	}
	_, cur, err := s.resolve(c)
	if err != nil {
		return nil, err
	}
	var obj *unstructured.Unstructured
	if cur.Template != nil {
		obj = cur.Template.DetailObject()
	} else {
		obj = &unstructured.Unstructured{Object: withoutManagedFields(cur.Instance.Object)}
	}
	out, err := yaml.Marshal(obj.Object)
	if err != nil {
		return nil, err
	}
	res := &response{code: http.StatusOK, contentType: "application/yaml; charset=utf-8", body: out}
	if download {
		res.header = http.Header{"Content-Disposition": {fmt.Sprintf(`attachment; filename="%s.yaml"`, obj.GetName())}}
	}
	return res, nil
}
