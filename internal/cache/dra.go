package cache

import (
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"ray-service/internal/accel"
	"ray-service/internal/ray"
)

// dra follows what Dynamic Resource Allocation (resource.k8s.io/v1) gives Ray pods, where the cluster
// serves it (discovery decides, checkDRA): the ResourceClaims (their requests, their allocation's
// results and how many consumers they are reserved for), the ResourceClaimTemplates (their requests)
// and the ResourceSlices (their devices' type, productName and MIG profile, for the drivers package
// accel knows). Of each only that is kept. A pod's claims are counted as held GPUs (accel.DRAPrefix).
type dra struct {
	claims, templates, slices cache.SharedIndexInformer
	installed, started        atomic.Bool
	// dirty are the namespaces to publish again (mu), gathered until the republisher wakes (wake).
	mu    sync.Mutex
	dirty map[string]bool
	wake  chan struct{}
}

// republishEvery is how often at most the namespaces whose claims changed are published again: a tenant
// who makes and deletes claims in a loop takes the store's lock no more often than that.
const republishEvery = 100 * time.Millisecond

// slicesByPool indexes the ResourceSlices by driver and pool.
const slicesByPool = "pool"

// newDRA prepares the informers (started by checkDRA) and their handlers: a claim or a slice that
// changes makes the overview's sums again; a claim or a claim template that changes has the objects of
// its namespace published again, whose summaries count it (namespaceChanged), and a slice that changes
// those of every namespace with claims.
func (s *Store) newDRA(core kubernetes.Interface, resync time.Duration) (*dra, error) {
	f := informers.NewSharedInformerFactory(core, resync).Resource().V1()
	d := &dra{claims: f.ResourceClaims().Informer(), templates: f.ResourceClaimTemplates().Informer(), slices: f.ResourceSlices().Informer(),
		dirty: map[string]bool{}, wake: make(chan struct{}, 1)}
	for inf, trim := range map[cache.SharedIndexInformer]cache.TransformFunc{d.claims: trimClaim, d.templates: trimClaimTemplate, d.slices: trimSlice} {
		if err := inf.SetTransform(trim); err != nil {
			return nil, err
		}
	}
	if err := d.slices.AddIndexers(cache.Indexers{slicesByPool: func(obj any) ([]string, error) {
		if sl, ok := obj.(*resourcev1.ResourceSlice); ok {
			return []string{sl.Spec.Driver + "/" + sl.Spec.Pool.Name}, nil
		}
		return nil, nil
	}}); err != nil {
		return nil, err
	}
	// A slice that changes values anew the devices of the claims the summaries count.
	resliced := func() {
		s.podsSeq.Add(1)
		for _, ns := range s.claimNamespaces() {
			s.namespaceChanged(ns)
		}
	}
	if _, err := d.slices.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { resliced() },
		UpdateFunc: func(any, any) { resliced() },
		DeleteFunc: func(any) { resliced() },
	}); err != nil {
		return nil, err
	}
	// Any claim may be one a template names (the annotation that says a claim was made for a pod is the
	// apiserver's to check, not the service's), so every claim that changes publishes its namespace again.
	republish := func(obj any) {
		s.podsSeq.Add(1)
		if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = t.Obj
		}
		if m, ok := obj.(metav1.Object); ok {
			s.namespaceChanged(m.GetNamespace())
		}
	}
	for _, inf := range []cache.SharedIndexInformer{d.claims, d.templates} {
		if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc:    republish,
			UpdateFunc: func(_, obj any) { republish(obj) },
			DeleteFunc: republish,
		}); err != nil {
			return nil, err
		}
	}
	return d, nil
}

// claimNamespaces are the namespaces that have claims.
func (s *Store) claimNamespaces() []string {
	seen := map[string]bool{}
	var out []string
	for _, obj := range s.dra.claims.GetStore().List() {
		if c, ok := obj.(*resourcev1.ResourceClaim); ok && !seen[c.Namespace] {
			seen[c.Namespace] = true
			out = append(out, c.Namespace)
		}
	}
	return out
}

