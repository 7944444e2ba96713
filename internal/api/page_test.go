package api

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"ray-service/internal/access"
	"ray-service/internal/cache"
	"ray-service/internal/ray"
	"ray-service/internal/ray/raytest"
)

// A list page written from the items' shared encodings is, byte for byte, the envelope encoded whole:
// each item with the caller's actions, the health reason withheld where the caller may not see it,
// templates and instances, names that JSON escapes, an empty page.
func TestListPageEncodesAsTheEnvelope(t *testing.T) {
	k := ray.NewKinds().Cluster()
	var items []*cache.Item
	for i, ns := range []string{"a", "b", "a", "b"} {
		u := raytest.Cluster(t)
		u.SetNamespace(ns)
		u.SetName([]string{"plain", "with-<html>&", "third", "fourth"}[i])
		u.SetAnnotations(map[string]string{ray.CreatorKey: "ünïcode \u2028 \"quoted\""})
		sum := k.Summarize(u)
		if i >= 2 { // held back by a Warning event, which only those who may list events are told
			sum.Status = ray.StatusPending
			since := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
			sum = *k.WithPods(&sum, nil, []ray.Problem{ray.EventProblem(ray.InvolvedObjectRef{Kind: "RayCluster", Name: sum.Name}, "FailedCreate", "quota", since)})
			require.NotEmpty(t, sum.Health.SeenOn(), "the health reason is read from an event")
		}
		if i == 3 {
			sum.Type = ray.TypeTemplate
		}
		items = append(items, &cache.Item{Summary: sum})
	}
	granted := map[string]ray.Permissions{"a": ^ray.Permissions(0)} // all in a, nothing in b
	for _, page := range [][]*cache.Item{items, {}} {
		res, err := listPage(k, page, granted, 42, 3, 20)
		require.NoError(t, err)
		want := Page[ray.Summary]{Items: []ray.Summary{}, Total: 42, Page: 3, PageSize: 20}
		for _, it := range page {
			s := it.Summary
			var withheld bool
			if s.Actions, withheld = access.ShownAs(k, &s, granted[s.Namespace]); withheld {
				s.Health = s.Health.Withheld()
			}
			want.Items = append(want.Items, s)
		}
		var b bytes.Buffer
		require.NoError(t, json.NewEncoder(&b).Encode(Envelope{Code: 200, Msg: "OK", Data: want}))
		assert.Equal(t, b.Bytes(), res.body, "byte for byte: %s", res.body)
		assert.Equal(t, "application/json; charset=utf-8", res.contentType)
	}
	shown, err := listPage(k, items, granted, 4, 1, 20)
	require.NoError(t, err)
	var env struct {
		Data Page[ray.Summary] `json:"data"`
	}
	require.NoError(t, json.Unmarshal(shown.body, &env))
	assert.NotEmpty(t, env.Data.Items[0].Actions, "all granted in a")
	assert.Empty(t, env.Data.Items[1].Actions, "nothing granted in b")
	assert.NotEqual(t, ray.ReasonWithheld, env.Data.Items[2].Health.Reason, "events may be listed in a")
	assert.Equal(t, ray.ReasonWithheld, env.Data.Items[3].Health.Reason, "not in b")
	// The shared encoding is the item's own: what one caller was not shown is shown to the next.
	all := map[string]ray.Permissions{"a": ^ray.Permissions(0), "b": ^ray.Permissions(0)}
	again, err := listPage(k, items, all, 4, 1, 20)
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(again.body, &env))
	assert.NotEmpty(t, env.Data.Items[1].Actions)
	assert.NotEqual(t, ray.ReasonWithheld, env.Data.Items[3].Health.Reason)
}
