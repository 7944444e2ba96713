// Package accel holds what the service counts of accelerators: which extended resources are GPUs and
// NPUs, whole or sliced, and the share of one device one unit of each is, so that a Ray cluster's
// summary, the overview, the utilization and the idle detection count them the same way: in device
// equivalents, with the raw counts beside them. It reads names and labels only; it makes no call.
package accel

import (
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
)

// Kind is the kind of a device.
type Kind string

// Device kinds.
const (
	GPU Kind = "gpu"
	NPU Kind = "npu"
)

// Node is what a node's labels tell of the devices it offers, for the shares of their slices. A zero
// field is unknown.
type Node struct {
	// NPUCores is the AI cores of one NPU chip: the Ascend device plugin's label servertype
	// ("Ascend910B-20": 20; mind-cluster v26.1.0 component/ascend-device-plugin/pkg/server/manager.go:281-295),
	// else the chip's from its label node.kubernetes.io/npu.chip.name. The plugin writes 1 or 8255
	// where its query of the chip failed (pkg/common/constants.go:479, ascendcommon.go:1288-1317): a
	// figure outside 8..48 is unknown.
	NPUCores int
	// GPUReplicas is how many replicas one GPU is shared as (time-slicing or MPS): GPU feature
	// discovery's label nvidia.com/gpu.replicas (NVIDIA/k8s-device-plugin v0.20.0 internal/lm/resource.go:208-215).
	GPUReplicas int
	// NPUSoftShare: the node shares its chips by percent (the label
	// huawei.com/scheduler.chip1softsharedev.enable=true, mind-cluster v26.1.0 docs/en/scheduling/api/k8s.md
	// "Node Labels"). Only there does a pod's SoftShareAnnotation make its whole-chip request a percent:
	// anyone who writes a pod may annotate it, and a node that does not share gives whole chips.
	NPUSoftShare bool
	// GPUProduct is the label nvidia.com/gpu.product ("A100-SXM4-40GB", "A30", and under the single MIG
	// strategy "A100-SXM4-40GB-MIG-1g.5gb"; internal/lm/mig-strategy.go:182-264).
	GPUProduct string
}

// Node labels read.
const (
	ServerTypeLabel  = "servertype"
	NPUChipNameLabel = "node.kubernetes.io/npu.chip.name"
	GPUReplicasLabel = "nvidia.com/gpu.replicas"
	GPUProductLabel  = "nvidia.com/gpu.product"
	SoftShareLabel   = "huawei.com/scheduler.chip1softsharedev.enable"
)

// NodeOf reads a node's labels.
func NodeOf(labels map[string]string) Node {
	var n Node
	if st := labels[ServerTypeLabel]; st != "" {
		// "<card type>-<AI cores>[-dual]" (manager.go:281-295; ascend-for-volcano plugin/vnode.go:331-341).
		if parts := strings.Split(st, "-"); len(parts) >= 2 {
			if c, err := strconv.Atoi(parts[1]); err == nil && c >= 8 && c <= 48 {
				n.NPUCores = c
			}
		}
	}
	if n.NPUCores == 0 {
		n.NPUCores = chipCores(labels[NPUChipNameLabel])
	}
	if r, err := strconv.Atoi(labels[GPUReplicasLabel]); err == nil && r > 0 {
		n.GPUReplicas = r
	}
	n.GPUProduct = labels[GPUProductLabel]
	n.NPUSoftShare = labels[SoftShareLabel] == "true"
	return n
}

// chipCores are the AI cores of an Ascend chip by its name (mind-cluster v26.1.0 docs/en/scheduling/usage/
// virtual_instance/virtual_instance_with_hdk/03_virtualization_templates.md, Table 1: training A1 30 or
// 32, A2 training 24, A2 inference 20, 310P 8; the B variants follow the templates ascend-for-volcano
// gives them, plugin/factory.go:199-227); 0 where unknown.
func chipCores(chip string) int {
	switch {
	case strings.HasPrefix(chip, "310P"):
		return 8
	case chip == "910ProB":
		return 30
	case chip == "910A", chip == "910ProA", chip == "910PremiumA":
		return 32
	case chip == "910B1", chip == "910B2", chip == "910B2C":
		return 24
	case chip == "910B3", chip == "910B4":
		return 20
	}
	return 0
}

