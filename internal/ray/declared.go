package ray

import (
	"strings"
	"sync/atomic"
)

// Fields a KubeRay version added to a kind's spec that change how the service acts on it: where the
// installed CRD declares one, the service uses it; where it does not (an older KubeRay), the apiserver
// would prune it, and the service acts as it did before.
const (
	// FieldServiceSuspend is a RayService's spec.suspend (KubeRay v1.7.0
	// ray-operator/apis/ray/v1/rayservice_types.go:129): a stop sets it, and the operator deletes the
	// service's clusters.
	FieldServiceSuspend = "RayService.spec.suspend"
	// FieldCronTimeZone is a RayCronJob's spec.timeZone (KubeRay v1.7.0 apis/ray/v1/raycronjob_types.go),
	// which came with the run names the operator derives from the tick (raycronjob_controller.go
	// getRayJobName).
	FieldCronTimeZone = "RayCronJob.spec.timeZone"
)

// VersionedFields are the fields the service asks the installed CRDs about.
func VersionedFields() []string { return []string{FieldServiceSuspend, FieldCronTimeZone} }

// Declared is what the installed Ray CRDs declare of VersionedFields. It is learnt from the apiserver's
// OpenAPI documents (package cache) and read by the kinds; until it is learnt, nothing is declared.
type Declared struct {
	fields atomic.Pointer[map[string]bool]
}

// Has tells whether the installed CRD declares the field (one of the Field constants).
func (d *Declared) Has(field string) bool {
	if m := d.fields.Load(); m != nil {
		return (*m)[field]
	}
	return false
}

// Set replaces what is declared; it returns the fields whose presence changed.
func (d *Declared) Set(fields map[string]bool) []string {
	var changed []string
	for _, f := range VersionedFields() {
		if d.Has(f) != fields[f] {
			changed = append(changed, f)
		}
	}
	d.fields.Store(&fields)
	return changed
}

// SplitField splits a Field constant into its kind and its path in the object ("spec", "suspend").
func SplitField(field string) (kind string, path []string) {
	parts := strings.Split(field, ".")
	return parts[0], parts[1:]
}
