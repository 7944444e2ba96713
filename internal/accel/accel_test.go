package accel

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
)

// Every resource name the vendors' device plugins offer, with the share of a device one unit is, by
// the sources cited in accel.go.
func TestUnitOf(t *testing.T) {
	a100 := Node{GPUProduct: "A100-SXM4-80GB"}
	a30 := Node{GPUProduct: "A30"}
	shared := Node{GPUProduct: "A100-SXM4-80GB-SHARED", GPUReplicas: 4}
	npu32 := NodeOf(map[string]string{ServerTypeLabel: "Ascend910-32"})
	npu20 := NodeOf(map[string]string{ServerTypeLabel: "Ascend910B-20"})
	for _, c := range []struct {
		name      string
		node      Node
		soft      bool
		kind      Kind
		model     string
		share     float64
		estimated bool
	}{
		{"nvidia.com/gpu", Node{}, false, GPU, "", 1, false},
		{"nvidia.com/gpu", Node{GPUProduct: "A100-SXM4-40GB-MIG-3g.20gb"}, false, GPU, "A100-SXM4-40GB-MIG-3g.20gb", 3.0 / 7, false},
		{"nvidia.com/mig-3g.40gb", a100, false, GPU, "A100-SXM4-80GB", 3.0 / 7, false},
		{"nvidia.com/mig-3g.40gb", Node{}, false, GPU, "", 3.0 / 7, true},
		{"nvidia.com/mig-1g.10gb.me", a100, false, GPU, "A100-SXM4-80GB", 1.0 / 7, false},
		{"nvidia.com/mig-2g.12gb", a30, false, GPU, "A30", 2.0 / 4, false},
		{"nvidia.com/mig-2g.12gb", Node{}, false, GPU, "", 2.0 / 4, false},
		{"nvidia.com/gpu.shared", shared, false, GPU, "A100-SXM4-80GB", 0.25, false},
		{"nvidia.com/gpu.shared", Node{}, false, GPU, "", 1, true},
		{"huawei.com/Ascend910", npu32, false, NPU, "Ascend910", 1, false},
		{"huawei.com/Ascend910", Node{NPUCores: 32, NPUSoftShare: true}, true, NPU, "Ascend910", 0.01, false},
		// Anyone who writes a pod may annotate it: on a node that does not share its chips, the chips are whole.
		{"huawei.com/Ascend910", npu32, true, NPU, "Ascend910", 1, false},
		{"huawei.com/npu", Node{}, false, NPU, "Ascend950", 1, false},
		{"huawei.com/Ascend910-4c", npu32, false, NPU, "Ascend910", 4.0 / 32, false},
		{"huawei.com/Ascend910-4c", Node{}, false, NPU, "Ascend910", 4.0 / 32, true},
		{"huawei.com/Ascend910-10c.3cpu.16g", npu20, false, NPU, "Ascend910", 0.5, false},
		{"huawei.com/Ascend910-10c.3cpu.16g", Node{}, false, NPU, "Ascend910", 0.5, true},
		{"huawei.com/Ascend910-6c.1cpu.16g", Node{}, false, NPU, "Ascend910", 0.25, true},
		{"huawei.com/Ascend310P-2c.1cpu", Node{}, false, NPU, "Ascend310P", 0.25, true},
		{"huawei.com/Ascend310P-V", Node{}, false, NPU, "Ascend310P", 1, false},
		{"huawei.com/npu-core", npu20, false, NPU, "", 1.0 / 20, false},
	} {
		u, ok := UnitOf(c.name, c.node, c.soft)
		if assert.True(t, ok, c.name) {
			assert.Equal(t, c.kind, u.Kind, c.name)
			assert.Equal(t, c.model, u.Model, c.name)
			assert.InDelta(t, c.share, u.Share, 1e-9, "%s on %+v", c.name, c.node)
			assert.Equal(t, c.estimated, !u.Exact, "%s on %+v", c.name, c.node)
		}
	}
	for _, name := range []string{"cpu", "memory", "nvidia.com/gpux", "huawei.com/Ascend910x", "example.com/fpga", "nvidia.com/mig-"} {
		_, ok := UnitOf(name, Node{}, false)
		assert.False(t, ok, name)
	}
}

// The labels of a node: the Ascend device plugin's servertype, else its chip name; a core count the
// plugin writes where its query failed (1, 8255) is unknown.
func TestNodeOf(t *testing.T) {
	assert.Equal(t, 20, NodeOf(map[string]string{ServerTypeLabel: "Ascend910B-20"}).NPUCores)
	assert.Equal(t, 8, NodeOf(map[string]string{ServerTypeLabel: "Ascend310P-8-dual"}).NPUCores)
	assert.Equal(t, 24, NodeOf(map[string]string{ServerTypeLabel: "Ascend910B-8255", NPUChipNameLabel: "910B2"}).NPUCores)
	assert.Equal(t, 0, NodeOf(map[string]string{ServerTypeLabel: "Ascend910-1"}).NPUCores)
	n := NodeOf(map[string]string{GPUReplicasLabel: "4", GPUProductLabel: "H100-80GB-HBM3"})
	assert.Equal(t, Node{GPUReplicas: 4, GPUProduct: "H100-80GB-HBM3"}, n)
}

