package usage

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"

	"ray-service/internal/accel"
)

// The groupings of a report.
const (
	ByNamespace = "namespace"
	ByCreator   = "creator"
	ByKind      = "kind"
	ByCluster   = "cluster"
)

// GroupBys are the groupings a report takes.
var GroupBys = []string{ByNamespace, ByCreator, ByKind, ByCluster}

// SortKeys are what a report's rows are sorted by; ties are broken by the group's name, ascending.
var SortKeys = []string{"name", "cpuCoreHours", "memoryGiBHours", "gpuHours", "npuHours", "heldHours", "idleHours",
	"idleAcceleratorHours", "usedCpuCoreHours", "usedMemoryGiBHours", "usedGpuHours", "usedNpuHours", "objects", "runs"}

// Query is what a report is asked for: the days from From (a UTC midnight) up to To (a later one), the
// grouping, and what may be counted.
type Query struct {
	From, To time.Time
	GroupBy  string
	// Scopes are, by kind (RayCluster, RayJob, RayService), the namespaces whose objects of that kind may
	// be counted: nil for all; a kind absent counts none.
	Scopes map[string][]string
	// Creators, where set, keep only the objects of these creators.
	Creators []string
	// Now bounds the credit of objects holding now, counted from their last credit up to Now (or To).
	Now time.Time
	// Page, where set and grouped by cluster, asks for a page of the clusters, sorted, in place of every
	// cluster (Result.Paged): the database sums each cluster by what it is sorted by, sorts and pages them,
	// and reads those on the page alone whole. A month of 10,000 clusters is then read as two rows a
	// cluster (see the store), and the whole's days apart (Result.Whole).
	Page *Page
}

// Page is a page of a report by cluster: sorted by SortBy (one of SortKeys), descending where Desc, ties
// broken by the cluster's name ascending (as Build sorts), the Limit rows from Offset. With no Limit it is
// every cluster, each summed without its days (CSV).
type Page struct {
	SortBy        string
	Desc          bool
	Offset, Limit int
}

// SortColumns are the figures (of Columns) that sortBy (one of SortKeys) sorts by: none for the name and
// the objects (a cluster is one).
func SortColumns(sortBy string) []string {
	if cols, ok := sortColumns[sortBy]; ok {
		return slices.Clone(cols)
	}
	return []string{"cpu_seconds"}
}

// sortColumns are SortColumns' answers but the default (core-hours).
var sortColumns = map[string][]string{"name": {}, "objects": {}, "memoryGiBHours": {"memory_byte_seconds"},
	"gpuHours": {"gpu_seconds"}, "npuHours": {"npu_seconds"}, "heldHours": {"held_seconds"}, "idleHours": {"idle_seconds"},
	"idleAcceleratorHours": {"idle_gpu_seconds", "idle_npu_seconds"}, "usedCpuCoreHours": {"used_cpu_seconds"},
	"usedMemoryGiBHours": {"used_memory_byte_seconds"}, "usedGpuHours": {"used_gpu_seconds"}, "usedNpuHours": {"used_npu_seconds"},
	"runs": {"starts"}}

// Result is what a report is built from.
type Result struct {
	Groups []Group
	// Measured are the seconds of each day whose use was measured.
	Measured map[int64]float64
	// Whole is the days of every group together where the groups are a page (Query.Page); nil: the
	// groups' days are summed. WholeHeld is, then, their accelerator-seconds.
	Whole     map[int64]*Figures
	WholeHeld HeldSums
	// Paged says that Groups are the page asked for (Query.Page), in its order, of Count groups in all,
	// whose figures together are Whole's days.
	Paged bool
	Count int
}

// GroupKey names a group: the fields of the grouping set, the others empty.
type GroupKey struct {
	Namespace string `json:"namespace,omitempty"`
	// Creator is the creator the service signed; empty (grouped by creator) for the objects whose creator
	// it did not sign: unverified, billed to no one.
	Creator string `json:"creator,omitempty"`
	Kind    string `json:"kind,omitempty"`
	// Cluster and Name (grouped by cluster): the Ray cluster, and the object it is counted to.
	Cluster string `json:"cluster,omitempty"`
	Name    string `json:"name,omitempty"`
	// UID is the Ray cluster's (grouped by cluster): a name used again is another row.
	UID string `json:"uid,omitempty"`
}

