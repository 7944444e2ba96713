package historytest

import (
	"fmt"
	"strings"
	"time"

	"ray-service/internal/history"
)

// BenchRecord is record i of a history spread over 50 namespaces, 20 creators and the three kinds,
// with a manifest of about 1.5 KB and four transitions, as the recorder writes them.
func BenchRecord(i int, t0 time.Time) (history.Record, []history.Transition) {
	created := t0.Add(time.Duration(i) * time.Second)
	finished := created.Add(time.Duration(60+i%600) * time.Second)
	status := []string{"Succeeded", "Failed", "Succeeded", "Running"}[i%4]
	r := history.Record{UID: fmt.Sprintf("%08x-0000-4000-8000-%012x", i, i), Kind: []string{"RayJob", "RayJob", "RayCluster", "RayService"}[i%4],
		Namespace: fmt.Sprintf("team-%02d", i%50), Name: fmt.Sprintf("job-%06d", i), Creator: fmt.Sprintf("user-%02d", i%20),
		Spec: `{"apiVersion":"ray.io/v1","kind":"RayJob","spec":{"entrypoint":"python train.py","rayClusterSpec":` +
			strings.Repeat(`{"k":"v"},`, 130) + `{}}}`, Generation: 1, Status: status, CreatedAt: created}
	if status != "Running" {
		r.FinishedAt = &finished
	}
	tl := []history.Transition{{Status: "Pending", At: created}, {Status: "Running", At: created.Add(5 * time.Second)}}
	if status != "Running" {
		tl = append(tl, history.Transition{Status: status, At: finished})
	}
	return r, tl
}