// checkDRA starts following claims, templates and slices the first time discovery finds
// resource.k8s.io/v1 serving all three (or notes it, for Start, before the store starts).
func (s *Store) checkDRA(disc discovery.DiscoveryInterface) {
	s.mu.RLock()
	stop := s.stop
	s.mu.RUnlock()
	list, err := disc.ServerResourcesForGroupVersion(resourcev1.SchemeGroupVersion.String())
	n := 0
	if err == nil {
		for _, r := range list.APIResources {
			if r.Name == "resourceclaims" || r.Name == "resourceclaimtemplates" || r.Name == "resourceslices" {
				n++
			}
		}
	}
	s.dra.installed.Store(n == 3)
	if n == 3 && stop != nil && s.dra.started.CompareAndSwap(false, true) {
		s.runDRA(stop)
	}
}

func (s *Store) runDRA(stop <-chan struct{}) {
	go s.dra.claims.Run(stop)
	go s.dra.templates.Run(stop)
	go s.dra.slices.Run(stop)
	go s.republishing(stop)
}

// namespaceChanged has namespace ns published again, within republishEvery.
func (s *Store) namespaceChanged(ns string) {
	s.dra.mu.Lock()
	s.dra.dirty[ns] = true
	s.dra.mu.Unlock()
	select {
	case s.dra.wake <- struct{}{}:
	default:
	}
}

// republishing publishes again the namespaces marked, every republishEvery at most, until stop.
func (s *Store) republishing(stop <-chan struct{}) {
	tick := time.NewTicker(republishEvery)
	defer tick.Stop()
	for {
		select {
		case <-stop:
			return
		case <-s.dra.wake:
		}
		select {
		case <-stop:
			return
		case <-tick.C:
		}
		s.dra.mu.Lock()
		dirty := s.dra.dirty
		s.dra.dirty = map[string]bool{}
		s.dra.mu.Unlock()
		for ns := range dirty {
			s.republishNamespace(ns)
		}
	}
}

// republishNamespace publishes again every object of namespace ns.
func (s *Store) republishNamespace(ns string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	changed := false
	for _, k := range s.kinds.All() {
		objs, err := s.informers[k].GetIndexer().ByIndex(cache.NamespaceIndex, ns)
		if err != nil {
			continue
		}
		for _, obj := range objs {
			if e, ok := obj.(*Entry); ok {
				changed = s.putInstanceLocked(k, e) || changed
			}
		}
	}
	if changed {
		s.notify.Notify()
	}
}

// withClaims counts the resource claims a summary's pod templates name.
func (s *Store) withClaims(sum *ray.Summary) *ray.Summary {
	if !s.dra.started.Load() {
		return sum
	}
	return ray.WithClaims(sum, s.templateClaim)
}

// withPodClaims counts the claims of the summary's Ray cluster's pods, as allocated, where they hold
// more than its templates ask (ray.WithPodClaims).
func (s *Store) withPodClaims(k *ray.Kind, sum *ray.Summary) *ray.Summary {
	if !s.dra.started.Load() {
		return sum
	}
	cluster := k.CurrentCluster(sum)
	if cluster == "" {
		return sum
	}
	var held accel.Holdings
	for _, p := range s.ClusterPods(sum.Namespace, cluster) {
		if p.Status.Phase == corev1.PodPending || p.Status.Phase == corev1.PodRunning {
			held.AddAll(s.podClaims(p), 1)
		}
	}
	return ray.WithPodClaims(sum, held)
}