// Unit is what one unit of an extended resource is.
type Unit struct {
	Kind Kind
	// Model is the device family the resource's name says ("Ascend910", "Ascend310P"), or the node's GPU
	// product where it is known; "" where neither says.
	Model string
	// Share is the share of one device one unit is: 1 for a whole device.
	Share float64
	// Exact is false where the share depends on what the node did not say (cores per chip, replicas,
	// the GPU a MIG profile is of) and a default was taken.
	Exact bool
}

var (
	// NVIDIA k8s-device-plugin v0.20.0, mixed MIG strategy: nvidia.com/mig-<g>g.<memory>gb, "+" of the
	// NVML profile written "." (internal/resource/nvml-mig-device.go:95-105): mig-1g.10gb.me.
	migName = regexp.MustCompile(`^nvidia\.com/mig-(\d+)g\.(\d+)gb(\..+)?$`)
	// The single MIG strategy's product label: <model>-MIG-<g>g.<memory>gb (mig-strategy.go:182-264).
	migProduct = regexp.MustCompile(`-MIG-(\d+)g\.(\d+)gb`)
	// Ascend static vNPU templates: huawei.com/<Ascend910|Ascend310P>-<AI cores>c[.<n>cpu][.<m>g][.dvpp|.ndvpp]
	// (mind-cluster v26.1.0 ascend-device-plugin pkg/common/device.go:416-438, constants.go:185-228).
	vnpuName = regexp.MustCompile(`^huawei\.com/(Ascend910|Ascend310P)-(\d+)c(\..+)?$`)
)

// Whole Ascend chips: every resource the device plugin offers for whole chips (api/default_name.go:31,
// 85, 109; pkg/common/constants.go:179-184, the 310P mixed-insert cards). Sites may rename them
// (customname/public_name_config.go); renamed resources are not counted.
var wholeNPUs = map[string]string{
	"huawei.com/Ascend910": "Ascend910", "huawei.com/Ascend310P": "Ascend310P", "huawei.com/Ascend310": "Ascend310",
	"huawei.com/npu": "Ascend950", "huawei.com/Ascend310P-V": "Ascend310P", "huawei.com/Ascend310P-VPro": "Ascend310P",
	"huawei.com/Ascend310P-IPro": "Ascend310P",
}

