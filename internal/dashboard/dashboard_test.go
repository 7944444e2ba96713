package dashboard

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"ray-service/internal/ray"
)

// A recorded dashboard URL is taken only where it names a service of the object's own namespace.
func TestDashboardAddressStaysInItsNamespace(t *testing.T) {
	job, _ := ray.NewKinds().Lookup("rayjobs")
	d := NewDashboards("cluster.local", 0)
	o := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "ray.io/v1", "kind": "RayJob",
		"metadata": map[string]any{"name": "j", "namespace": "team"}, "status": map[string]any{"rayClusterName": "j-abc"}}}
	for recorded, want := range map[string]string{
		"j-abc-head-svc.team.svc.cluster.local:8265":        "j-abc-head-svc.team.svc.cluster.local:8265",
		"http://j-abc-head-svc.team.svc.cluster.local:8265": "j-abc-head-svc.team.svc.cluster.local:8265",
		"evil.elsewhere.svc.cluster.local:8265":             "j-abc-head-svc.team.svc.cluster.local:8265",
		"a.b.team.svc.cluster.local:8265":                   "j-abc-head-svc.team.svc.cluster.local:8265",
		"attacker.example:8265":                             "j-abc-head-svc.team.svc.cluster.local:8265",
		"127.0.0.1:6443":                                    "j-abc-head-svc.team.svc.cluster.local:8265",
		"j-abc-head-svc.team.svc.cluster.local":             "j-abc-head-svc.team.svc.cluster.local:8265",
		"j-abc-head-svc.team.svc.cluster.local:99999":       "j-abc-head-svc.team.svc.cluster.local:8265",
	} {
		require.NoError(t, unstructured.SetNestedField(o.Object, recorded, "status", "dashboardURL"))
		sum := job.Summarize(o)
		assert.Equal(t, want, d.Address(job, o, &sum), recorded)
	}
}

// A job's stop carries the cluster's Ray token where it takes one, in the header KubeRay uses, and
// nothing where it takes none.
func TestStopJobSendsTheRayToken(t *testing.T) {
	var got []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = append(got, r.Method+" "+r.URL.Path+" ["+r.Header.Get("X-Ray-Authorization")+"]")
		_, _ = w.Write([]byte(`{"stopped":true}`))
	}))
	defer srv.Close()
	d := NewDashboards("cluster.local", time.Second)
	addr := strings.TrimPrefix(srv.URL, "http://")
	require.NoError(t, d.StopJob(t.Context(), addr, "raysubmit_1", ""))
	require.NoError(t, d.StopJob(t.Context(), addr, "raysubmit_1", "t0k"))
	assert.Equal(t, []string{"POST /api/jobs/raysubmit_1/stop []", "POST /api/jobs/raysubmit_1/stop [Bearer t0k]"}, got)
}

// A job the dashboard does not know (not submitted yet) is told apart from a refusal.
func TestStopJobOfNoSuchJob(t *testing.T) {
	code := http.StatusNotFound
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(code)
		_, _ = w.Write([]byte(`Job raysubmit_1 does not exist`))
	}))
	defer srv.Close()
	d := NewDashboards("cluster.local", time.Second)
	addr := strings.TrimPrefix(srv.URL, "http://")
	err := d.StopJob(t.Context(), addr, "raysubmit_1", "")
	require.ErrorIs(t, err, ErrNoSuchJob)
	code = http.StatusInternalServerError
	err = d.StopJob(t.Context(), addr, "raysubmit_1", "")
	require.Error(t, err)
	require.NotErrorIs(t, err, ErrNoSuchJob)
	assert.Contains(t, err.Error(), "refused to stop job raysubmit_1: 500")
}

// A token-requiring Ray dashboard answers 401 to a call without a token (Ray 2.52+,
// python/ray/_private/authentication/http_token_authentication.py): the stop and the read of
// gcs_server.out say so (ray.ErrTokenRequired); with a token sent, 401 stays a refusal like any other.
func TestCallsWithoutTokenToATokenDashboard(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get(ray.AuthHeader) == "" {
			http.Error(w, "Unauthorized: Missing authentication token", http.StatusUnauthorized)
			return
		}
		http.Error(w, "oddly unauthorized", http.StatusUnauthorized)
	}))
	defer srv.Close()
	d := NewDashboards("cluster.local", time.Second)
	addr := strings.TrimPrefix(srv.URL, "http://")
	require.ErrorIs(t, d.StopJob(t.Context(), addr, "raysubmit_1", ""), ray.ErrTokenRequired)
	_, err := d.GCSEventStats(t.Context(), addr, "10.0.0.1", "")
	require.ErrorIs(t, err, ray.ErrTokenRequired)
	err = d.StopJob(t.Context(), addr, "raysubmit_1", "t0k")
	require.Error(t, err)
	require.NotErrorIs(t, err, ray.ErrTokenRequired)
	_, err = d.GCSEventStats(t.Context(), addr, "10.0.0.1", "t0k")
	require.NotErrorIs(t, err, ray.ErrTokenRequired)
}