// label is the group's name as its rows are sorted by it.
func (k GroupKey) label(by string) string {
	switch by {
	case ByNamespace:
		return k.Namespace
	case ByCreator:
		return k.Creator
	case ByKind:
		return k.Kind
	}
	// By namespace, then cluster, then UID: NUL is below every byte of a name, so the names compare as
	// the three in turn (as the store's page sorts them, column by column).
	return k.Namespace + "\x00" + k.Cluster + "\x00" + k.UID
}

// Group is what the store sums for a group: over the window and per day, with its count of objects,
// and its accelerator-seconds over the window by resource and model.
type Group struct {
	Key     GroupKey
	Total   Figures
	Days    map[int64]*Figures
	Objects int64
	Held    HeldSums
}

// HeldID names an accelerator resource and model.
type HeldID struct {
	Kind            accel.Kind
	Resource, Model string
}

// HeldSums are accelerator-seconds by resource and model.
type HeldSums map[HeldID]*HeldSeconds

func (h HeldSums) add(id HeldID, s HeldSeconds) {
	if h[id] == nil {
		h[id] = &HeldSeconds{}
	}
	h[id].add(s)
}

// AcceleratorHours are the hours one accelerator resource and model was held: its units times the hours
// (the raw count: eight vNPU slices held for an hour are 8), and their device equivalents times the hours
// (what allocated's gpuHours and npuHours sum).
type AcceleratorHours struct {
	Kind     accel.Kind `json:"kind" enums:"gpu,npu"`
	Resource string     `json:"resource" example:"huawei.com/Ascend910-4c"`
	Model    string     `json:"model,omitempty" example:"Ascend910"`
	// Hours are unit-hours: the raw count held times the hours.
	Hours float64 `json:"hours" example:"8"`
	// DeviceHours are device-hours: the units' worth in whole devices times the hours.
	DeviceHours float64 `json:"deviceHours" example:"1"`
}

// acceleratorHours lists h sorted by kind, resource and model.
func acceleratorHours(h HeldSums) []AcceleratorHours {
	out := make([]AcceleratorHours, 0, len(h))
	for id, s := range h {
		out = append(out, AcceleratorHours{Kind: id.Kind, Resource: id.Resource, Model: id.Model,
			Hours: s.CountSeconds / hour, DeviceHours: s.DeviceSeconds / hour})
	}
	slices.SortFunc(out, func(a, b AcceleratorHours) int {
		return cmp.Or(cmp.Compare(a.Kind, b.Kind), cmp.Compare(a.Resource, b.Resource), cmp.Compare(a.Model, b.Model))
	})
	return out
}

// Hours are resource-hours: core-hours, GiB-hours, GPU-hours, NPU-hours.
type Hours struct {
	CPUCoreHours   float64 `json:"cpuCoreHours"`
	MemoryGiBHours float64 `json:"memoryGiBHours"`
	GPUHours       float64 `json:"gpuHours"`
	NPUHours       float64 `json:"npuHours"`
}

// Ratios are used over allocated, per resource; nil where nothing was allocated.
type Ratios struct {
	CPU    *float64 `json:"cpu"`
	Memory *float64 `json:"memory"`
	GPU    *float64 `json:"gpu"`
	NPU    *float64 `json:"npu"`
}

// Shares are a group's part of the whole report's allocated figures, 0 to 1.
type Shares struct {
	CPU    float64 `json:"cpu"`
	Memory float64 `json:"memory"`
	GPU    float64 `json:"gpu"`
	NPU    float64 `json:"npu"`
}