// templateClaim is what a claim of a pod template holds: a template's requests; a claim's allocation,
// else its requests.
func (s *Store) templateClaim(ns string, c corev1.PodResourceClaim) (accel.Holdings, bool) {
	if c.ResourceClaimTemplateName != nil {
		if t := s.claimTemplate(ns, *c.ResourceClaimTemplateName); t != nil {
			return requestsHeld(t.Spec.Spec.Devices.Requests), false
		}
		return nil, false
	}
	if claim := s.claim(ns, *c.ResourceClaimName); claim != nil {
		return s.claimHeld(claim, nil), true
	}
	return nil, true
}

// podClaims is what a pod's resource claims hold: for each, its claim (named, or made of a template
// for the pod: pod.status.resourceClaimStatuses) as allocated, or as it asks while not allocated; the
// template's requests while no claim is made yet. A claim reserved for several consumers counts its
// share for each. Claims the scheduler makes for extended resources a DRA class serves
// (pod.status.extendedResourceClaimStatus) are not counted again: the pod's requests name them.
func (s *Store) podClaims(p *corev1.Pod) accel.Holdings {
	if len(p.Spec.ResourceClaims) == 0 || !s.dra.started.Load() {
		return nil
	}
	var held accel.Holdings
	for _, pc := range p.Spec.ResourceClaims {
		name, made := pc.ResourceClaimName, false
		if name == nil {
			for _, st := range p.Status.ResourceClaimStatuses {
				if st.Name == pc.Name {
					name, made = st.ResourceClaimName, true
				}
			}
		}
		if name == nil {
			// No claim made yet: what the template asks; made without a name: none was needed.
			if pc.ResourceClaimTemplateName != nil && !made {
				if t := s.claimTemplate(p.Namespace, *pc.ResourceClaimTemplateName); t != nil {
					held.AddAll(requestsHeld(t.Spec.Spec.Devices.Requests), 1)
				}
			}
			continue
		}
		if claim := s.claim(p.Namespace, *name); claim != nil {
			held.AddAll(s.claimHeld(claim, p), 1)
		}
	}
	return held
}

// claimHeld is what a claim holds: its allocated devices, valued on their slices, or what it asks
// while not allocated; for pod (nil: whole), the pod's share of it.
func (s *Store) claimHeld(c *resourcev1.ResourceClaim, pod *corev1.Pod) accel.Holdings {
	if c.Status.Allocation == nil {
		return requestsHeld(c.Spec.Devices.Requests)
	}
	share := 1.0
	if pod != nil {
		share = 1 / float64(s.rayConsumers(c, pod))
	}
	var held accel.Holdings
	for _, r := range c.Status.Allocation.Devices.Results {
		if r.AdminAccess != nil && *r.AdminAccess { // admin access does not take the device
			continue
		}
		class := classOf(c.Spec.Devices.Requests, r.Request)
		u, ok := accel.DRADeviceUnit(r.Driver, s.sliceDevice(r.Driver, r.Pool, r.Device))
		if !ok {
			// A device of a driver the service does not know, or one its slice no longer lists: what
			// its class says.
			if u, ok = accel.DRAClassUnit(class); !ok {
				continue
			}
		}
		held.Add(accel.DRAPrefix+class, u, share)
	}
	return held
}

// requestsHeld is what requests ask, by device class: exactly.count devices (1 where unset) of the
// class, or of a firstAvailable list its first, preferred, subrequest. A request for all the devices
// of a class (allocationMode All) says no count before it is allocated, and is not counted.
func requestsHeld(reqs []resourcev1.DeviceRequest) accel.Holdings {
	var held accel.Holdings
	for _, r := range reqs {
		var class string
		var mode resourcev1.DeviceAllocationMode
		var count int64
		switch {
		case r.Exactly != nil:
			class, mode, count = r.Exactly.DeviceClassName, r.Exactly.AllocationMode, r.Exactly.Count
		case len(r.FirstAvailable) > 0:
			f := r.FirstAvailable[0]
			class, mode, count = f.DeviceClassName, f.AllocationMode, f.Count
		default:
			continue
		}
		if mode == resourcev1.DeviceAllocationModeAll {
			continue
		}
		if count < 1 {
			count = 1
		}
		if u, ok := accel.DRAClassUnit(class); ok {
			held.Add(accel.DRAPrefix+class, u, float64(count))
		}
	}
	return held
}