// WholeNPUResources are the names of the resources of whole Ascend chips, sorted.
func WholeNPUResources() []string {
	out := make([]string, 0, len(wholeNPUs))
	for n := range wholeNPUs {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// NPUCoreResource is Ascend's dynamic vNPU: one unit is one AI core of a chip (mind-cluster v26.1.0
// ascend-device-plugin pkg/common/constants.go:248 AiCoreResourceName; device.go:397-414).
const NPUCoreResource = "huawei.com/npu-core"

// SoftShareAnnotation on a pod says it asks a whole-chip resource in percent of one chip's AI cores
// (soft sharing, vCANN-RT: huawei.com/Ascend910: 50 is half a chip; mind-cluster v26.1.0
// ascend-common/api/consts.go:254-262, docs .../virtual_instance_with_vcann_rt/01_soft_allocation_scheduling_inference.md).
const SoftShareAnnotation = "huawei.com/scheduler.softShareDev.aicoreQuota"

// UnitOf says what one unit of the resource name is on node n (zero: unknown); softShare: the pod
// carries SoftShareAnnotation, which counts only on a node that shares its chips (Node.NPUSoftShare).
// ok is false for a resource that is no GPU or NPU.
func UnitOf(name string, n Node, softShare bool) (u Unit, ok bool) {
	switch {
	case name == "nvidia.com/gpu":
		u = Unit{Kind: GPU, Model: n.GPUProduct, Share: 1, Exact: true}
		if m := migProduct.FindStringSubmatch(n.GPUProduct); m != nil { // the single MIG strategy
			u.Share, u.Exact = migShare(m[1], m[2], n.GPUProduct)
		}
		return u, true
	case name == "nvidia.com/gpu.shared":
		// Time-slicing or MPS renamed: one replica of a GPU (README.md v0.20.0 l.402-452, 593-596).
		u = Unit{Kind: GPU, Model: strings.TrimSuffix(n.GPUProduct, "-SHARED"), Share: 1, Exact: n.GPUReplicas > 0}
		if n.GPUReplicas > 0 {
			u.Share = 1 / float64(n.GPUReplicas)
		}
		return u, true
	case migName.MatchString(name):
		m := migName.FindStringSubmatch(name)
		share, exact := migShare(m[1], m[2], n.GPUProduct)
		return Unit{Kind: GPU, Model: n.GPUProduct, Share: share, Exact: exact}, true
	case name == NPUCoreResource:
		cores, exact := n.NPUCores, n.NPUCores > 0
		if !exact {
			cores = 24 // an Atlas A2 training chip's, the commonest (03_virtualization_templates.md Table 1)
		}
		return Unit{Kind: NPU, Share: 1 / float64(cores), Exact: exact}, true
	}
	if model, whole := wholeNPUs[name]; whole {
		if softShare && n.NPUSoftShare {
			return Unit{Kind: NPU, Model: model, Share: 0.01, Exact: true}, true
		}
		return Unit{Kind: NPU, Model: model, Share: 1, Exact: true}, true
	}
	if m := vnpuName.FindStringSubmatch(name); m != nil {
		sliceCores, _ := strconv.Atoi(m[2])
		cores, exact := n.NPUCores, n.NPUCores > 0
		if !exact {
			cores = templateChipCores(m[1], m[3], sliceCores)
		}
		share := float64(sliceCores) / float64(cores)
		if share > 1 {
			share = 1
		}
		return Unit{Kind: NPU, Model: m[1], Share: share, Exact: exact}, true
	}
	return Unit{}, false
}

// templateChipCores is the AI cores of the chip a vNPU template is cut from, where the node does not
// say: 310P 8; the 910 templates with AICPU and memory suffixes are Atlas A2's, 20 cores for the
// inference family (5 and 10 cores: vir05, vir10) and 24 for the training one (vir03, vir06, vir12); the
// plain 910 templates (vir02-vir16) the Atlas training series' 32 (03_virtualization_templates.md
// Table 1; ascend-for-volcano plugin/factory.go:182-238).
func templateChipCores(family, suffix string, sliceCores int) int {
	switch {
	case family == "Ascend310P":
		return 8
	case suffix == "":
		return 32
	case sliceCores == 5 || sliceCores == 10:
		return 20
	}
	return 24
}

// migShare is a MIG profile's share of its GPU: its compute slices over the GPU's, 7 on every MIG GPU
// but the A30's and the RTX PRO Blackwell's 4 (NVIDIA MIG user guide, "Supported GPUs"; profiles per GPU
// from NVIDIA/mig-parted v0.15.0 deployments/systemd/config-default.yaml). The A30's profiles are its
// own (1g.6gb, 2g.12gb, 4g.24gb); elsewhere the GPU's product label decides, and without it 7 is taken.
func migShare(gs, mems, product string) (float64, bool) {
	g, _ := strconv.Atoi(gs)
	mem, _ := strconv.Atoi(mems)
	total, exact := 7, product != ""
	switch {
	case strings.Contains(product, "A30"), product == "" && a30Profile(g, mem):
		total, exact = 4, true
	case strings.Contains(product, "RTX PRO"):
		total = 4
	}
	if g > total {
		g = total
	}
	return float64(g) / float64(total), exact
}

func a30Profile(g, mem int) bool {
	return g == 1 && mem == 6 || g == 2 && mem == 12 || g == 4 && mem == 24
}

// Held is what is held of one resource of one model: its raw count, and the devices it is worth.
type Held struct {
	Kind Kind `json:"kind" enums:"gpu,npu"`
	// Resource is the extended resource's name (nvidia.com/mig-3g.40gb, huawei.com/Ascend910-4c), or for
	// devices allocated through Dynamic Resource Allocation "dra:" and the device class the claim's
	// request names (dra:gpu.nvidia.com, dra:mig.nvidia.com): a pod's claims as allocated, each device
	// valued on the driver's ResourceSlice (a whole GPU 1, a MIG device its profile's compute slices over
	// its GPU's; a claim shared by several pods split among them); a template's claim templates as they
	// ask (exactly.count devices of the class; of a firstAvailable list, its first choice), and where the
	// cluster's pods' claims are allocated more than that, per kind, what they were allocated (a later
	// firstAvailable choice, allocationMode All, a class of the cluster's own that selects NVIDIA's GPUs).
	// A claim shared by several Ray pods is split among them; its consumers that are no Ray pods take no
	// share. Devices of drivers other than NVIDIA's gpu.nvidia.com are not counted.
	Resource string `json:"resource" example:"huawei.com/Ascend910-4c"`
	// Model is the device family or product, where the name or the node says it; for a device allocated
	// through DRA the productName its ResourceSlice gives ("NVIDIA H100 80GB HBM3").
	Model string `json:"model,omitempty" example:"Ascend910"`
	// Count is the raw count: units of the resource, as the pods request them.
	Count float64 `json:"count" example:"8"`
	// Devices is what they are worth in whole devices: Count times one unit's share.
	Devices float64 `json:"devices" example:"1"`
	// Estimated says a unit's share was taken by default: the node did not say the cores of its chips,
	// the replicas of its GPUs, or the GPU a MIG profile is cut from.
	Estimated bool `json:"estimated,omitempty"`
}

// Holdings are what is held of each resource and model, ordered by kind, resource and model.
type Holdings []Held

// Add adds n units of u, a unit of the resource name.
func (h *Holdings) Add(name string, u Unit, n float64) {
	h.merge(Held{Kind: u.Kind, Resource: name, Model: u.Model, Count: n, Devices: n * u.Share, Estimated: !u.Exact})
}

// AddAll adds n times every holding of o.
func (h *Holdings) AddAll(o Holdings, n float64) {
	for _, x := range o {
		x.Count, x.Devices = x.Count*n, x.Devices*n
		h.merge(x)
	}
}

// MaxHeld bounds the holdings kept apart: anyone who writes a pod template may name any number of
// resources the patterns accept; those past the bound are summed in one holding of their kind named
// OtherResource.
const MaxHeld = 32

// OtherResource names the holding that sums, per kind, the resources past MaxHeld.
const OtherResource = "other"

func (h *Holdings) merge(x Held) {
	for i := range *h {
		if y := &(*h)[i]; y.Kind == x.Kind && y.Resource == x.Resource && y.Model == x.Model {
			y.Count += x.Count
			y.Devices += x.Devices
			y.Estimated = y.Estimated || x.Estimated
			return
		}
	}
	if len(*h) >= MaxHeld && x.Resource != OtherResource {
		x.Resource, x.Model = OtherResource, ""
		h.merge(x)
		return
	}
	at := len(*h)
	for i, y := range *h {
		if x.Kind < y.Kind || x.Kind == y.Kind && (x.Resource < y.Resource || x.Resource == y.Resource && x.Model < y.Model) {
			at = i
			break
		}
	}
	*h = append(*h, Held{})
	copy((*h)[at+1:], (*h)[at:])
	(*h)[at] = x
}

// Devices is the device equivalents held of a kind.
func (h Holdings) Devices(k Kind) float64 {
	var sum float64
	for _, x := range h {
		if x.Kind == k {
			sum += x.Devices
		}
	}
	return sum
}

// Catalog is what the cluster's nodes say of their devices, by node, kept by the watch cache: a pod's
// slices are worth their share on its node; a template's, where no node is chosen yet, on the node
// every node agrees on (Default).
type Catalog struct {
	mu      sync.RWMutex
	nodes   map[string]Node
	uniform Node
}

// NewCatalog returns an empty catalog.
func NewCatalog() *Catalog { return &Catalog{nodes: map[string]Node{}} }

// Set records what node name's labels say; a node whose labels say nothing of devices is forgotten.
func (c *Catalog) Set(name string, n Node) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if n == (Node{}) {
		delete(c.nodes, name)
	} else {
		c.nodes[name] = n
	}
	c.uniform = uniformOf(c.nodes)
}

// Delete forgets a node.
func (c *Catalog) Delete(name string) { c.Set(name, Node{}) }

// Of is what node name says; where it says nothing (or the pod has no node yet), Default.
func (c *Catalog) Of(name string) Node {
	c.mu.RLock()
	defer c.mu.RUnlock()
	n, ok := c.nodes[name]
	if !ok {
		return c.uniform
	}
	def := c.uniform
	if n.NPUCores == 0 {
		n.NPUCores = def.NPUCores
	}
	if n.GPUReplicas == 0 {
		n.GPUReplicas = def.GPUReplicas
	}
	if n.GPUProduct == "" {
		n.GPUProduct = def.GPUProduct
	}
	return n
}

// Default is what every node that says it agrees on: the cores of their NPU chips, the replicas of
// their shared GPUs, their GPU product; a figure the nodes disagree on is unknown.
func (c *Catalog) Default() Node {
	if c == nil {
		return Node{}
	}
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.uniform
}

func uniformOf(nodes map[string]Node) Node {
	var u Node
	cores, replicas, products := map[int]bool{}, map[int]bool{}, map[string]bool{}
	npuNodes, sharing := 0, 0
	for _, n := range nodes {
		if n.NPUCores > 0 || n.NPUSoftShare {
			npuNodes++
			if n.NPUSoftShare {
				sharing++
			}
		}
		if n.NPUCores > 0 {
			cores[n.NPUCores] = true
		}
		if n.GPUReplicas > 0 {
			replicas[n.GPUReplicas] = true
		}
		if n.GPUProduct != "" {
			products[strings.TrimSuffix(n.GPUProduct, "-SHARED")] = true
		}
	}
	for c := range cores {
		if len(cores) == 1 {
			u.NPUCores = c
		}
	}
	for r := range replicas {
		if len(replicas) == 1 {
			u.GPUReplicas = r
		}
	}
	for p := range products {
		if len(products) == 1 {
			u.GPUProduct = p
		}
	}
	// A template counts a soft share only where every NPU node shares its chips.
	u.NPUSoftShare = npuNodes > 0 && sharing == npuNodes
	return u
}

// DRAPrefix names what Dynamic Resource Allocation (resource.k8s.io/v1) allocates: a device allocated
// to a claim is held as the resource DRAPrefix + the device class its request names ("dra:gpu.nvidia.com"): the class is what a
// claim asks for, and what quotas count (requests.deviceclass.resource.kubernetes.io/<class>).
const DRAPrefix = "dra:"

// NVIDIA's DRA driver (NVIDIA/k8s-dra-driver-gpu v0.4.0): its name (cmd/gpu-kubelet-plugin/main.go:42),
// its devices' attributes (cmd/gpu-kubelet-plugin/deviceinfo.go:152-205 for a whole GPU, mig.go:139-168
// for a MIG device) and the classes its chart installs (deployments/helm/dra-driver-nvidia-gpu/templates/
// deviceclass-gpu.yaml, deviceclass-mig.yaml, deviceclass-vfio.yaml).
const (
	NVIDIADRADriver = "gpu.nvidia.com"
	// DRATypeAttr is "gpu", "mig" or "vfio"; DRAProductAttr the GPU's NVML name ("NVIDIA H100 80GB HBM3",
	// a MIG device's parent's); DRAProfileAttr a MIG device's profile ("3g.40gb").
	DRATypeAttr    = "type"
	DRAProductAttr = "productName"
	DRAProfileAttr = "profile"
)

// DRADevice is what the service reads of a device a ResourceSlice offers: its driver's attributes type,
// productName and profile.
type DRADevice struct {
	Type, Product, Profile string
}

// migProfile is a MIG profile as NVIDIA's DRA driver writes it: <g>g.<memory>gb[+me…].
var migProfile = regexp.MustCompile(`^(\d+)g\.(\d+)gb`)

// DRADeviceUnit says what one allocated device of a driver is: a whole GPU (type gpu or vfio) 1, a MIG
// device its profile's compute slices over its GPU's. ok is false for a device of another driver, or of a
// type the driver does not document.
func DRADeviceUnit(driver string, d DRADevice) (u Unit, ok bool) {
	if driver != NVIDIADRADriver {
		return Unit{}, false
	}
	switch d.Type {
	case "gpu", "vfio":
		return Unit{Kind: GPU, Model: d.Product, Share: 1, Exact: true}, true
	case "mig":
		u = Unit{Kind: GPU, Model: d.Product, Share: 1.0 / 7}
		if m := migProfile.FindStringSubmatch(d.Profile); m != nil {
			u.Share, u.Exact = migShare(m[1], m[2], d.Product)
		}
		return u, true
	}
	return Unit{}, false
}

// DRAClassUnit says what one device of a device class is, for a claim not allocated yet: the classes
// NVIDIA's DRA driver installs. A whole GPU's is exact; a MIG device's (of a profile the class does not
// say) is taken as the smallest profile of a 7-slice GPU, estimated. ok is false for another class,
// which the service cannot tell the devices of before they are allocated.
func DRAClassUnit(class string) (u Unit, ok bool) {
	switch class {
	case "gpu.nvidia.com", "vfio.gpu.nvidia.com":
		return Unit{Kind: GPU, Share: 1, Exact: true}, true
	case "mig.nvidia.com":
		return Unit{Kind: GPU, Share: 1.0 / 7}, true
	}
	return Unit{}, false
}

// Max is, per resource and model, the larger of h's and o's holdings: what a pod holds of its app
// containers and of an init container (run before them), as the scheduler counts each resource.
func (h Holdings) Max(o Holdings) Holdings {
	var out Holdings
	for _, x := range h {
		out.merge(x)
	}
	for _, x := range o {
		found := false
		for i := range out {
			if y := &out[i]; y.Kind == x.Kind && y.Resource == x.Resource && y.Model == x.Model {
				found = true
				if x.Devices > y.Devices {
					*y = x
				}
			}
		}
		if !found {
			out.merge(x)
		}
	}
	return out
}
