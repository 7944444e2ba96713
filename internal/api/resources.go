package api

import (
	"context"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/gin-gonic/gin"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"

	"ray-service/internal/auth"
	"ray-service/internal/k8s"
)

// ListData is the data of a list response.
type ListData struct {
	Items    []k8s.Summary `json:"items"`
	Total    int           `json:"total" example:"42"`
	Page     int           `json:"page" example:"1"`
	PageSize int           `json:"pageSize" example:"20"`
}

// Detail is the data of a detail response: the summary, the conditions, the path of the Ray dashboard
// proxy, the recent events and the whole object.
type Detail struct {
	k8s.Summary
	Conditions   []interface{}          `json:"conditions"`
	DashboardURL string                 `json:"dashboardURL,omitempty" example:"/rest/ray/v1/namespaces/default/rayclusters/demo/dashboard/"`
	Events       []k8s.EventInfo        `json:"events"`
	Object       map[string]interface{} `json:"object"`
}

// RecentEvents is how many events a detail shows.
const RecentEvents = 20

// DeleteData names what was deleted.
type DeleteData struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
}

// kind resolves the {kind} path parameter; anything but the three Ray kinds is 404.
func (s *Server) kind(c *gin.Context) (*k8s.Kind, bool) {
	k, ok := s.Kinds.Lookup(c.Param("kind"))
	if !ok {
		s.fail(c, statusError(http.StatusNotFound, "NotFound",
			sprintf("unknown kind %q: use rayclusters, rayjobs or rayservices", c.Param("kind"))))
	}
	return k, ok
}

func token(c *gin.Context) string { return c.GetString(ctxToken) }

// clients returns the caller's Kubernetes clients.
func (s *Server) clients(c *gin.Context) (*k8s.Clients, error) {
	return s.Clients.ForToken(token(c))
}

func forbidden(k *k8s.Kind, verb, ns string) error {
	where := "in all namespaces"
	if ns != "" {
		where = "in namespace " + strconv.Quote(ns)
	}
	return apierrors.NewForbidden(schema.GroupResource{Group: k8s.RayGroupVersion.Group, Resource: k.Resource}, "",
		errorf("the caller may not %s %s %s", verb, k.Resource, where))
}

// listAll lists a kind across every namespace the caller may list it in.
//
//	@Summary		List across namespaces
//	@Description	Lists RayClusters, RayJobs or RayServices in every namespace the caller may list them in
//	@Description	(others are left out, not refused). Served from the watch cache. Filters combine with AND;
//	@Description	status, rayVersion and creator take comma-separated values that combine with OR. Ties in the
//	@Description	sort order are broken by namespace, then name.
//	@Tags			resources
//	@Produce		json
//	@Security		Bearer
//	@Param			kind			path		string	true	"kind"	Enums(rayclusters, rayjobs, rayservices)
//	@Param			search			query		string	false	"case-insensitive substring of the name"
//	@Param			status			query		string	false	"normalized status, comma-separated"
//	@Param			rayVersion		query		string	false	"Ray version, comma-separated"
//	@Param			creator			query		string	false	"creator user name, comma-separated"
//	@Param			type			query		string	false	"instance or template"	Enums(instance, template)
//	@Param			sortBy			query		string	false	"sort key"				Enums(name, createdAt, status, rayVersion)	default(createdAt)
//	@Param			order			query		string	false	"sort order"			Enums(asc, desc)							default(desc)
//	@Param			page			query		int		false	"page, from 1"			default(1)
//	@Param			pageSize		query		int		false	"items per page"		default(20)	maximum(500)
//	@Param			labelSelector	query		string	false	"Kubernetes label selector"
//	@Success		200				{object}	Envelope{data=ListData}
//	@Failure		400,401,404,503	{object}	Envelope
//	@Router			/rest/ray/v1/{kind} [get]
func (s *Server) listAll(c *gin.Context) { s.list(c) }

