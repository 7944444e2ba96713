package ray

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func possibleActions(k *Kind, s Summary) []string {
	n := k.Possible(&s)
	return n.Allowed(n.All())
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
		{"running cluster being deleted", cluster, Summary{Name: "c", Kind: ClusterKind, Type: TypeInstance, Status: StatusRunning,
			WorkerGroups: groups, DeletingSince: &time.Time{}}, []string{}},
		{"service template", service, Summary{Name: "s", Kind: "RayService", Type: TypeTemplate, Status: StatusStopped, WorkerGroups: groups},
			[]string{ActionStart, ActionDelete, ActionEdit, ActionScale}},
	} {
		assert.Equal(t, c.want, possibleActions(c.k, c.s), c.what)
	}
	// Every action needs the right to read the object first: the kind, or a template's ConfigMap.
	stopped := cluster.Possible(&Summary{Name: "c", Kind: ClusterKind, Type: TypeInstance, Status: StatusStopped})
	template := service.Possible(&Summary{Name: "s", Kind: "RayService", Type: TypeTemplate, Status: StatusStopped})
	for _, a := range ActionOrder {
		if needs, ok := stopped.Of(a); ok {
			assert.True(t, needs.Has(PermGet), a)
		}
		if needs, ok := template.Of(a); ok {
			assert.True(t, needs.Has(PermConfigMapGet) && !needs.Has(PermGet), a)
		}
	}
	// No permission granted: no action; all but the object's read: none either.
	assert.Empty(t, stopped.Allowed(0))
	assert.Empty(t, stopped.Allowed(stopped.All()&^Of(PermGet)))
}