// Eight 4-core slices of a 32-core chip are one chip; the raw counts stay beside the equivalents, per
// resource and model, in order.
func TestHoldings(t *testing.T) {
	var h Holdings
	npu32 := Node{NPUCores: 32}
	u, _ := UnitOf("huawei.com/Ascend910-4c", npu32, false)
	h.Add("huawei.com/Ascend910-4c", u, 8)
	mig, _ := UnitOf("nvidia.com/mig-3g.40gb", Node{GPUProduct: "H100-80GB-HBM3"}, false)
	h.Add("nvidia.com/mig-3g.40gb", mig, 2)
	sh, _ := UnitOf("nvidia.com/gpu.shared", Node{}, false)
	h.Add("nvidia.com/gpu.shared", sh, 1)
	var total Holdings
	total.AddAll(h, 2)
	assert.InDelta(t, 2.0, total.Devices(NPU), 1e-9)
	assert.InDelta(t, 2*(6.0/7+1), total.Devices(GPU), 1e-9)
	assert.Equal(t, []string{"nvidia.com/gpu.shared", "nvidia.com/mig-3g.40gb", "huawei.com/Ascend910-4c"},
		[]string{total[0].Resource, total[1].Resource, total[2].Resource})
	assert.InDelta(t, 16.0, total[2].Count, 0)
	assert.True(t, total[0].Estimated)
	assert.False(t, total[1].Estimated)
}

// A pod's node says what its slices are worth; where it says nothing, or no node is chosen, what every
// node agrees on; a figure nodes disagree on is unknown.
func TestCatalog(t *testing.T) {
	c := NewCatalog()
	assert.Equal(t, Node{}, c.Default())
	c.Set("a", Node{NPUCores: 32, GPUReplicas: 4, GPUProduct: "A100-SXM4-80GB-SHARED"})
	c.Set("b", Node{NPUCores: 32, GPUProduct: "A100-SXM4-80GB"})
	c.Set("cpu-only", Node{})
	assert.Equal(t, Node{NPUCores: 32, GPUReplicas: 4, GPUProduct: "A100-SXM4-80GB"}, c.Default())
	assert.Equal(t, Node{NPUCores: 32, GPUReplicas: 4, GPUProduct: "A100-SXM4-80GB"}, c.Of("b"), "b says no replicas: the agreed ones")
	assert.Equal(t, c.Default(), c.Of(""), "not yet on a node")
	c.Set("c", Node{NPUCores: 20})
	assert.Equal(t, 0, c.Default().NPUCores, "the nodes disagree")
	assert.Equal(t, 20, c.Of("c").NPUCores)
	c.Delete("c")
	assert.Equal(t, 32, c.Default().NPUCores)
	var none *Catalog
	assert.Equal(t, Node{}, none.Default())
}

// A template counts a soft share only where every node with NPUs shares its chips.
func TestCatalogSoftShare(t *testing.T) {
	c := NewCatalog()
	c.Set("a", NodeOf(map[string]string{ServerTypeLabel: "Ascend910-32", SoftShareLabel: "true"}))
	assert.True(t, c.Default().NPUSoftShare)
	c.Set("b", NodeOf(map[string]string{ServerTypeLabel: "Ascend910-32"}))
	assert.False(t, c.Default().NPUSoftShare)
	assert.True(t, c.Of("a").NPUSoftShare)
	assert.False(t, c.Of("b").NPUSoftShare)
}

func TestDRAUnits(t *testing.T) {
	u, ok := DRADeviceUnit("gpu.nvidia.com", DRADevice{Type: "gpu", Product: "NVIDIA H100 80GB HBM3"})
	assert.True(t, ok)
	assert.Equal(t, Unit{Kind: GPU, Model: "NVIDIA H100 80GB HBM3", Share: 1, Exact: true}, u)
	u, ok = DRADeviceUnit("gpu.nvidia.com", DRADevice{Type: "mig", Product: "NVIDIA A30", Profile: "2g.12gb"})
	assert.True(t, ok)
	assert.InDelta(t, 0.5, u.Share, 1e-9, "an A30 has 4 compute slices")
	assert.True(t, u.Exact)
	u, _ = DRADeviceUnit("gpu.nvidia.com", DRADevice{Type: "mig", Product: "NVIDIA H100 80GB HBM3", Profile: "1g.10gb+me"})
	assert.InDelta(t, 1.0/7, u.Share, 1e-9)
	u, _ = DRADeviceUnit("gpu.nvidia.com", DRADevice{Type: "mig"})
	assert.False(t, u.Exact, "no profile: estimated")
	_, ok = DRADeviceUnit("gpu.nvidia.com", DRADevice{Type: "channel"})
	assert.False(t, ok)
	_, ok = DRADeviceUnit("gpu.example.com", DRADevice{Type: "gpu"})
	assert.False(t, ok)
	u, ok = DRAClassUnit("gpu.nvidia.com")
	assert.True(t, ok && u.Exact && u.Share == 1)
	u, ok = DRAClassUnit("mig.nvidia.com")
	assert.True(t, ok && !u.Exact)
	_, ok = DRAClassUnit("compute-domain-default-channel.nvidia.com")
	assert.False(t, ok)
}

// Past MaxHeld resources, what is held is summed in one holding of its kind: nothing is lost, nothing
// grows without bound.
func TestHoldingsBounded(t *testing.T) {
	var h Holdings
	u := Unit{Kind: GPU, Share: 0.5, Exact: true}
	for i := range 100 {
		h.Add(fmt.Sprintf("nvidia.com/mig-1g.%dgb", i+1), u, 2)
	}
	assert.LessOrEqual(t, len(h), MaxHeld+1)
	assert.InDelta(t, 100.0, h.Devices(GPU), 1e-9)
	other := 0.0
	for _, x := range h {
		if x.Resource == OtherResource {
			other = x.Count
		}
	}
	assert.InDelta(t, 2*float64(100-MaxHeld), other, 1e-9)
}