// list lists a kind in one namespace.
//
//	@Summary		List in a namespace
//	@Description	Same parameters and answer as the list across namespaces; 403 when the caller may not list
//	@Description	the kind in the namespace.
//	@Tags			resources
//	@Produce		json
//	@Security		Bearer
//	@Param			namespace			path		string	true	"namespace"
//	@Param			kind				path		string	true	"kind"	Enums(rayclusters, rayjobs, rayservices)
//	@Param			search				query		string	false	"case-insensitive substring of the name"
//	@Param			status				query		string	false	"normalized status, comma-separated"
//	@Param			rayVersion			query		string	false	"Ray version, comma-separated"
//	@Param			creator				query		string	false	"creator user name, comma-separated"
//	@Param			type				query		string	false	"instance or template"	Enums(instance, template)
//	@Param			sortBy				query		string	false	"sort key"				Enums(name, createdAt, status, rayVersion)	default(createdAt)
//	@Param			order				query		string	false	"sort order"			Enums(asc, desc)							default(desc)
//	@Param			page				query		int		false	"page, from 1"			default(1)
//	@Param			pageSize			query		int		false	"items per page"		default(20)	maximum(500)
//	@Param			labelSelector		query		string	false	"Kubernetes label selector"
//	@Success		200					{object}	Envelope{data=ListData}
//	@Failure		400,401,403,404,503	{object}	Envelope
//	@Router			/rest/ray/v1/namespaces/{namespace}/{kind} [get]
func (s *Server) list(c *gin.Context) {
	k, ok := s.kind(c)
	if !ok {
		return
	}
	q, err := parseListQuery(c)
	if err != nil {
		s.fail(c, err)
		return
	}
	items, _, err := s.visibleItems(c.Request.Context(), token(c), k, c.Param("namespace"), q.Type != k8s.TypeInstance)
	if err != nil {
		s.fail(c, err)
		return
	}
	page, total := q.Apply(items)
	s.ok(c, http.StatusOK, ListData{Items: page, Total: total, Page: q.Page, PageSize: q.PageSize})
}

// visibleItems returns the instances of k, and with templates its templates, that the caller may see in
// ns ("" for all namespaces): where the caller may list the kind, and for templates, which are ConfigMaps,
// also list ConfigMaps. It also returns the namespaces where the caller may list the kind (nil: ns
// itself, or all). Asking for one namespace where the caller may not list the kind is Forbidden.
func (s *Server) visibleItems(ctx context.Context, tok string, k *k8s.Kind, ns string, templates bool) ([]k8s.Item, []string, error) {
	kindAttrs := auth.Attributes{Verb: "list", Group: k8s.RayGroupVersion.Group, Resource: k.Resource, Namespace: ns}
	allowed, err := s.listableNamespaces(ctx, tok, kindAttrs, append(s.Store.Namespaces(k), s.Store.TemplateNamespaces(k)...))
	if err != nil {
		return nil, nil, err
	}
	if allowed != nil && ns != "" {
		return nil, nil, forbidden(k, "list", ns)
	}
	var templateNS []string
	if templates {
		cmAttrs := auth.Attributes{Verb: "list", Resource: "configmaps", Namespace: ns}
		cmAllowed, err := s.listableNamespaces(ctx, tok, cmAttrs, s.Store.TemplateNamespaces(k))
		if err != nil {
			return nil, nil, err
		}
		templateNS = intersect(namespacesOf(allowed, ns), namespacesOf(cmAllowed, ns))
	}
	return s.Store.Items(k, namespacesOf(allowed, ns), templateNS), allowed, nil
}

// listableNamespaces returns nil when the caller may do attrs (in all namespaces when attrs.Namespace is
// ""). Otherwise it returns, for a single namespace, an empty list, and for all namespaces, those among
// candidates where the caller may do attrs.
func (s *Server) listableNamespaces(ctx context.Context, tok string, attrs auth.Attributes, candidates []string) ([]string, error) {
	allowed, err := s.Authz.Allowed(ctx, tok, attrs)
	if err != nil {
		return nil, err
	}
	if allowed {
		return nil, nil
	}
	if attrs.Namespace != "" {
		return []string{}, nil
	}
	candidates = unique(candidates)
	verdicts := make([]bool, len(candidates))
	errs := make([]error, len(candidates))
	var wg sync.WaitGroup
	sem := make(chan struct{}, 8)
	for i, n := range candidates {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			a := attrs
			a.Namespace = n
			verdicts[i], errs[i] = s.Authz.Allowed(ctx, tok, a)
		}()
	}
	wg.Wait()
	out := []string{}
	for i, n := range candidates {
		if errs[i] != nil {
			return nil, errs[i]
		}
		if verdicts[i] {
			out = append(out, n)
		}
	}
	return out, nil
}

// unique returns the sorted distinct names.
func unique(names []string) []string {
	seen := map[string]bool{}
	out := []string{}
	for _, n := range names {
		if !seen[n] {
			seen[n] = true
			out = append(out, n)
		}
	}
	sort.Strings(out)
	return out
}

// namespacesOf turns listableNamespaces' answer into namespaces to read: nil means ns itself ("": all).
func namespacesOf(allowed []string, ns string) []string {
	if allowed == nil {
		return []string{ns}
	}
	return allowed
}

