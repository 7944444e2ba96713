package ray

import (
	"slices"
	"sort"
	"testing"

	"github.com/stretchr/testify/assert"
)

func possibleActions(k *Kind, s Summary) []string {
	var out []string
	for a := range k.Possible(&s) {
		out = append(out, a)
	}
	sort.Slice(out, func(i, j int) bool { return slices.Index(ActionOrder, out[i]) < slices.Index(ActionOrder, out[j]) })
	return out
}

// What each state allows, by the rules the lifecycle routes follow.
func TestPossibleActions(t *testing.T) {
	kinds := NewKinds()
	cluster, _ := kinds.Lookup("rayclusters")
	job, _ := kinds.Lookup("rayjobs")
	service, _ := kinds.Lookup("rayservices")
	groups := []WorkerGroup{{Name: "workers", Replicas: 1}}
	for _, c := range []struct {
		what string
		k    *Kind
		s    Summary
		want []string
	}{
		{"running cluster", cluster, Summary{Name: "c", Kind: ClusterKind, Type: TypeInstance, Status: StatusRunning, WorkerGroups: groups},
			[]string{ActionStop, ActionEdit, ActionScale, ActionLogs, ActionDashboard}},
		{"stopped cluster", cluster, Summary{Name: "c", Kind: ClusterKind, Type: TypeInstance, Status: StatusStopped, WorkerGroups: groups},
			[]string{ActionStart, ActionDelete, ActionEdit, ActionScale}},
		{"pending cluster without workers", cluster, Summary{Name: "c", Kind: ClusterKind, Type: TypeInstance, Status: StatusPending},
			[]string{ActionStop, ActionDelete, ActionEdit}},
		{"failed cluster", cluster, Summary{Name: "c", Kind: ClusterKind, Type: TypeInstance, Status: StatusFailed},
			[]string{ActionDelete, ActionEdit}},
		{"succeeded job", job, Summary{Name: "j", Kind: "RayJob", Type: TypeInstance, Status: StatusSucceeded},
			[]string{ActionStart, ActionDelete, ActionEdit}},
		{"running job", job, Summary{Name: "j", Kind: "RayJob", Type: TypeInstance, Status: StatusRunning, RayClusterName: "j-x"},
			[]string{ActionStop, ActionEdit, ActionLogs, ActionDashboard}},
		{"service template", service, Summary{Name: "s", Kind: "RayService", Type: TypeTemplate, Status: StatusStopped, WorkerGroups: groups},
			[]string{ActionStart, ActionDelete, ActionEdit, ActionScale}},
	} {
		assert.Equal(t, c.want, possibleActions(c.k, c.s), c.what)
	}
	// Every action needs the right to read the object first.
	for a, needs := range cluster.Possible(&Summary{Name: "c", Kind: ClusterKind, Type: TypeInstance, Status: StatusStopped}) {
		assert.Equal(t, "get", needs[len(needs)-1].Verb, a)
	}
}
