package usage

import (
	"encoding/csv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"ray-service/internal/ray"
)

func at(s string) time.Time {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		panic(err)
	}
	return t
}

func TestDayOf(t *testing.T) {
	assert.Equal(t, at("2026-12-02T00:00:00Z").Unix(), DayOf(at("2026-12-02T23:59:59Z")))
	assert.Equal(t, at("2026-12-03T00:00:00Z").Unix(), DayOf(at("2026-12-03T00:00:00Z")))
	assert.Equal(t, at("1969-12-31T00:00:00Z").Unix(), DayOf(at("1969-12-31T12:00:00Z")))
}

// A cluster held over midnight is credited to each day for the seconds it held in that day, with its
// requests, and a start on the day it began.
func TestLedgerCreditsSplitAtMidnight(t *testing.T) {
	l := NewLedger()
	m := &Mark{UID: "u1", Since: at("2026-12-02T22:00:00Z")}
	st := State{Kind: "RayCluster", Namespace: "team-a", Name: "c", Cluster: "c", Creator: "alice", Holding: true,
		Requests: ray.Resources{CPU: 2.5, MemoryBytes: 4 << 30, GPU: 1}}
	l.Change(m, st, at("2026-12-02T22:00:00Z"))
	l.Credit(m, at("2026-12-03T01:30:00Z"))
	d1 := l.Deltas[Key{"u1", at("2026-12-02T00:00:00Z").Unix()}]
	d2 := l.Deltas[Key{"u1", at("2026-12-03T00:00:00Z").Unix()}]
	require.NotNil(t, d1)
	require.NotNil(t, d2)
	assert.InDelta(t, 7200.0, d1.HeldSeconds, 1e-9)
	assert.InDelta(t, 5400.0, d2.HeldSeconds, 1e-9)
	assert.InDelta(t, 2.5*7200, d1.CPUSeconds, 1e-9)
	assert.InDelta(t, float64(4<<30)*5400, d2.MemoryByteSeconds, 1)
	assert.InDelta(t, 5400.0, d2.GPUSeconds, 1e-9)
	assert.Equal(t, int64(1), d1.Starts)
	assert.Zero(t, d2.Starts)
	assert.Zero(t, d1.IdleSeconds, "not idle")
	assert.Equal(t, at("2026-12-03T01:30:00Z"), l.Marks["u1"].Since)

	// Idle from then on, for 10 minutes, then stopped: idle seconds with the GPU held; nothing while stopped.
	idle := st
	idle.Idle = true
	l.Change(m, idle, at("2026-12-03T01:30:00Z"))
	stopped := idle
	stopped.Holding = false
	l.Change(m, stopped, at("2026-12-03T01:40:00Z"))
	l.Credit(m, at("2026-12-03T05:00:00Z"))
	assert.InDelta(t, 600.0, d2.IdleSeconds, 1e-9)
	assert.InDelta(t, 600.0, d2.IdleGPUSeconds, 1e-9)
	assert.InDelta(t, 6000.0, d2.HeldSeconds, 1e-9)
	assert.False(t, l.Marks["u1"].Holding)

	// Started again: a second run; a clock stepping back credits nothing.
	l.Change(m, st, at("2026-12-03T06:00:00Z"))
	assert.Equal(t, int64(1), d2.Starts)
	l.Credit(m, at("2026-12-03T05:00:00Z"))
	assert.InDelta(t, 6000.0, d2.HeldSeconds, 1e-9)
}

// An idle cluster without accelerators is not counted idle: idle hours are of clusters holding GPUs
// or NPUs.
func TestIdleOnlyWithAccelerators(t *testing.T) {
	l := NewLedger()
	m := &Mark{UID: "u", Since: at("2026-12-02T10:00:00Z")}
	l.Change(m, State{Holding: true, Idle: true, Requests: ray.Resources{CPU: 4}}, m.Since)
	l.Credit(m, at("2026-12-02T11:00:00Z"))
	f := l.Deltas[Key{"u", at("2026-12-02T00:00:00Z").Unix()}]
	assert.InDelta(t, 3600.0, f.HeldSeconds, 1e-9)
	assert.Zero(t, f.IdleSeconds)
}

