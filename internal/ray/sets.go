package ray

import (
	"bytes"
	"encoding/json"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
)

// Logical is a set of Ray logical resources by name (CPU, GPU, memory, custom), sorted by name, encoded
// as a JSON object of numbers. Every cached object keeps one per group; a sorted slice of a few pairs
// takes about a fifth of the heap of a map of the same pairs.
type Logical []Amount

// Amount is one Ray logical resource and how much of it there is.
type Amount struct {
	Name  string
	Value float64
}

// wellKnownRayNames are the resource names nearly every set holds, shared instead of allocated per set.
var wellKnownRayNames = []string{"CPU", "GPU", "NPU", "memory", "object_store_memory"}

// NewLogical returns the set of the non-zero, finite amounts of m.
func NewLogical(m map[string]float64) Logical {
	var out Logical
	for _, n := range slices.Sorted(maps.Keys(m)) {
		if v := m[n]; v == 0 || math.IsNaN(v) || math.IsInf(v, 0) {
			continue
		}
		if i := slices.Index(wellKnownRayNames, n); i >= 0 {
			n = wellKnownRayNames[i]
		}
		out = append(out, Amount{Name: n, Value: m[n]})
	}
	return slices.Clip(out)
}

// Map returns the set as a map.
func (r Logical) Map() map[string]float64 {
	m := make(map[string]float64, len(r))
	for _, a := range r {
		m[a.Name] = a.Value
	}
	return m
}

// MarshalJSON encodes the set as an object, its names in order.
func (r Logical) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, a := range r {
		if i > 0 {
			b.WriteByte(',')
		}
		name, err := json.Marshal(a.Name)
		if err != nil {
			return nil, err
		}
		b.Write(name)
		b.WriteByte(':')
		b.WriteString(strconv.FormatFloat(a.Value, 'g', -1, 64))
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// UnmarshalJSON reads an object of numbers.
func (r *Logical) UnmarshalJSON(data []byte) error {
	var m map[string]float64
	if err := json.Unmarshal(data, &m); err != nil {
		return err
	}
	*r = NewLogical(m)
	return nil
}

// String helps in test failures and logs.
func (r Logical) String() string {
	parts := make([]string, len(r))
	for i, a := range r {
		parts[i] = a.Name + "=" + strconv.FormatFloat(a.Value, 'g', -1, 64)
	}
	return "{" + strings.Join(parts, " ") + "}"
}

// LabelSet is an object's labels as a sorted list of pairs: what a list's label selector and creator
// filter read of every cached object, in about a third of the heap of a map. It implements
// labels.Labels.
type LabelSet []LabelPair

// LabelPair is one label.
type LabelPair struct{ Key, Value string }

// NewLabelSet returns the labels of m.
func NewLabelSet(m map[string]string) LabelSet {
	if len(m) == 0 {
		return nil
	}
	out := make(LabelSet, 0, len(m))
	for _, k := range slices.Sorted(maps.Keys(m)) {
		out = append(out, LabelPair{k, m[k]})
	}
	return out
}

// Lookup returns the value of a label and whether the object has it.
func (l LabelSet) Lookup(key string) (string, bool) {
	i, found := slices.BinarySearchFunc(l, key, func(p LabelPair, k string) int { return strings.Compare(p.Key, k) })
	if !found {
		return "", false
	}
	return l[i].Value, true
}

// Has tells whether the object has a label.
func (l LabelSet) Has(key string) bool {
	_, ok := l.Lookup(key)
	return ok
}

// Get returns the value of a label, "" when the object has none.
func (l LabelSet) Get(key string) string {
	v, _ := l.Lookup(key)
	return v
}