// IdleHours are the hours clusters holding GPUs or NPUs idled (the idle detection's judgement), and
// the device-hours they held meanwhile.
type IdleHours struct {
	Hours    float64 `json:"hours"`
	GPUHours float64 `json:"gpuHours"`
	NPUHours float64 `json:"npuHours"`
}

// QuotaFigure is one resource of a namespace's ResourceQuotas: the lowest hard limit among them, what
// is used of it, and the ratio.
type QuotaFigure struct {
	Resource string   `json:"resource" example:"requests.nvidia.com/gpu"`
	Hard     float64  `json:"hard"`
	Used     float64  `json:"used"`
	Ratio    *float64 `json:"ratio"`
	// Quota names the ResourceQuota whose limit it is.
	Quota string `json:"quota"`
}

// Day is one UTC day of a row.
type Day struct {
	Day       time.Time `json:"day"`
	HeldHours float64   `json:"heldHours"`
	Allocated Hours     `json:"allocated"`
	// Used is nil where that day's use was not measured.
	Used *Hours    `json:"used"`
	Idle IdleHours `json:"idle"`
	Runs int64     `json:"runs"`
}

// Row is one group of a report.
type Row struct {
	GroupKey
	// HeldHours are the hours its clusters held their resources (summed over clusters).
	HeldHours float64 `json:"heldHours"`
	// Allocated are their requests times the time they held them.
	Allocated Hours `json:"allocated"`
	// Used is what their pods used, from Prometheus, over the time measured (see the report's
	// measured); nil where none of the window was.
	Used *Hours `json:"used"`
	// Ratio is Used over Allocated.
	Ratio Ratios    `json:"ratio"`
	Idle  IdleHours `json:"idle"`
	// Accelerators are the hours of each accelerator resource and model held, raw and in devices: a MIG
	// instance, a vNPU slice or a shared GPU's replica is a unit of its resource; a device allocated
	// through Dynamic Resource Allocation is one of "dra:<device class>" of its productName. Their
	// deviceHours sum to allocated's gpuHours and npuHours.
	Accelerators []AcceleratorHours `json:"accelerators"`
	// Objects counts the Ray clusters that held resources in the window; Runs the times one began to.
	Objects int64 `json:"objects"`
	Runs    int64 `json:"runs"`
	// Share is the row's part of the report's whole.
	Share Shares `json:"share"`
	// Quota is the namespace's ResourceQuotas (grouped by namespace), where it has any.
	Quota []QuotaFigure `json:"quota,omitempty"`
	// Series are its figures per UTC day with any, oldest first.
	Series []Day `json:"series"`
}

// Measured says how much of the window's use was read from Prometheus.
type Measured struct {
	// Seconds of the window whose use was measured, of WindowSeconds.
	Seconds       float64 `json:"seconds"`
	WindowSeconds float64 `json:"windowSeconds"`
}

// Report is the answer: a page of rows, the whole's figures, and what was not measured.
type Report struct {
	Items    []Row `json:"items"`
	Total    int   `json:"total"`
	Page     int   `json:"page"`
	PageSize int   `json:"pageSize"`
	// From and To are the window counted: whole UTC days.
	From    time.Time `json:"from"`
	To      time.Time `json:"to"`
	GroupBy string    `json:"groupBy"`
	// Whole sums every group in the caller's scope and filters.
	Whole    Row      `json:"whole"`
	Measured Measured `json:"measured"`
	Warnings []string `json:"warnings"`
}

const (
	hour   = 3600.0
	gibHrs = 3600.0 * (1 << 30)
)

func hoursOf(cpu, mem, gpu, npu float64) Hours {
	return Hours{CPUCoreHours: cpu / hour, MemoryGiBHours: mem / gibHrs, GPUHours: gpu / hour, NPUHours: npu / hour}
}

func allocated(f Figures) Hours {
	return hoursOf(f.CPUSeconds, f.MemoryByteSeconds, f.GPUSeconds, f.NPUSeconds)
}

func used(f Figures) Hours {
	return hoursOf(f.UsedCPUSeconds, f.UsedMemoryByteSeconds, f.UsedGPUSeconds, f.UsedNPUSeconds)
}

