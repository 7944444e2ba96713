package ray

import (
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"ray-service/internal/accel"
)

// ClaimCounter says what one pod's claim holds, in namespace ns: a claim template's requests, or a
// claim's (its allocation when it has one). shared is true for a claim of its own name, which every pod
// naming it shares: it is counted once in a summary's Requested, not once per pod.
type ClaimCounter func(ns string, c corev1.PodResourceClaim) (held accel.Holdings, shared bool)

// HeldResources are the resources of holdings alone: their GPUs and NPUs, the holdings beside them.
func HeldResources(h accel.Holdings) Resources {
	return Resources{GPU: h.Devices(accel.GPU), NPU: h.Devices(accel.NPU), Accelerators: h}
}

// WithClaims returns the summary with the devices its pod templates' resource claims hold (Dynamic
// Resource Allocation) added to the head's and the groups' requests and to Requested: base itself where
// its templates name no claim. The groups past MaxWorkerGroups are not listed, and their claims are not
// counted.
func WithClaims(base *Summary, count ClaimCounter) *Summary {
	if base.Head.Resources.claims == nil && !slices.ContainsFunc(base.WorkerGroups, func(g WorkerGroup) bool { return g.Resources.claims != nil }) {
		return base
	}
	s := *base
	s.Requested.Accelerators = slices.Clone(s.Requested.Accelerators)
	seen := map[string]bool{}
	add := func(r *Resources) {
		pc := r.claims
		if pc == nil {
			return
		}
		for _, c := range pc.list {
			held, shared := count(s.Namespace, c)
			if len(held) == 0 {
				continue
			}
			r.Add(HeldResources(held), 1)
			times := pc.pods
			if shared {
				times = 1
				if seen[*c.ResourceClaimName] {
					times = 0
				}
				seen[*c.ResourceClaimName] = true
			}
			if times > 0 {
				s.Requested.Add(HeldResources(held), times)
			}
		}
	}
	add(&s.Head.Resources)
	s.WorkerGroups = slices.Clone(s.WorkerGroups)
	for i := range s.WorkerGroups {
		add(&s.WorkerGroups[i].Resources)
	}
	return &s
}

// WithPodClaims returns the summary whose devices held through claims are, per kind, what its pods'
// claims hold as allocated (held) where that is as much as its templates' claims ask or more: the
// allocation names the devices' model, and answers a request the templates cannot value before it (a
// firstAvailable list whose later choice was taken, allocationMode All, a device class of its own that
// selects GPUs). base itself where it is not (pods not all made or allocated yet).
func WithPodClaims(base *Summary, held accel.Holdings) *Summary {
	if len(held) == 0 {
		return base
	}
	var asked, rest accel.Holdings
	for _, x := range base.Requested.Accelerators {
		if strings.HasPrefix(x.Resource, accel.DRAPrefix) {
			asked = append(asked, x)
		} else {
			rest = append(rest, x)
		}
	}
	var s *Summary
	for _, k := range []accel.Kind{accel.GPU, accel.NPU} {
		more := held.Devices(k) - asked.Devices(k)
		if held.Devices(k) == 0 || more < -1e-9 {
			continue
		}
		if s == nil {
			c := *base
			s = &c
		}
		if k == accel.GPU {
			s.Requested.GPU += more
		} else {
			s.Requested.NPU += more
		}
		asked = slices.DeleteFunc(slices.Clone(asked), func(x accel.Held) bool { return x.Kind == k })
		for _, x := range held {
			if x.Kind == k {
				asked = append(asked, x)
			}
		}
	}
	if s == nil {
		return base
	}
	out := slices.Clone(rest)
	out.AddAll(asked, 1)
	s.Requested.Accelerators = out
	return s
}