// A ledger whose write failed goes back under the newer one: figures add, the newer marks win.
func TestLedgerMerge(t *testing.T) {
	failed, newer := NewLedger(), NewLedger()
	m := &Mark{UID: "u", Since: at("2026-12-02T10:00:00Z")}
	failed.Change(m, State{Holding: true, Requests: ray.Resources{CPU: 1}}, m.Since)
	failed.Credit(m, at("2026-12-02T10:10:00Z"))
	newer.Credit(m, at("2026-12-02T10:20:00Z"))
	failed.Measured[1] = 5
	newer.Merge(failed)
	f := newer.Deltas[Key{"u", at("2026-12-02T00:00:00Z").Unix()}]
	assert.InDelta(t, 1200.0, f.HeldSeconds, 1e-9)
	assert.Equal(t, int64(1), f.Starts)
	assert.Equal(t, at("2026-12-02T10:20:00Z"), newer.Marks["u"].Since)
	assert.InDelta(t, 5.0, newer.Measured[1], 0)
	// Use credited without moving the mark names its owner.
	u := NewLedger()
	u.Used(m, 7, 1, 2, 3, 4)
	owner, ok := u.Owner("u")
	assert.True(t, ok)
	assert.Empty(t, u.Marks)
	assert.True(t, owner.Holding)
}

func figures(held, cpu, gpu, usedCPU float64) Figures {
	return Figures{HeldSeconds: held, CPUSeconds: cpu, GPUSeconds: gpu, UsedCPUSeconds: usedCPU}
}

func TestBuildSortsSharesAndPages(t *testing.T) {
	day := at("2026-12-02T00:00:00Z")
	q := Query{From: day, To: day.Add(24 * time.Hour), GroupBy: ByNamespace, Now: day.Add(30 * time.Hour)}
	groups := []Group{
		{Key: GroupKey{Namespace: "a"}, Total: figures(3600, 7200, 0, 3600), Objects: 1,
			Days: map[int64]*Figures{day.Unix(): {HeldSeconds: 3600, CPUSeconds: 7200, UsedCPUSeconds: 3600}}},
		{Key: GroupKey{Namespace: "b"}, Total: figures(7200, 3600*6, 7200, 0), Objects: 2,
			Days: map[int64]*Figures{day.Unix(): {HeldSeconds: 7200, CPUSeconds: 3600 * 6, GPUSeconds: 7200}}},
		{Key: GroupKey{Namespace: "c"}, Total: figures(0, 0, 0, 0), Days: map[int64]*Figures{}},
	}
	rep := Build(q, Result{Groups: groups, Measured: map[int64]float64{day.Unix(): 86400}}, "cpuCoreHours", "desc", 1, 2)
	require.Len(t, rep.Items, 2)
	assert.Equal(t, 3, rep.Total)
	assert.Equal(t, "b", rep.Items[0].Namespace)
	assert.Equal(t, "a", rep.Items[1].Namespace)
	assert.InDelta(t, 6.0, rep.Items[0].Allocated.CPUCoreHours, 1e-9)
	assert.InDelta(t, 2.0, rep.Items[0].Allocated.GPUHours, 1e-9)
	assert.InDelta(t, 0.75, rep.Items[0].Share.CPU, 1e-9)
	assert.InDelta(t, 1.0, rep.Items[0].Share.GPU, 1e-9)
	require.NotNil(t, rep.Items[1].Used)
	require.NotNil(t, rep.Items[1].Ratio.CPU)
	assert.InDelta(t, 0.5, *rep.Items[1].Ratio.CPU, 1e-9)
	assert.Nil(t, rep.Items[1].Ratio.GPU, "nothing allocated: no ratio")
	assert.InDelta(t, 8.0, rep.Whole.Allocated.CPUCoreHours, 1e-9)
	assert.Equal(t, int64(3), rep.Whole.Objects)
	require.Len(t, rep.Whole.Series, 1)
	assert.Empty(t, rep.Warnings)

	asc := Build(q, Result{Groups: groups}, "name", "asc", 2, 2)
	require.Len(t, asc.Items, 1)
	assert.Equal(t, "c", asc.Items[0].Namespace)
	assert.Nil(t, asc.Items[0].Used, "nothing measured: no used figures")
	require.Len(t, asc.Warnings, 1)
	assert.Contains(t, asc.Warnings[0], "not measured")

	part := Build(q, Result{Groups: groups, Measured: map[int64]float64{day.Unix(): 3600}}, "runs", "desc", 1, 0)
	assert.Len(t, part.Items, 3, "pageSize 0: every row")
	require.Len(t, part.Warnings, 1)
	assert.Contains(t, part.Warnings[0], "1.0 of the window's 24.0 hours")
}