func idleOf(f Figures) IdleHours {
	return IdleHours{Hours: f.IdleSeconds / hour, GPUHours: f.IdleGPUSeconds / hour, NPUHours: f.IdleNPUSeconds / hour}
}

func ratio(u, a float64) *float64 {
	if a <= 0 {
		return nil
	}
	r := u / a
	return &r
}

// shares are f's parts of whole's figures.
func shares(f, whole Figures) Shares {
	return Shares{CPU: share(f.CPUSeconds, whole.CPUSeconds), Memory: share(f.MemoryByteSeconds, whole.MemoryByteSeconds),
		GPU: share(f.GPUSeconds, whole.GPUSeconds), NPU: share(f.NPUSeconds, whole.NPUSeconds)}
}

func share(part, whole float64) float64 {
	if whole <= 0 {
		return 0
	}
	return part / whole
}

// Build makes the report of res for q: rows with their series, sorted by sortBy (one of SortKeys) in
// order (asc or desc) and paged.
func Build(q Query, res Result, sortBy, order string, page, pageSize int) Report {
	groups, measured := res.Groups, res.Measured
	rep := Report{From: q.From, To: q.To, GroupBy: q.GroupBy, Page: page, PageSize: pageSize, Total: len(groups),
		Items: []Row{}, Warnings: []string{}}
	rep.Measured.WindowSeconds = q.To.Sub(q.From).Seconds()
	measuredDays := map[int64]bool{}
	for d, s := range measured {
		if d >= q.From.Unix() && d < q.To.Unix() && s > 0 {
			rep.Measured.Seconds += s
			measuredDays[d] = true
		}
	}
	// What is in the window and still to come is not missing: only the past can be unmeasured.
	end := q.To
	if q.Now.Before(end) {
		end = q.Now
	}
	past := end.Sub(q.From).Seconds()
	switch {
	case rep.Measured.Seconds == 0:
		rep.Warnings = append(rep.Warnings, fmt.Sprintf("use was not measured between %s and %s (no Prometheus read "+
			"by the service then): the allocated figures alone are given", q.From.Format(time.RFC3339), q.To.Format(time.RFC3339)))
	case rep.Measured.Seconds < past-60:
		rep.Warnings = append(rep.Warnings, fmt.Sprintf("use was measured over %.1f of the window's %.1f hours so far: "+
			"the used figures and ratios cover that time only", rep.Measured.Seconds/hour, past/hour))
	}
	measuredAny := rep.Measured.Seconds > 0
	if res.Paged {
		// The page alone, as picked: the whole is its days', each group a cluster.
		var whole Figures
		for _, f := range res.Whole {
			whole.Add(*f)
		}
		rep.Total = res.Count
		rep.Whole = row(GroupKey{}, whole, res.Whole, int64(res.Count), measuredAny, measuredDays)
		rep.Whole.Share = shares(whole, whole)
		rep.Whole.Accelerators = acceleratorHours(res.WholeHeld)
		rep.Items = make([]Row, len(groups))
		for i, g := range groups {
			rep.Items[i] = row(g.Key, g.Total, g.Days, g.Objects, measuredAny, measuredDays)
			rep.Items[i].Share = shares(g.Total, whole)
			rep.Items[i].Accelerators = acceleratorHours(g.Held)
		}
		return rep
	}
	var whole Figures
	wholeDays := map[int64]*Figures{}
	wholeHeld := HeldSums{}
	for _, g := range groups {
		whole.Add(g.Total)
		for id, h := range g.Held {
			wholeHeld.add(id, *h)
		}
		rep.Whole.Objects += g.Objects
		if res.Whole != nil {
			continue
		}
		for d, f := range g.Days {
			if wholeDays[d] == nil {
				wholeDays[d] = &Figures{}
			}
			wholeDays[d].Add(*f)
		}
	}
	if res.Whole != nil {
		wholeDays = res.Whole
	}
	rep.Whole = row(GroupKey{}, whole, wholeDays, rep.Whole.Objects, measuredAny, measuredDays)
	rep.Whole.Share = shares(whole, whole)
	rep.Whole.Accelerators = acceleratorHours(wholeHeld)
	// Only the page's rows are made: a page of 10,000 clusters sorts them and makes 20.
	picked := pageOf(groups, q.GroupBy, sortBy, order, page, pageSize)
	rep.Items = make([]Row, len(picked))
	for i, gi := range picked {
		g := &groups[gi]
		rep.Items[i] = row(g.Key, g.Total, g.Days, g.Objects, measuredAny, measuredDays)
		rep.Items[i].Share = shares(g.Total, whole)
		rep.Items[i].Accelerators = acceleratorHours(g.Held)
	}
	return rep
}