// intersect keeps the namespaces in both lists; "" stands for every namespace.
func intersect(a, b []string) []string {
	if len(a) == 1 && a[0] == "" {
		return b
	}
	if len(b) == 1 && b[0] == "" {
		return a
	}
	in := map[string]bool{}
	for _, n := range b {
		in[n] = true
	}
	out := []string{}
	for _, n := range a {
		if in[n] {
			out = append(out, n)
		}
	}
	return out
}

// parseListQuery reads and checks the list parameters.
func parseListQuery(c *gin.Context) (*k8s.Query, error) {
	q := &k8s.Query{Search: c.Query("search"), SortBy: k8s.SortByCreatedAt, Desc: true, Page: 1, PageSize: 20}
	q.Statuses = splitList(c.Query("status"))
	q.RayVersions = splitList(c.Query("rayVersion"))
	q.Creators = splitList(c.Query("creator"))
	switch t := c.Query("type"); t {
	case "", k8s.TypeInstance, k8s.TypeTemplate:
		q.Type = t
	default:
		return nil, badRequest("type %q: want instance or template", t)
	}
	switch by := c.Query("sortBy"); by {
	case "":
	case k8s.SortByName, k8s.SortByCreatedAt, k8s.SortByStatus, k8s.SortByRayVersion:
		q.SortBy = by
	default:
		return nil, badRequest("sortBy %q: want name, createdAt, status or rayVersion", by)
	}
	switch o := c.Query("order"); o {
	case "", "desc":
	case "asc":
		q.Desc = false
	default:
		return nil, badRequest("order %q: want asc or desc", o)
	}
	var err error
	if q.Page, err = intParam(c, "page", 1, 1, 1<<30); err != nil {
		return nil, err
	}
	if q.PageSize, err = intParam(c, "pageSize", 20, 1, 500); err != nil {
		return nil, err
	}
	if sel := c.Query("labelSelector"); sel != "" {
		if q.Labels, err = labels.Parse(sel); err != nil {
			return nil, badRequest("labelSelector: %v", err)
		}
	}
	return q, nil
}

