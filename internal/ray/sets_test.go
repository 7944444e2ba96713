package ray

import (
	"encoding/json"
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/labels"
)

func TestRaySetEncodesAsTheMapItHolds(t *testing.T) {
	m := map[string]float64{"memory": 2 << 30, "CPU": 3, "TPU": 0.5, `odd "name"`: 1, "zero": 0,
		"nan": math.NaN(), "inf": math.Inf(1)}
	set := NewLogical(m)
	got, err := json.Marshal(struct {
		R Logical `json:"r,omitempty"`
	}{set})
	require.NoError(t, err)
	delete(m, "zero")
	delete(m, "nan")
	delete(m, "inf")
	want, err := json.Marshal(struct {
		R map[string]float64 `json:"r,omitempty"`
	}{m})
	require.NoError(t, err)
	assert.JSONEq(t, string(want), string(got), "zero and non-finite amounts are left out")

	var back Logical
	require.NoError(t, json.Unmarshal([]byte(`{"GPU":1,"CPU":2}`), &back))
	assert.Equal(t, Logical{{"CPU", 2}, {"GPU", 1}}, back, "sorted by name")

	empty, err := json.Marshal(struct {
		R Logical `json:"r,omitempty"`
	}{NewLogical(nil)})
	require.NoError(t, err)
	assert.JSONEq(t, `{}`, string(empty), "an empty set is left out like an empty map")
}

func TestLabelSetMatchesAsTheMap(t *testing.T) {
	m := map[string]string{"team": "ml", "tier": "", "app.kubernetes.io/name": "ray"}
	set := NewLabelSet(m)
	for _, sel := range []string{"team=ml", "team!=ml", "tier", "!tier", "tier=", "missing", "!missing",
		"team in (ml,web)", "team notin (ml)", "app.kubernetes.io/name=ray,team=ml", "zzz=1"} {
		s, err := labels.Parse(sel)
		require.NoError(t, err, sel)
		assert.Equal(t, s.Matches(labels.Set(m)), s.Matches(set), sel)
	}
	v, ok := set.Lookup("tier")
	assert.True(t, ok, "an empty value is a label")
	assert.Empty(t, v)
	assert.Nil(t, NewLabelSet(nil))
}