// classOf is the device class of a claim's request, "<request>" or "<request>/<subrequest>" as an
// allocation result names it.
func classOf(reqs []resourcev1.DeviceRequest, request string) string {
	main, sub, _ := strings.Cut(request, "/")
	for _, r := range reqs {
		if r.Name != main {
			continue
		}
		if sub == "" && r.Exactly != nil {
			return r.Exactly.DeviceClassName
		}
		for _, f := range r.FirstAvailable {
			if f.Name == sub {
				return f.DeviceClassName
			}
		}
	}
	return ""
}

// rayConsumers counts the Ray pods a claim is shared by: the pods it is reserved for that are Ray pods
// the cache holds, and pod (not reserved yet while it waits). Consumers that are no Ray pods take no
// share: a claim a Ray pod uses is counted whole to Ray, however many other pods it is reserved for
// (they could be made only to dilute it).
func (s *Store) rayConsumers(c *resourcev1.ResourceClaim, pod *corev1.Pod) int {
	n, reserved := 0, false
	for _, r := range c.Status.ReservedFor {
		if r.UID == pod.UID && r.Name == pod.Name {
			n, reserved = n+1, true
			continue
		}
		obj, found, _ := s.pods.GetIndexer().GetByKey(c.Namespace + "/" + r.Name)
		if p, ok := obj.(*corev1.Pod); found && ok && p.UID == r.UID {
			n++
		}
	}
	if !reserved {
		n++
	}
	return n
}

func (s *Store) claim(ns, name string) *resourcev1.ResourceClaim {
	obj, found, _ := s.dra.claims.GetIndexer().GetByKey(ns + "/" + name)
	if !found {
		return nil
	}
	c, _ := obj.(*resourcev1.ResourceClaim)
	return c
}

func (s *Store) claimTemplate(ns, name string) *resourcev1.ResourceClaimTemplate {
	obj, found, _ := s.dra.templates.GetIndexer().GetByKey(ns + "/" + name)
	if !found {
		return nil
	}
	t, _ := obj.(*resourcev1.ResourceClaimTemplate)
	return t
}

// sliceDevice is what the newest generation of a pool's slices says of a device.
func (s *Store) sliceDevice(driver, pool, device string) accel.DRADevice {
	objs, _ := s.dra.slices.GetIndexer().ByIndex(slicesByPool, driver+"/"+pool)
	var out accel.DRADevice
	gen := int64(-1)
	for _, obj := range objs {
		sl, ok := obj.(*resourcev1.ResourceSlice)
		if !ok || sl.Spec.Pool.Generation < gen {
			continue
		}
		for _, d := range sl.Spec.Devices {
			if d.Name == device {
				out, gen = deviceOf(d), sl.Spec.Pool.Generation
			}
		}
	}
	return out
}

// deviceOf reads a device's attributes.
func deviceOf(d resourcev1.Device) accel.DRADevice {
	str := func(name string) string {
		if a, ok := d.Attributes[resourcev1.QualifiedName(name)]; ok && a.StringValue != nil {
			return *a.StringValue
		}
		return ""
	}
	// The driver writes its attributes without a domain: they are in its own (k8s.io/api v0.37.2
	// resource/v1 types.go, Device.Attributes).
	return accel.DRADevice{Type: str(accel.DRATypeAttr), Product: str(accel.DRAProductAttr), Profile: str(accel.DRAProfileAttr)}
}