func splitList(v string) []string {
	var out []string
	for _, p := range strings.Split(v, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

func intParam(c *gin.Context, name string, def, min, max int) (int, error) {
	v := c.Query(name)
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < min || n > max {
		return 0, badRequest("%s %q: want a whole number from %d to %d", name, v, min, max)
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

// manifestRequest reads what create and replace share: the kind, dryRun and the manifest of the body.
func (s *Server) manifestRequest(c *gin.Context) (*k8s.Kind, *unstructured.Unstructured, bool, bool) {
	k, ok := s.kind(c)
	if !ok {
		return nil, nil, false, false
	}
	dryRun, err := boolParam(c, "dryRun")
	if err == nil {
		var obj *unstructured.Unstructured
		if obj, err = readManifest(c.Writer, c.Request); err == nil {
			return k, obj, dryRun, true
		}
	}
	s.fail(c, err)
	return nil, nil, false, false
}

// create creates an object from a JSON, YAML or uploaded manifest, as the caller.
//
//	@Summary		Create
//	@Description	Creates a RayCluster, RayJob or RayService from one manifest: JSON, YAML, or a file uploaded
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
//	@Param			kind						path		string	true	"kind"	Enums(rayclusters, rayjobs, rayservices)
//	@Param			dryRun						query		bool	false	"validate only"
//	@Param			body						body		object	false	"the manifest (JSON or YAML)"
//	@Param			file						formData	file	false	"the manifest as an uploaded file"
//	@Success		201							{object}	Envelope{data=Detail}
//	@Success		200							{object}	Envelope{data=Detail}	"dry run: what would be created"
//	@Failure		400,401,403,404,409,413,415	{object}	Envelope
//	@Failure		422							{object}	Envelope	"invalid: details name the fields"
//	@Failure		503,504						{object}	Envelope
//	@Router			/rest/ray/v1/namespaces/{namespace}/{kind} [post]
func (s *Server) create(c *gin.Context) {
	k, obj, dryRun, ok := s.manifestRequest(c)
	if !ok {
		return
	}
	start := true
	if c.Query("start") != "" {
		var err error
		if start, err = boolParam(c, "start"); err != nil {
			s.fail(c, err)
			return
		}
	}
	if err := k.PrepareCreate(obj, c.Param("namespace")); err != nil {
		s.fail(c, err)
		return
	}
	ctx := c.Request.Context()
	user, err := s.Authz.UserName(ctx, token(c))
	if err != nil {
		s.fail(c, err)
		return
	}
	k8s.SetCreator(obj, user)
	cl, err := s.clients(c)
	if err != nil {
		s.fail(c, err)
		return
	}
	var cur *k8s.Current
	if start {
		var created *unstructured.Unstructured
		created, err = k.Create(ctx, cl.Dynamic, obj, dryRun)
		cur = &k8s.Current{Instance: created}
	} else {
		cur, err = s.Lifecycle.CreateStopped(ctx, cl, k, obj, dryRun)
	}
	if err != nil {
		s.fail(c, err)
		return
	}
	code := http.StatusCreated
	if dryRun {
		code = http.StatusOK
	}
	s.ok(c, code, s.detail(k, cur))
}

// get shows one object, read from the apiserver as the caller.
//
//	@Summary		Detail
//	@Description	The summary, the conditions and the whole object (without managedFields).
//	@Tags			resources
//	@Produce		json
//	@Security		Bearer
//	@Param			namespace			path		string	true	"namespace"
//	@Param			kind				path		string	true	"kind"	Enums(rayclusters, rayjobs, rayservices)
//	@Param			name				path		string	true	"name"
//	@Success		200					{object}	Envelope{data=Detail}
//	@Failure		401,403,404,503,504	{object}	Envelope
//	@Router			/rest/ray/v1/namespaces/{namespace}/{kind}/{name} [get]
func (s *Server) get(c *gin.Context) {
	k, cl, cur, ok := s.resolve(c)
	if !ok {
		return
	}
	d := s.detail(k, cur)
	// Events the caller may not list are left out of the detail, not refused.
	if events, err := s.eventsOf(c.Request.Context(), k, cl, cur); err == nil {
		if len(events) > RecentEvents {
			events = events[:RecentEvents]
		}
		d.Events = events
	} else if !apierrors.IsForbidden(err) {
		s.fail(c, err)
		return
	}
	s.ok(c, http.StatusOK, d)
}

// resolve reads the object of the path as the caller: the instance, else its template.
func (s *Server) resolve(c *gin.Context) (*k8s.Kind, *k8s.Clients, *k8s.Current, bool) {
	k, ok := s.kind(c)
	if !ok {
		return nil, nil, nil, false
	}
	cl, err := s.clients(c)
	if err != nil {
		s.fail(c, err)
		return nil, nil, nil, false
	}
	cur, err := k.Resolve(c.Request.Context(), cl, c.Param("namespace"), c.Param("name"))
	if err != nil {
		s.fail(c, err)
		return nil, nil, nil, false
	}
	return k, cl, cur, true
}

// detail shows an instance or a template.
func (s *Server) detail(k *k8s.Kind, cur *k8s.Current) Detail {
	if cur.Template != nil {
		obj := cur.Template.DetailObject()
		return Detail{Summary: k.TemplateSummary(cur.Template), Object: obj.Object, Conditions: []interface{}{}, Events: []k8s.EventInfo{}}
	}
	obj := cur.Instance.DeepCopy()
	unstructured.RemoveNestedField(obj.Object, "metadata", "managedFields")
	d := Detail{Summary: k.Summarize(obj), Object: obj.Object, Conditions: []interface{}{}, Events: []k8s.EventInfo{},
		DashboardURL: BasePath + "/namespaces/" + obj.GetNamespace() + "/" + k.Resource + "/" + obj.GetName() + "/dashboard/"}
	s.Store.CompleteSummary(&d.Summary)
	if conds, ok, _ := unstructured.NestedSlice(obj.Object, "status", "conditions"); ok {
		d.Conditions = conds
	}
	return d
}

// replace replaces an object from a full manifest, as the caller.
//
//	@Summary		Replace
//	@Description	Replaces the object with a full manifest (JSON, YAML or uploaded file). A stale
//	@Description	metadata.resourceVersion is 409; a manifest without one replaces unconditionally. The name
//	@Description	and namespace cannot change (400). The creator recorded at creation is kept. status is ignored.
//	@Tags			resources
//	@Accept			json
//	@Accept			application/yaml
//	@Accept			multipart/form-data
//	@Produce		json
//	@Security		Bearer
//	@Param			namespace					path		string	true	"namespace"
//	@Param			kind						path		string	true	"kind"	Enums(rayclusters, rayjobs, rayservices)
//	@Param			name						path		string	true	"name"
//	@Param			dryRun						query		bool	false	"validate only"
//	@Param			body						body		object	false	"the manifest (JSON or YAML)"
//	@Param			file						formData	file	false	"the manifest as an uploaded file"
//	@Success		200							{object}	Envelope{data=Detail}
//	@Failure		400,401,403,404,409,413,415	{object}	Envelope
//	@Failure		422							{object}	Envelope	"invalid: details name the fields"
//	@Failure		503,504						{object}	Envelope
//	@Router			/rest/ray/v1/namespaces/{namespace}/{kind}/{name} [put]
func (s *Server) replace(c *gin.Context) {
	k, obj, dryRun, ok := s.manifestRequest(c)
	if !ok {
		return
	}
	ns, name := c.Param("namespace"), c.Param("name")
	if err := k.PrepareUpdate(obj, ns, name); err != nil {
		s.fail(c, err)
		return
	}
	cl, err := s.clients(c)
	if err != nil {
		s.fail(c, err)
		return
	}
	ctx := c.Request.Context()
	current, err := k.Resolve(ctx, cl, ns, name)
	if err != nil {
		s.fail(c, err)
		return
	}
	var after *k8s.Current
	if current.Template != nil {
		k8s.KeepCreator(obj, current.Template.Manifest)
		var tpl *k8s.Template
		tpl, err = k.UpdateTemplate(ctx, cl, current.Template, obj, dryRun)
		after = &k8s.Current{Template: tpl}
	} else {
		k8s.KeepCreator(obj, current.Instance)
		var updated *unstructured.Unstructured
		updated, err = k.Update(ctx, cl.Dynamic, obj, dryRun)
		after = &k8s.Current{Instance: updated}
	}
	if err != nil {
		s.fail(c, err)
		return
	}
	s.ok(c, http.StatusOK, s.detail(k, after))
}

// delete deletes an object as the caller.
//
//	@Summary		Delete
//	@Tags			resources
//	@Produce		json
//	@Security		Bearer
//	@Param			namespace				path		string	true	"namespace"
//	@Param			kind					path		string	true	"kind"	Enums(rayclusters, rayjobs, rayservices)
//	@Param			name					path		string	true	"name"
//	@Success		200						{object}	Envelope{data=DeleteData}
//	@Failure		401,403,404,409,503,504	{object}	Envelope
//	@Router			/rest/ray/v1/namespaces/{namespace}/{kind}/{name} [delete]
func (s *Server) delete(c *gin.Context) {
	k, ok := s.kind(c)
	if !ok {
		return
	}
	force, err := boolParam(c, "force")
	if err != nil {
		s.fail(c, err)
		return
	}
	cl, err := s.clients(c)
	if err != nil {
		s.fail(c, err)
		return
	}
	ns, name := c.Param("namespace"), c.Param("name")
	if err := s.Lifecycle.Delete(c.Request.Context(), cl, k, ns, name, force); err != nil {
		s.fail(c, err)
		return
	}
	s.ok(c, http.StatusOK, DeleteData{Namespace: ns, Name: name})
}

// exportYAML returns the object as YAML, read from the apiserver as the caller.
//
//	@Summary		YAML export
//	@Description	The object as YAML without managedFields; it can be sent back unchanged with PUT.
//	@Tags			resources
//	@Produce		application/yaml
//	@Produce		json
//	@Security		Bearer
//	@Param			namespace			path		string	true	"namespace"
//	@Param			kind				path		string	true	"kind"	Enums(rayclusters, rayjobs, rayservices)
//	@Param			name				path		string	true	"name"
//	@Param			download			query		bool	false	"add Content-Disposition: attachment"
//	@Success		200					{string}	string	"the manifest"
//	@Failure		400,401,403,404,503	{object}	Envelope
//	@Router			/rest/ray/v1/namespaces/{namespace}/{kind}/{name}/yaml [get]
func (s *Server) exportYAML(c *gin.Context) {
	download, err := boolParam(c, "download")
	if err != nil {
		s.fail(c, err)
		return
	}
	_, _, cur, ok := s.resolve(c)
	if !ok {
		return
	}
	var obj *unstructured.Unstructured
	if cur.Template != nil {
		obj = cur.Template.DetailObject()
	} else {
		obj = cur.Instance
		unstructured.RemoveNestedField(obj.Object, "metadata", "managedFields")
	}
	out, err := yaml.Marshal(obj.Object)
	if err != nil {
		s.fail(c, err)
		return
	}
	if download {
		c.Header("Content-Disposition", sprintf(`attachment; filename="%s.yaml"`, obj.GetName()))
	}
	c.Data(http.StatusOK, "application/yaml; charset=utf-8", out)
}