// pageOf are the indexes in groups of the page's groups, in order: sorted by sortBy (one of SortKeys) in
// order (asc or desc), ties broken by the group's name, ascending; every group where pageSize is 0.
func pageOf(groups []Group, groupBy, sortBy, order string, page, pageSize int) []int {
	type entry struct {
		i     int
		key   float64
		label string
	}
	var cols []int
	for _, c := range SortColumns(sortBy) {
		cols = append(cols, slices.Index(Columns, c))
	}
	entries := make([]entry, len(groups))
	for i := range groups {
		entries[i] = entry{i: i, key: sortKey(groups[i].Total, groups[i].Objects, sortBy, cols), label: groups[i].Key.label(groupBy)}
	}
	desc := order != "asc"
	// Names are unique: the order is total, and the same as a stable sort's.
	slices.SortFunc(entries, func(a, b entry) int {
		c := 0
		if sortBy != "name" {
			c = cmp.Compare(a.key, b.key)
		} else {
			c = strings.Compare(a.label, b.label)
		}
		if desc {
			c = -c
		}
		if c != 0 {
			return c
		}
		return strings.Compare(a.label, b.label)
	})
	if pageSize > 0 {
		start := min((page-1)*pageSize, len(entries))
		entries = entries[start:min(start+pageSize, len(entries))]
	}
	out := make([]int, len(entries))
	for i, e := range entries {
		out[i] = e.i
	}
	return out
}

func row(k GroupKey, f Figures, days map[int64]*Figures, objects int64, measured bool, measuredDays map[int64]bool) Row {
	r := Row{GroupKey: k, HeldHours: f.HeldSeconds / hour, Allocated: allocated(f), Idle: idleOf(f), Objects: objects,
		Runs: f.Starts, Series: make([]Day, 0, len(days))}
	if measured {
		u := used(f)
		r.Used = &u
		r.Ratio = Ratios{CPU: ratio(f.UsedCPUSeconds, f.CPUSeconds), Memory: ratio(f.UsedMemoryByteSeconds, f.MemoryByteSeconds),
			GPU: ratio(f.UsedGPUSeconds, f.GPUSeconds), NPU: ratio(f.UsedNPUSeconds, f.NPUSeconds)}
	}
	for d, df := range days {
		day := Day{Day: time.Unix(d, 0).UTC(), HeldHours: df.HeldSeconds / hour, Allocated: allocated(*df), Idle: idleOf(*df), Runs: df.Starts}
		if measuredDays[d] {
			u := used(*df)
			day.Used = &u
		}
		r.Series = append(r.Series, day)
	}
	slices.SortFunc(r.Series, func(a, b Day) int { return a.Day.Compare(b.Day) })
	return r
}

// sortKey is what a group is sorted by: its objects, or the sum of its figures at cols (indexes in
// Columns, of SortColumns).
func sortKey(f Figures, objects int64, by string, cols []int) float64 {
	if by == "objects" {
		return float64(objects)
	}
	fields := f.Fields()
	var k float64
	for _, i := range cols {
		switch p := fields[i].(type) {
		case *float64:
			k += *p
		case *int64:
			k += float64(*p)
		}
	}
	return k
}
