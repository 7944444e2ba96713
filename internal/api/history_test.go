package api

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"ray-service/internal/auth"
	"ray-service/internal/history"
	"ray-service/internal/ray"
)

// fakeHistory holds one record.
type fakeHistory struct{ rec history.Record }

func (f *fakeHistory) List(context.Context, history.Query) ([]history.Record, int, error) {
	return []history.Record{f.rec}, 1, nil
}

func (f *fakeHistory) Get(_ context.Context, uid string) (*history.Record, error) {
	if uid != f.rec.UID {
		return nil, history.ErrNotFound
	}
	r := f.rec
	e := *f.rec.Ending
	r.Ending = &e
	return &r, nil
}

func (f *fakeHistory) Namespaces(context.Context, string) ([]string, error) {
	return []string{f.rec.Namespace}, nil
}

const recordUID = "3f1c9a4e-0b7d-4c1e-9a57-2d8e6f0b1c3a"

func historyRequest(t *testing.T, h *fakeHistory, allow func(auth.Attributes) bool, method, path string) (int, map[string]any, string) {
	t.Helper()
	e := &handlerEnv{authz: &fakeAuthz{}, store: &fakeStore{}}
	authz := &countingAuthz{asked: map[auth.Attributes]int{}, allow: allow}
	router := e.routerWith(func(d *Deps) { d.History, d.Authz = h, authz })
	w := httptest.NewRecorder()
	r := httptest.NewRequest(method, path, nil)
	r.Header.Set("Authorization", "Bearer t")
	router.ServeHTTP(w, r)
	var out struct {
		Msg  string         `json:"msg"`
		Data map[string]any `json:"data"`
	}
	require.NoError(t, json.Unmarshal(w.Body.Bytes(), &out), w.Body.String())
	return w.Code, out.Data, out.Msg
}

// Each part of an ending is shown only to who may read it live in the namespace: events to who may list
// events, pods' states to who may list pods, the log tail to who may get pods/log.
func TestHistoryEndingParts(t *testing.T) {
	code := int32(137)
	h := &fakeHistory{rec: history.Record{UID: recordUID, Kind: "RayCluster", Namespace: "team", Name: "c", CreatedAt: time.Now(),
		Ending: &ray.Ending{Events: []ray.EventInfo{{Reason: "BackOff"}},
			Pods:        []ray.PodEnd{{Name: "c-head", Containers: []ray.ContainerEnd{{Name: "ray-head", ExitCode: &code, Message: "secret"}}}},
			PodsOmitted: 3, Log: &ray.LogTail{Pod: "c-head", Text: "last"}}}}
	path := "/rest/ray/v1/history/rayclusters/" + recordUID
	for _, c := range []struct {
		name   string
		rights []string
		want   []string
	}{
		{"the kind only", nil, nil},
		{"and events", []string{"events/"}, []string{"events"}},
		{"and pods", []string{"pods/"}, []string{"pods", "podsOmitted"}},
		{"and logs", []string{"pods/log"}, []string{"log"}},
		{"all", []string{"events/", "pods/", "pods/log"}, []string{"events", "pods", "podsOmitted", "log"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			status, data, _ := historyRequest(t, h, func(a auth.Attributes) bool {
				if a.Resource == "rayclusters" {
					return true
				}
				for _, r := range c.rights {
					if r == a.Resource+"/"+a.Subresource && a.Namespace == "team" {
						return true
					}
				}
				return false
			}, http.MethodGet, path)
			require.Equal(t, http.StatusOK, status)
			ending, ok := data["ending"].(map[string]any)
			require.True(t, ok)
			var keys []string
			for k := range ending {
				keys = append(keys, k)
			}
			assert.ElementsMatch(t, c.want, keys)
		})
	}
}

// A record whose manifest was kept in part is not rerun: 409, saying why.
func TestHistoryRerunOfAManifestInPart(t *testing.T) {
	h := &fakeHistory{rec: history.Record{UID: recordUID, Kind: "RayJob", Namespace: "team", Name: "j", CreatedAt: time.Now(),
		Spec: `{"apiVersion":"ray.io/v1","kind":"RayJob","metadata":{"name":"j","namespace":"team"}}`, Ending: &ray.Ending{},
		Cut: &history.ManifestCut{Size: 1 << 20, SHA256: "ab", Reason: "past the history's bound of 64 KiB a manifest"}}}
	status, _, msg := historyRequest(t, h, func(auth.Attributes) bool { return true }, http.MethodPost, "/rest/ray/v1/history/rayjobs/"+recordUID+"/rerun")
	assert.Equal(t, http.StatusConflict, status)
	assert.Contains(t, msg, "only in part")
	assert.Contains(t, msg, "1048576 bytes")
}