// By cluster a store reads a page of clusters (Query.Page) and the whole's days apart: the report is that
// page, in its order, of the count read, and the whole's series and figures are those days.
func TestBuildAPage(t *testing.T) {
	day := at("2026-12-02T00:00:00Z")
	q := Query{From: day, To: day.Add(48 * time.Hour), GroupBy: ByCluster, Now: day.Add(48 * time.Hour)}
	groups := []Group{
		{Key: GroupKey{Namespace: "a", Cluster: "x", UID: "1"}, Total: figures(3600, 3600, 0, 0), Objects: 1},
		{Key: GroupKey{Namespace: "b", Cluster: "z", UID: "3"}, Total: figures(3600, 3600*3, 0, 0), Objects: 1,
			Days: map[int64]*Figures{day.Unix(): {HeldSeconds: 3600, CPUSeconds: 3600 * 3}}},
	}
	whole := map[int64]*Figures{day.Unix(): {HeldSeconds: 7200, CPUSeconds: 3600 * 4}, day.Unix() + 86400: {HeldSeconds: 3600, CPUSeconds: 7200}}
	rep := Build(q, Result{Groups: groups, Whole: whole, Paged: true, Count: 5}, "cpuCoreHours", "desc", 2, 2)
	require.Len(t, rep.Items, 2)
	assert.Equal(t, "1", rep.Items[0].UID, "in the page's order, not sorted again")
	assert.Equal(t, "3", rep.Items[1].UID)
	require.Len(t, rep.Items[1].Series, 1)
	assert.Equal(t, 5, rep.Total)
	assert.Equal(t, 2, rep.Page)
	assert.InDelta(t, 6.0, rep.Whole.Allocated.CPUCoreHours, 1e-9, "the whole's figures are its days'")
	require.Len(t, rep.Whole.Series, 2, "the whole's days as read")
	assert.InDelta(t, 4.0, rep.Whole.Series[0].Allocated.CPUCoreHours, 1e-9)
	assert.InDelta(t, 2.0, rep.Whole.Series[1].Allocated.CPUCoreHours, 1e-9)
	assert.Equal(t, int64(5), rep.Whole.Objects)
	assert.InDelta(t, 0.5, rep.Items[1].Share.CPU, 1e-9, "a share of the whole")
}

func TestCSV(t *testing.T) {
	day := at("2026-12-02T00:00:00Z")
	q := Query{From: day, To: day.Add(24 * time.Hour), GroupBy: ByCreator, Now: day.Add(24 * time.Hour)}
	rep := Build(q, Result{Groups: []Group{{Key: GroupKey{Creator: "=HYPERLINK(\"x\")"}, Total: figures(3600, 3600, 0, 0), Objects: 1}}}, "name", "asc", 1, 0)
	records, err := csv.NewReader(strings.NewReader(string(CSV(rep)))).ReadAll()
	require.NoError(t, err)
	require.Len(t, records, 2)
	assert.Equal(t, "creator", records[0][0])
	assert.Equal(t, "'=HYPERLINK(\"x\")", records[1][0], "a formula is kept as text")
	assert.Equal(t, "1", records[1][2], "cpuCoreHours")
	assert.Empty(t, records[1][6], "used not measured: empty")
}