// trimClaim keeps of a claim its requests' names, classes and counts, its allocation's results and
// the pods it is reserved for (the apiserver keeps at most 256 consumers: ResourceClaimReservedForMaxSize).
func trimClaim(obj any) (any, error) {
	c, ok := obj.(*resourcev1.ResourceClaim)
	if !ok {
		return obj, nil
	}
	t := &resourcev1.ResourceClaim{ObjectMeta: trimmedMeta(c.ObjectMeta), Spec: resourcev1.ResourceClaimSpec{
		Devices: resourcev1.DeviceClaim{Requests: trimRequests(c.Spec.Devices.Requests)}}}
	if a := c.Status.Allocation; a != nil {
		results := make([]resourcev1.DeviceRequestAllocationResult, len(a.Devices.Results))
		for i, r := range a.Devices.Results {
			results[i] = resourcev1.DeviceRequestAllocationResult{Request: r.Request, Driver: r.Driver, Pool: r.Pool, Device: r.Device, AdminAccess: r.AdminAccess}
		}
		t.Status.Allocation = &resourcev1.AllocationResult{Devices: resourcev1.DeviceAllocationResult{Results: results}}
	}
	for _, r := range c.Status.ReservedFor {
		if r.APIGroup == "" && r.Resource == "pods" {
			t.Status.ReservedFor = append(t.Status.ReservedFor, resourcev1.ResourceClaimConsumerReference{Resource: r.Resource, Name: r.Name, UID: r.UID})
		}
	}
	return t, nil
}

func trimClaimTemplate(obj any) (any, error) {
	c, ok := obj.(*resourcev1.ResourceClaimTemplate)
	if !ok {
		return obj, nil
	}
	return &resourcev1.ResourceClaimTemplate{ObjectMeta: trimmedMeta(c.ObjectMeta), Spec: resourcev1.ResourceClaimTemplateSpec{
		Spec: resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{Requests: trimRequests(c.Spec.Spec.Devices.Requests)}}}}, nil
}

// trimmedMeta keeps an object's name, namespace and version.
func trimmedMeta(m metav1.ObjectMeta) metav1.ObjectMeta {
	return metav1.ObjectMeta{Name: m.Name, Namespace: m.Namespace, ResourceVersion: m.ResourceVersion}
}

func trimRequests(reqs []resourcev1.DeviceRequest) []resourcev1.DeviceRequest {
	out := make([]resourcev1.DeviceRequest, len(reqs))
	for i, r := range reqs {
		out[i].Name = r.Name
		if e := r.Exactly; e != nil {
			out[i].Exactly = &resourcev1.ExactDeviceRequest{DeviceClassName: e.DeviceClassName, AllocationMode: e.AllocationMode, Count: e.Count}
		}
		for _, f := range r.FirstAvailable {
			out[i].FirstAvailable = append(out[i].FirstAvailable, resourcev1.DeviceSubRequest{Name: f.Name,
				DeviceClassName: f.DeviceClassName, AllocationMode: f.AllocationMode, Count: f.Count})
		}
	}
	return out
}

// trimSlice keeps of a slice its driver, pool and, for a driver package accel knows, its devices'
// names and the attributes it reads.
func trimSlice(obj any) (any, error) {
	sl, ok := obj.(*resourcev1.ResourceSlice)
	if !ok {
		return obj, nil
	}
	t := &resourcev1.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: sl.Name, ResourceVersion: sl.ResourceVersion},
		Spec: resourcev1.ResourceSliceSpec{Driver: sl.Spec.Driver, Pool: sl.Spec.Pool}}
	if sl.Spec.Driver != accel.NVIDIADRADriver {
		return t, nil
	}
	for _, d := range sl.Spec.Devices {
		kept := resourcev1.Device{Name: d.Name, Attributes: map[resourcev1.QualifiedName]resourcev1.DeviceAttribute{}}
		for _, name := range []string{accel.DRATypeAttr, accel.DRAProductAttr, accel.DRAProfileAttr} {
			if a, ok := d.Attributes[resourcev1.QualifiedName(name)]; ok {
				kept.Attributes[resourcev1.QualifiedName(name)] = a
			}
		}
		t.Spec.Devices = append(t.Spec.Devices, kept)
	}
	return t, nil
}
