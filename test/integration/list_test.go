//go:build integration

package integration

import (
	"context"
	"fmt"
	"maps"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// expected is the test's own view of one RayCluster, computed from the objects as the admin reads them.
type expected struct {
	ns, name, status, rayVersion, creator string
	created                               time.Time
	labels                                map[string]string
}

func TestListQueries(t *testing.T) {
	namespaces := []string{namespace(t, "list-a"), namespace(t, "list-b"), namespace(t, "list-c")}
	for _, ns := range namespaces {
		bind(t, ns, "alice", "ray-editor")
	}
	versions := []string{"2.9.0", "2.10.0", "2.41.0", "2.46.0", "2.9.3"}
	const n = 66
	for i := range n {
		ns := namespaces[i%3]
		name := fmt.Sprintf("%s-%02d", []string{"alpha", "beta", "gamma", "delta"}[i%4], i)
		token := env.tokens[[]string{"admin", "alice"}[i%2]]
		r := createCluster(t, token, ns, name, func(o map[string]any) {
			meta := o["metadata"].(map[string]any)
			meta["labels"] = map[string]any{"suite": "list", "tier": []string{"gold", "silver", "bronze"}[i%3]}
			spec := o["spec"].(map[string]any)
			spec["rayVersion"] = versions[i%5]
			spec["workerGroupSpecs"].([]any)[0].(map[string]any)["replicas"] = int64(0)
			if i%4 == 0 {
				spec["suspend"] = true
			}
		})
		require.Equal(t, 201, r.Status, "%s", r.Raw)
		if i%20 == 19 {
			time.Sleep(1100 * time.Millisecond) // spread creation times over a few seconds
		}
	}

	// The test's own computation: list as the admin from the apiserver.
	var want []expected
	admin := env.tokens["admin"]
	eventually(t, 120*time.Second, "every RayCluster settled (ready or suspended) and cached", func() bool {
		list, err := env.adminDyn.Resource(rayClusters).List(context.Background(), metav1.ListOptions{LabelSelector: "suite=list"})
		require.NoError(t, err)
		want = want[:0]
		for _, o := range list.Items {
			state, _, _ := unstructured.NestedString(o.Object, "status", "state")
			status := map[string]string{"ready": "Running", "suspended": "Stopped"}[state]
			if status == "" {
				return false
			}
			v, _, _ := unstructured.NestedString(o.Object, "spec", "rayVersion")
			want = append(want, expected{ns: o.GetNamespace(), name: o.GetName(), status: status, rayVersion: v,
				creator: o.GetAnnotations()["ray.openfuyao.com/creator"], created: o.GetCreationTimestamp().Time, labels: o.GetLabels()})
		}
		if len(want) != n {
			return false
		}
		r := call(t, "GET", "/rest/ray/v1/rayclusters?labelSelector=suite%3Dlist&pageSize=500", admin, "", nil)
		got := decode[listData](t, r)
		if got.Total != n {
			return false
		}
		for _, it := range got.Items {
			if it.Status != "Running" && it.Status != "Stopped" {
				return false
			}
		}
		return true
	})

	type query struct {
		params url.Values
		keep   func(e expected) bool
	}
	all := func(expected) bool { return true }
	queries := []query{
		{url.Values{}, all},
		{url.Values{"search": {"ALPHA"}}, func(e expected) bool { return strings.HasPrefix(e.name, "alpha") }},
		{url.Values{"search": {"a-1"}}, func(e expected) bool { return strings.Contains(e.name, "a-1") }},
		{url.Values{"status": {"Running"}}, func(e expected) bool { return e.status == "Running" }},
		{url.Values{"status": {"Stopped"}}, func(e expected) bool { return e.status == "Stopped" }},
		{url.Values{"status": {"Running,Stopped"}}, all},
		{url.Values{"status": {"Failed"}}, func(expected) bool { return false }},
		{url.Values{"rayVersion": {"2.10.0"}}, func(e expected) bool { return e.rayVersion == "2.10.0" }},
		{url.Values{"creator": {"alice"}}, func(e expected) bool { return e.creator == "alice" }},
		{url.Values{"type": {"instance"}}, all},
		{url.Values{"type": {"template"}}, func(expected) bool { return false }},
		{url.Values{"labelSelector": {"suite=list,tier in (gold,bronze)"}}, func(e expected) bool { return e.labels["tier"] != "silver" }},
		{url.Values{"search": {"gamma"}, "status": {"Running"}, "creator": {"admin"}}, func(e expected) bool {
			return strings.Contains(e.name, "gamma") && e.status == "Running" && e.creator == "admin"
		}},
	}
	keys := []string{"", "name", "createdAt", "status", "rayVersion"}
	checked := 0
	for _, q := range queries {
		for _, key := range keys {
			for _, order := range []string{"", "asc", "desc"} {
				params := url.Values{}
				maps.Copy(params, q.params)
				if params.Get("labelSelector") == "" {
					params.Set("labelSelector", "suite=list")
				}
				if key != "" {
					params.Set("sortBy", key)
				}
				if order != "" {
					params.Set("order", order)
				}
				exp := expectedOrder(want, q.keep, key, order)
				for _, pageSize := range []int{7, 500} {
					pages := (len(exp)+pageSize-1)/pageSize + 1 // one page past the end
					for page := 1; page <= pages; page++ {
						params.Set("page", strconv.Itoa(page))
						params.Set("pageSize", strconv.Itoa(pageSize))
						r := call(t, "GET", "/rest/ray/v1/rayclusters?"+params.Encode(), admin, "", nil)
						require.Equal(t, 200, r.Status, "%s", r.Raw)
						got := decode[listData](t, r)
						assert.Equal(t, len(exp), got.Total, "total for %s", params.Encode())
						assert.Equal(t, page, got.Page)
						assert.Equal(t, pageSize, got.PageSize)
						lo, hi := min((page-1)*pageSize, len(exp)), min(page*pageSize, len(exp))
						assert.Equal(t, keysOf(exp[lo:hi]), itemKeys(got.Items), "page %d of %s", page, params.Encode())
						checked++
					}
				}
			}
		}
	}
	t.Logf("%d list pages checked against the test's own computation", checked)

	// The same in one namespace, and the default page size.
	r := call(t, "GET", nsPath(namespaces[1], "rayclusters")+"?labelSelector=suite%3Dlist&sortBy=name&order=asc", admin, "", nil)
	require.Equal(t, 200, r.Status)
	got := decode[listData](t, r)
	exp := expectedOrder(want, func(e expected) bool { return e.ns == namespaces[1] }, "name", "asc")
	assert.Equal(t, len(exp), got.Total)
	assert.Equal(t, 20, got.PageSize)
	assert.Equal(t, keysOf(exp[:20]), itemKeys(got.Items))

	for _, bad := range []string{"sortBy=size", "order=up", "page=0", "page=x", "pageSize=501", "pageSize=0", "type=other", "labelSelector=a%20in%20"} {
		r := call(t, "GET", "/rest/ray/v1/rayclusters?"+bad, admin, "", nil)
		assert.Equal(t, 400, r.Status, bad)
		assert.Equal(t, "BadRequest", r.Reason, bad)
		assert.Contains(t, r.Msg, strings.SplitN(bad, "=", 2)[0], bad)
	}
	r = call(t, "GET", "/rest/ray/v1/rayclustrs", admin, "", nil)
	assert.Equal(t, 404, r.Status)
}

// expectedOrder filters and orders the test's own view as API.md and the Swagger docs describe: by the
// key (createdAt by default), descending by default, ties by namespace then name ascending.
func expectedOrder(all []expected, keep func(expected) bool, key, order string) []expected {
	var out []expected
	for _, e := range all {
		if keep(e) {
			out = append(out, e)
		}
	}
	desc := order != "asc"
	cmp := func(a, b expected) int {
		switch key {
		case "name":
			return strings.Compare(a.name, b.name)
		case "status":
			return strings.Compare(a.status, b.status)
		case "rayVersion":
			return versionCmp(a.rayVersion, b.rayVersion)
		default:
			return a.created.Compare(b.created)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if c := cmp(out[i], out[j]); c != 0 {
			if desc {
				return c > 0
			}
			return c < 0
		}
		if out[i].ns != out[j].ns {
			return out[i].ns < out[j].ns
		}
		return out[i].name < out[j].name
	})
	return out
}

// versionCmp compares dotted numeric versions.
func versionCmp(a, b string) int {
	var x, y [3]int
	// A part that is missing or no number stays 0: the versions the test makes have three.
	_, _ = fmt.Sscanf(a, "%d.%d.%d", &x[0], &x[1], &x[2])
	_, _ = fmt.Sscanf(b, "%d.%d.%d", &y[0], &y[1], &y[2])
	for i := range x {
		if x[i] != y[i] {
			return x[i] - y[i]
		}
	}
	return 0
}

func keysOf(es []expected) []string {
	out := []string{}
	for _, e := range es {
		out = append(out, e.ns+"/"+e.name)
	}
	return out
}

func itemKeys(items []summary) []string {
	out := []string{}
	for _, it := range items {
		out = append(out, it.Namespace+"/"+it.Name)
	}
	return out
}