func TestQuotaFigures(t *testing.T) {
	q := func(name string, hard, used corev1.ResourceList) corev1.ResourceQuota {
		return corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Name: name}, Status: corev1.ResourceQuotaStatus{Hard: hard, Used: used}}
	}
	out := QuotaFigures([]corev1.ResourceQuota{
		q("wide", corev1.ResourceList{"requests.cpu": resource.MustParse("100"), "requests.nvidia.com/gpu": resource.MustParse("8"),
			"pods": resource.MustParse("50")},
			corev1.ResourceList{"requests.cpu": resource.MustParse("10"), "requests.nvidia.com/gpu": resource.MustParse("4")}),
		q("gpus", corev1.ResourceList{"requests.nvidia.com/gpu": resource.MustParse("4")},
			corev1.ResourceList{"requests.nvidia.com/gpu": resource.MustParse("4")}),
	})
	require.Len(t, out, 2, "pods are not counted")
	assert.Equal(t, "requests.cpu", out[0].Resource)
	assert.InDelta(t, 0.1, *out[0].Ratio, 1e-9)
	assert.Equal(t, "requests.nvidia.com/gpu", out[1].Resource)
	assert.Equal(t, "gpus", out[1].Quota, "the lowest limit binds")
	assert.InDelta(t, 1.0, *out[1].Ratio, 1e-9)

	// Slices, shared GPUs and the devices of DRA's device classes are counted; other extended resources
	// and DRA's claim count are not.
	var names []string
	for _, f := range QuotaFigures([]corev1.ResourceQuota{q("accelerators", corev1.ResourceList{
		"requests.nvidia.com/mig-3g.40gb": resource.MustParse("2"), "requests.nvidia.com/gpu.shared": resource.MustParse("4"),
		"requests.huawei.com/Ascend910-4c": resource.MustParse("8"), "requests.huawei.com/npu-core": resource.MustParse("32"),
		"gpu.nvidia.com.deviceclass.resource.k8s.io/devices":         resource.MustParse("4"),
		"requests.deviceclass.resource.kubernetes.io/gpu.nvidia.com": resource.MustParse("4"),
		"requests.example.com/fpga":                                  resource.MustParse("1"), "resourceclaims": resource.MustParse("10"),
		"count/resourceclaims.resource.k8s.io": resource.MustParse("10")}, nil)}) {
		names = append(names, f.Resource)
	}
	assert.Equal(t, []string{"gpu.nvidia.com.deviceclass.resource.k8s.io/devices", "requests.deviceclass.resource.kubernetes.io/gpu.nvidia.com",
		"requests.huawei.com/Ascend910-4c", "requests.huawei.com/npu-core", "requests.nvidia.com/gpu.shared", "requests.nvidia.com/mig-3g.40gb"}, names)
}

// Clusters of equal figures are sorted by namespace, then cluster, then UID: a namespace that another
// begins with comes first, whatever the byte after it.
func TestBuildSortsClustersByTheirNameInParts(t *testing.T) {
	day := at("2026-12-02T00:00:00Z")
	q := Query{From: day, To: day.Add(24 * time.Hour), GroupBy: ByCluster, Now: day.Add(24 * time.Hour)}
	var groups []Group
	for _, k := range []GroupKey{{Namespace: "team-a", Cluster: "x", UID: "3"}, {Namespace: "team", Cluster: "x-y", UID: "2"},
		{Namespace: "team", Cluster: "x", UID: "1"}, {Namespace: "team", Cluster: "x", UID: "0"}} {
		groups = append(groups, Group{Key: k, Total: figures(3600, 3600, 0, 0), Objects: 1})
	}
	for _, sortBy := range []string{"cpuCoreHours", "name"} {
		rep := Build(q, Result{Groups: groups}, sortBy, "asc", 1, 0)
		var uids []string
		for _, r := range rep.Items {
			uids = append(uids, r.UID)
		}
		assert.Equal(t, []string{"0", "1", "2", "3"}, uids, sortBy)
	}
}
