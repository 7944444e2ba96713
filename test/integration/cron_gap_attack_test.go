//go:build integration

package integration

import (
	"context"
	"testing"
	"time"

	"github.com/robfig/cron/v3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"ray-service/internal/ray"
)

// A RayCronJob made through the service (its creator signed) runs every minute, and is suspended. While
// it is, a tenant who may edit Ray objects there makes a RayJob that says it is the run of a tick that
// passes meanwhile: the RayCronJob's controlling owner reference (its real UID), label and the
// annotation of that tick, made just after it. When the RayCronJob is resumed, KubeRay makes the run of
// the first tick it missed, late, and goes on from then (status.lastScheduleTime is the time it made
// it): the tenant's tick had no run, and the status is past it. The tenant's RayJob must not be billed to
// the RayCronJob's creator. Before, it was the only RayJob that said it was the run of that tick, made
// within the grace after it and before the status: it was billed to the victim from the resume on.
func TestAttackCronRunOfPassedOverTick(t *testing.T) {
	t.Parallel()
	ns := namespace(t, "usage-cron-gap")
	svc := startInstance(t, "ray-service-usage-cron-gap.log", "--usage-credit-every=2s", "--idle-window=0")
	admin := env.tokens["admin"]
	user, token := tenant(t, ns, "mallory")
	bind(t, ns, user, "ray-editor")
	ctx := context.Background()
	crons := env.adminDyn.Resource(rayCronJobs).Namespace(ns)

	victim := everyMinuteCron(t, ns, "gap", "?start=false")

	// The first tick KubeRay will run when resumed: the next after its last run, or after its creation.
	every, err := cron.ParseStandard("* * * * *")
	require.NoError(t, err)
	first := func() time.Time {
		c, err := crons.Get(ctx, "gap", metav1.GetOptions{})
		require.NoError(t, err)
		from := c.GetCreationTimestamp().Time
		if last, _, _ := unstructured.NestedString(c.Object, "status", "lastScheduleTime"); last != "" {
			from, err = time.Parse(time.RFC3339, last)
			require.NoError(t, err)
		}
		return every.Next(from).UTC()
	}
	// The tick after the first one passes while it is suspended: the tenant's RayJob says it is its run.
	tick := first().Add(time.Minute)
	eventually(t, 3*time.Minute, "the tick "+tick.String()+" passed", func() bool { return time.Now().After(tick.Add(time.Second)) })
	cronObj, err := dynamicWithToken(t, token).Resource(rayCronJobs).Namespace(ns).Get(ctx, "gap", metav1.GetOptions{})
	require.NoError(t, err)
	var obj map[string]any
	require.NoError(t, yaml.Unmarshal(mustRename(t, "rayjob-minimal.yaml", "gap-forged"), &obj))
	forged := &unstructured.Unstructured{Object: obj}
	forged.SetLabels(map[string]string{ray.RunOfLabel: "gap"})
	forged.SetAnnotations(map[string]string{ray.ScheduledAtAnnotation: tick.Format(time.RFC3339)})
	controlledBy(forged, "RayCronJob", "gap", cronObj.GetUID())
	_, err = dynamicWithToken(t, token).Resource(rayJobs).Namespace(ns).Create(ctx, forged, metav1.CreateOptions{})
	require.NoError(t, err)
	require.Equal(t, tick.Add(-time.Minute), first(), "suspended, KubeRay made no run meanwhile")

	r := call(t, "POST", itemPath(ns, "raycronjobs", "gap")+"/start", admin, "", nil)
	require.Equal(t, 200, r.Status, "%s", r.Raw)

	// billed are the creators the rows counted to the tenant's RayJob bill, and its core-hours.
	billed := func() (creators map[string]bool, hours float64) {
		creators = map[string]bool{}
		for _, row := range utilizationOf(t, svc, admin, ns, "cluster").Items {
			if row.Kind == "RayJob" && row.Name == "gap-forged" {
				creators[row.Creator] = true
				hours += row.Allocated.CPUCoreHours
			}
		}
		return creators, hours
	}
	eventually(t, 3*time.Minute, "the RayCronJob's status past "+tick.String(), func() bool {
		c, err := crons.Get(ctx, "gap", metav1.GetOptions{})
		require.NoError(t, err)
		last, _, _ := unstructured.NestedString(c.Object, "status", "lastScheduleTime")
		at, err := time.Parse(time.RFC3339, last)
		return err == nil && !at.Before(tick)
	})
	_, before := billed()
	eventually(t, 60*time.Second, "the tenant's cluster credited since", func() bool {
		_, now := billed()
		return now > before
	})
	creators, _ := billed()
	assert.NotContains(t, creators, victim, "a RayJob that says it is the run of a tick KubeRay passed over is billed to no one")
	assert.Equal(t, map[string]bool{"": true}, creators)
}
