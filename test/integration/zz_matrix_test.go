//go:build integration

package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"maps"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"

	"ray-service/internal/api"
	"ray-service/internal/metrics"
	"ray-service/internal/ray"
	"ray-service/internal/usage"
)

// publicRoutes answer without a token: they hold no cluster data.
var publicRoutes = map[string]bool{"/healthz": true, "/readyz": true, "/metrics": true,
	api.BasePath + "/swagger": true, api.BasePath + "/swagger/*any": true, api.BasePath + "/openapi.json": true}

// routeList is every route the service's router serves, from the router itself: a new route is in the
// matrix below without anyone adding it.
func routeList(t *testing.T) []struct{ Method, Path string } {
	t.Helper()
	reg, httpMetrics := metrics.NewRegistry()
	r := api.NewRouter(api.Deps{Kinds: ray.NewKinds(), Log: zap.NewNop(), Gatherer: reg, HTTP: httpMetrics,
		Ready: func(context.Context) error { return nil }})
	var out []struct{ Method, Path string }
	for _, ri := range r.Routes() {
		out = append(out, struct{ Method, Path string }{ri.Method, ri.Path})
	}
	require.Greater(t, len(out), 20)
	return out
}

// concrete fills a route's parameters with values that exist or could; uid is that of a recorded
// RayCluster.
func concrete(path, uid string) string {
	r := strings.NewReplacer(":kind", "rayclusters", ":namespace", "default", ":name", "matrix", "*path", "/api/version", ":uid", uid)
	return r.Replace(path)
}

// recordedUID returns the UID of a RayCluster the shared service's history holds.
func recordedUID(t *testing.T) string {
	t.Helper()
	var uid string
	eventually(t, 30*time.Second, "a RayCluster in the history", func() bool {
		r := call(t, "GET", "/rest/ray/v1/history/rayclusters?pageSize=1", env.tokens["admin"], "", nil)
		require.Equal(t, 200, r.Status, string(r.Raw))
		var l struct{ Items []struct{ UID string } }
		require.NoError(t, json.Unmarshal(r.Data, &l))
		if len(l.Items) == 1 {
			uid = l.Items[0].UID
		}
		return uid != ""
	})
	return uid
}

// Every route but the public ones: without a token 401; with the token of a user who may do nothing,
// 403, or an answer that shows nothing (an empty list, zero counts, a batch whose every item is refused).
func TestAuthorizationMatrix(t *testing.T) {
	body := clusterManifest(t, "matrix")
	manifest, err := json.Marshal(body.Object)
	require.NoError(t, err)
	uid := recordedUID(t)
	for _, rt := range routeList(t) {
		if publicRoutes[rt.Path] {
			continue
		}
		path := concrete(rt.Path, uid)
		var payload []byte
		contentType := ""
		if rt.Method == http.MethodPost || rt.Method == http.MethodPut || rt.Method == http.MethodPatch {
			payload, contentType = manifest, "application/json"
			if strings.HasSuffix(rt.Path, "/batch-delete") {
				payload = []byte(`{"items":[{"namespace":"default","name":"matrix"}]}`)
			}
			if strings.HasSuffix(rt.Path, "/scale") {
				payload = []byte(`{"group":"workers","replicas":1}`)
			}
		}
		t.Run(rt.Method+" "+rt.Path, func(t *testing.T) {
			if strings.HasSuffix(rt.Path, "/watch") {
				watchShowsNothing(t, path)
				return
			}
			r := call(t, rt.Method, path, "", contentType, payload)
			assert.Equal(t, 401, r.Status, "without a token: %s", r.Raw)
			r = call(t, rt.Method, path, env.tokens["nobody"], contentType, payload)
			if r.Status == 403 {
				return
			}
			if strings.Contains(rt.Path, ":uid") {
				// A record is addressed by UID alone: one the caller may not see is not found, so that
				// not even its existence shows.
				assert.Equal(t, 404, r.Status, "with a token of no rights: %s", r.Raw)
				assert.NotContains(t, r.Msg, "default", "the message names no namespace")
				return
			}
			require.Equal(t, 200, r.Status, "with a token of no rights: 403 or nothing shown, got %s", r.Raw)
			if rt.Method == http.MethodHead {
				return // no body to show anything in
			}
			switch {
			case strings.HasSuffix(rt.Path, "/batch-delete"):
				var items []struct{ Code int }
				require.NoError(t, json.Unmarshal(r.Data, &items))
				for _, it := range items {
					assert.Equal(t, 403, it.Code)
				}
			case strings.HasSuffix(rt.Path, "/overview"):
				var o struct {
					Counts    map[string]any `json:"counts"`
					Allocated struct{ CPU float64 }
				}
				require.NoError(t, json.Unmarshal(r.Data, &o))
				assert.Equal(t, map[string]any{"activeRayClusters": 0.0, "rayclusters": map[string]any{"total": 0.0, "active": 0.0},
					"rayjobs": map[string]any{"total": 0.0, "active": 0.0}, "rayservices": map[string]any{"total": 0.0, "active": 0.0},
					"raycronjobs": map[string]any{"total": 0.0, "active": 0.0, "runsActive": 0.0}, "idleRayClusters": 0.0,
					"idleHolding": map[string]any{"cpu": 0.0, "memoryBytes": 0.0, "gpu": 0.0, "npu": 0.0}}, o.Counts)
				assert.Zero(t, o.Allocated.CPU)
			case strings.HasSuffix(rt.Path, "/queues"):
				var l struct{ Items []any }
				require.NoError(t, json.Unmarshal(r.Data, &l))
				assert.Empty(t, l.Items, "no queue the caller may list, no object it may list waits in")
			case rt.Path == api.BasePath+"/utilization":
				emptyReport(t, r.Data)
			default:
				emptyPage(t, r.Data)
			}
		})
	}
}

