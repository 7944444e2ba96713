package usage

import (
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"ray-service/internal/accel"
)

// counted tells whether a ResourceQuota's resource is one the accounting counts: CPU and memory
// requested, every GPU and NPU resource package accel knows, whole or sliced (a quota names an extended
// resource with "requests." only: requests.nvidia.com/mig-3g.40gb, requests.huawei.com/Ascend910-4c),
// and the devices Dynamic Resource Allocation gives by device class: claimed
// (<class>.deviceclass.resource.k8s.io/devices) or asked as an extended resource a class serves
// (requests.deviceclass.resource.kubernetes.io/<class>; k8s.io/api v0.37.2 core/v1/types.go:8139-8141).
func counted(name string) bool {
	switch name {
	case "cpu", "memory", "requests.cpu", "requests.memory":
		return true
	}
	if strings.HasSuffix(name, corev1.ResourceClaimsPerClass) || strings.HasPrefix(name, corev1.ResourceImplicitExtendedClaimsPerClass) {
		return true
	}
	res, ok := strings.CutPrefix(name, "requests.")
	if !ok {
		return false
	}
	_, accelerator := accel.UnitOf(res, accel.Node{}, false)
	return accelerator
}

// QuotaFigures are a namespace's ResourceQuotas for the resources the accounting counts: for each, the
// lowest hard limit among the quotas that set one (the one that binds) and what that quota says is used,
// sorted by resource.
func QuotaFigures(quotas []corev1.ResourceQuota) []QuotaFigure {
	byName := map[string]QuotaFigure{}
	for i := range quotas {
		q := &quotas[i]
		hard := q.Status.Hard
		if len(hard) == 0 {
			hard = q.Spec.Hard
		}
		for name, h := range hard {
			if !counted(string(name)) {
				continue
			}
			f := QuotaFigure{Resource: string(name), Hard: h.AsApproximateFloat64(), Quota: q.Name}
			if u, ok := q.Status.Used[name]; ok {
				f.Used = u.AsApproximateFloat64()
			}
			if old, seen := byName[f.Resource]; seen && old.Hard <= f.Hard {
				continue
			}
			f.Ratio = ratio(f.Used, f.Hard)
			byName[f.Resource] = f
		}
	}
	out := make([]QuotaFigure, 0, len(byName))
	for _, f := range byName {
		out = append(out, f)
	}
	slices.SortFunc(out, func(a, b QuotaFigure) int { return strings.Compare(a.Resource, b.Resource) })
	return out
}
