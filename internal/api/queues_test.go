package api

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"ray-service/internal/auth"
	"ray-service/internal/queues"
	"ray-service/internal/ray"
)

// fakeQueues knows Volcano's queue ray-a and namespace a's Kueue LocalQueue team.
type fakeQueues struct{}

func (fakeQueues) List(context.Context, string) ([]queues.Queue, bool, error) { return nil, false, nil }

func (fakeQueues) Positions(context.Context, string, string, string) (map[string]queues.Position, error) {
	return nil, nil
}

func (fakeQueues) Use(_ context.Context, _, ns, manager, name string) (string, error) {
	switch {
	case name == "ray-a" && manager != "kueue":
		return "volcano", nil
	case name == "team" && ns == "a" && manager != "volcano":
		return "kueue", nil
	}
	return "", badRequest("no queue %s", name) // what it answers is Use's; the label is what is tested
}

// A create names the queue to put the object in: the label its manager reads is set on what is
// created; what cannot be queued so is refused with the parameter named, and nothing is created.
func TestCreateIntoAQueue(t *testing.T) {
	env := &handlerEnv{objects: &fakeObjects{}, authz: &fakeAuthz{allowed: true, scopes: map[string]auth.Scope{}}, store: &fakeStore{}}
	h := env.routerWith(func(d *Deps) { d.Queues, d.Store = fakeQueues{}, servingAll{env.store} })
	post := func(path, body string) (int, Envelope) {
		env.objects.created = nil
		r := httptest.NewRequest("POST", path, strings.NewReader(body))
		r.Header.Set("Authorization", "Bearer t")
		r.Header.Set("Content-Type", "application/yaml")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		var env Envelope
		require.NoError(t, json.Unmarshal(w.Body.Bytes(), &env))
		return w.Code, env
	}
	const cluster = "metadata: {name: demo}\nspec: {headGroupSpec: {template: {spec: {containers: [{name: ray-head, image: rayproject/ray:2.52.0}]}}}}\n"

	code, _ := post("/rest/ray/v1/namespaces/a/rayclusters?queue=ray-a", cluster)
	require.Equal(t, http.StatusCreated, code)
	assert.Equal(t, "ray-a", env.objects.created.GetLabels()["volcano.sh/queue-name"])
	code, _ = post("/rest/ray/v1/namespaces/a/rayjobs?queue=team&queueManager=kueue&start=false", "metadata: {name: demo}\nspec: {entrypoint: x}\n")
	require.Equal(t, http.StatusCreated, code)
	assert.Equal(t, "team", env.objects.created.GetLabels()["kueue.x-k8s.io/queue-name"])

	for _, tc := range []struct {
		path, body string
		code       int
		says       string
	}{
		{"/rest/ray/v1/namespaces/a/rayclusters?queueManager=kueue", cluster, 400, "queueManager is given without queue"},
		{"/rest/ray/v1/namespaces/a/rayclusters?queue=ray-a&queueManager=slurm", cluster, 400, "queueManager \"slurm\""},
		{"/rest/ray/v1/namespaces/a/rayclusters?queue=Not_A_Label!", cluster, 400, "queue \"Not_A_Label!\""},
		{"/rest/ray/v1/namespaces/a/rayclusters?queue=gone", cluster, 400, "no queue gone"},
		{"/rest/ray/v1/namespaces/a/raycronjobs?queue=ray-a", "metadata: {name: demo}\nspec: {schedule: '* * * * *', jobTemplate: {entrypoint: x}}\n",
			422, "KubeRay does not pass its labels"},
		{"/rest/ray/v1/namespaces/a/rayclusters?queue=ray-a", "metadata: {name: demo, labels: {volcano.sh/queue-name: other}}\nspec: {}\n",
			422, "the manifest names another queue"},
	} {
		code, got := post(tc.path, tc.body)
		assert.Equal(t, tc.code, code, tc.path)
		assert.Contains(t, got.Msg+" "+strings.Join(detailMessages(got), " "), tc.says, tc.path)
		assert.Nil(t, env.objects.created, "%s: nothing is created", tc.path)
	}
}

// servingAll serves the optional kinds too (a cluster with RayCronJob's CRD).
type servingAll struct{ *fakeStore }

func (servingAll) Serves(*ray.Kind) bool { return true }

func detailMessages(e Envelope) []string {
	var out []string
	for _, d := range e.Details {
		out = append(out, d.Field+": "+d.Message)
	}
	return out
}