// pageKeys are the keys of a list's data, a page (api.Page; api.Page-* in docs/swagger), and its only ones.
var pageKeys = []string{"items", "total", "page", "pageSize"}

// emptyPage holds the data of a 200 where only a list may answer to a page that lists nothing: an
// object with a page's keys and no other, no item, a total of 0. A detail, or any other object, fails.
func emptyPage(t *testing.T, data json.RawMessage) {
	t.Helper()
	var fields map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(data, &fields), "only a list may answer 200, and a list is an object: %s", data)
	require.ElementsMatch(t, pageKeys, slices.Collect(maps.Keys(fields)), "only a list may answer 200: a page's keys, no other: %s", data)
	var page struct {
		Items    []json.RawMessage `json:"items"`
		Total    int               `json:"total"`
		Page     int               `json:"page"`
		PageSize int               `json:"pageSize"`
	}
	strict(t, data, &page)
	assert.JSONEq(t, "[]", string(fields["items"]), "no item")
	assert.Zero(t, page.Total, "an empty list")
	assert.Positive(t, page.Page, "a page number")
	assert.Positive(t, page.PageSize, "a page size")
}

// emptyReport holds the data of a utilization report to one that counts nothing: a report and nothing
// else, no row, and a whole of nothing held.
func emptyReport(t *testing.T, data json.RawMessage) {
	t.Helper()
	var rep usage.Report
	strict(t, data, &rep)
	require.NotNil(t, rep.Items, "the rows are a list: %s", data)
	assert.Empty(t, rep.Items, "no row")
	assert.Zero(t, rep.Total, "no row")
	w := rep.Whole
	assert.Equal(t, usage.Hours{}, w.Allocated, "nothing allocated")
	assert.Zero(t, w.HeldHours, "nothing held")
	assert.Zero(t, w.Objects, "no Ray cluster")
	assert.Zero(t, w.Runs, "no run")
	assert.Empty(t, w.Series, "no day")
	if w.Used != nil {
		assert.Equal(t, usage.Hours{}, *w.Used, "nothing used")
	}
}

// strict decodes data into v, refusing a key v has not.
func strict(t *testing.T, data json.RawMessage, v any) {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	require.NoError(t, dec.Decode(v), "%s", data)
}

// watchShowsNothing holds a watch route to the matrix: without a token 401; with the token of a user
// who may do nothing, 403, or a stream whose first state shows nothing.
func watchShowsNothing(t *testing.T, path string) {
	r := call(t, "GET", path, "", "", nil)
	assert.Equal(t, 401, r.Status, "without a token: %s", r.Raw)
	status, s := openWatch(t, env.serviceURL, path, env.tokens["nobody"], "")
	if status == 403 {
		return
	}
	require.Equal(t, 200, status, "with a token of no rights: 403 or nothing shown")
	defer s.close()
	if strings.HasSuffix(path, "/overview/watch") {
		ev := s.next(t, 10*time.Second)
		require.Equal(t, "OVERVIEW", ev.Name)
		var o struct {
			Counts    map[string]any `json:"counts"`
			Allocated struct{ CPU float64 }
		}
		require.NoError(t, json.Unmarshal(ev.Data, &o))
		assert.InDelta(t, 0.0, o.Counts["activeRayClusters"], 0)
		assert.Equal(t, map[string]any{"total": 0.0, "active": 0.0}, o.Counts["rayclusters"])
		assert.Zero(t, o.Allocated.CPU)
		return
	}
	items, _ := s.snapshot(t)
	assert.Empty(t, items, "an empty snapshot")
}
