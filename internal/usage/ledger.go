// Package usage holds the utilization accounting: what each Ray cluster held (its pods' requests while it
// was Pending or Running), what it used of it (Prometheus), and how long it idled holding accelerators,
// credited per object and UTC day (the ledger, ledger.go) by the accountant, which observes the watch
// cache while this replica holds the Lease (accountant.go); the figures' store, in the service's
// database (store.go, and by duty store_write.go, store_report.go, store_prune.go); and the reports
// read from those daily rows (report.go, csv.go, quota.go).
package usage

import (
	"maps"
	"reflect"
	"time"

	"ray-service/internal/accel"
	"ray-service/internal/ray"
)

// Figures are one object's (or group's) sums over a day or a window. Seconds are of wall time: a core
// held for an hour is 3600 core-seconds.
type Figures struct {
	// HeldSeconds is how long it held its resources (Pending or Running).
	HeldSeconds float64
	// CPUSeconds, MemoryByteSeconds, GPUSeconds and NPUSeconds are its requests times HeldSeconds.
	CPUSeconds, MemoryByteSeconds, GPUSeconds, NPUSeconds float64
	// IdleSeconds is how long it was idle (the idle detection's judgement) while holding GPUs or NPUs;
	// IdleGPUSeconds and IdleNPUSeconds are the devices it held meanwhile times that.
	IdleSeconds, IdleGPUSeconds, IdleNPUSeconds float64
	// UsedCPUSeconds … UsedNPUSeconds are what its pods used (Prometheus), over the time measured.
	UsedCPUSeconds, UsedMemoryByteSeconds, UsedGPUSeconds, UsedNPUSeconds float64
	// Starts counts the times it began holding its resources (a run).
	Starts int64
}

// Add adds f2 to f.
func (f *Figures) Add(f2 Figures) {
	f.HeldSeconds += f2.HeldSeconds
	f.CPUSeconds += f2.CPUSeconds
	f.MemoryByteSeconds += f2.MemoryByteSeconds
	f.GPUSeconds += f2.GPUSeconds
	f.NPUSeconds += f2.NPUSeconds
	f.IdleSeconds += f2.IdleSeconds
	f.IdleGPUSeconds += f2.IdleGPUSeconds
	f.IdleNPUSeconds += f2.IdleNPUSeconds
	f.UsedCPUSeconds += f2.UsedCPUSeconds
	f.UsedMemoryByteSeconds += f2.UsedMemoryByteSeconds
	f.UsedGPUSeconds += f2.UsedGPUSeconds
	f.UsedNPUSeconds += f2.UsedNPUSeconds
	f.Starts += f2.Starts
}

// Columns are the figures as the store keeps them, in the order of Fields.
var Columns = []string{"held_seconds", "cpu_seconds", "memory_byte_seconds", "gpu_seconds", "npu_seconds",
	"idle_seconds", "idle_gpu_seconds", "idle_npu_seconds",
	"used_cpu_seconds", "used_memory_byte_seconds", "used_gpu_seconds", "used_npu_seconds", "starts"}

// Fields are pointers to the figures, in the order of Columns (for scanning and writing rows).
func (f *Figures) Fields() []any {
	return []any{&f.HeldSeconds, &f.CPUSeconds, &f.MemoryByteSeconds, &f.GPUSeconds, &f.NPUSeconds,
		&f.IdleSeconds, &f.IdleGPUSeconds, &f.IdleNPUSeconds,
		&f.UsedCPUSeconds, &f.UsedMemoryByteSeconds, &f.UsedGPUSeconds, &f.UsedNPUSeconds, &f.Starts}
}

// Values are the figures' values, in the order of Columns.
func (f *Figures) Values() []any {
	out := f.Fields()
	for i, p := range out {
		switch v := p.(type) {
		case *float64:
			out[i] = *v
		case *int64:
			out[i] = *v
		}
	}
	return out
}

// State is what an object holds now and to whom it is counted. An object is a Ray cluster; one made by a
// RayJob or a RayService is counted to its maker (Kind, Name), whose creator it carries.
type State struct {
	Kind, Namespace, Name, Cluster, Creator string
	// Holding: its pods hold their requests (it is Pending or Running).
	Holding bool
	// Idle: the idle detection judges it idle now.
	Idle bool
	// Requests are what its head and every worker replica request, GPUs and NPUs in device equivalents,
	// with the raw counts per accelerator resource and model (Requests.Accelerators).
	Requests ray.Resources
}

// Same tells whether s and o are the same state.
func (s State) Same(o State) bool { return reflect.DeepEqual(s, o) }

// Accelerators tells whether the state holds GPUs or NPUs.
func (s State) Accelerators() bool { return s.Holding && (s.Requests.GPU > 0 || s.Requests.NPU > 0) }

// Mark is where an object's credit stands: its state since Since, credited up to Since.
type Mark struct {
	UID string
	State
	Since time.Time
	// Gone: the object was deleted; nothing more is credited to it.
	Gone bool
}

// Key names one object's row of one day.
type Key struct {
	UID string
	// Day is the UTC midnight that starts it, in Unix seconds.
	Day int64
}

// DayOf is the UTC day that holds t, as the Unix seconds of its midnight.
func DayOf(t time.Time) int64 {
	s := t.Unix()
	d := s - s%86400
	if s < 0 && s%86400 != 0 {
		d -= 86400
	}
	return d
}

// Ledger gathers the credits not yet written: figures per object and day, the marks they moved, and the
// seconds of each day whose use was measured.
type Ledger struct {
	Deltas map[Key]*Figures
	// Held are the accelerator-seconds per object, day, resource and model; HeldMarks the marks whose
	// accelerators changed (what they hold now), written beside the marks.
	Held      map[HeldKey]*HeldSeconds
	HeldMarks map[string]accel.Holdings
	// Marks are copies of the marks as last moved.
	Marks map[string]Mark
	// Owners are the states of objects whose use is credited without moving their marks: whom the
	// figures are counted to.
	Owners   map[string]State
	Measured map[int64]float64
}

// NewLedger returns an empty ledger.
func NewLedger() *Ledger {
	return &Ledger{Deltas: map[Key]*Figures{}, Held: map[HeldKey]*HeldSeconds{}, HeldMarks: map[string]accel.Holdings{},
		Marks: map[string]Mark{}, Owners: map[string]State{}, Measured: map[int64]float64{}}
}

// Owner is whom the figures of uid are counted to.
func (l *Ledger) Owner(uid string) (State, bool) {
	if m, ok := l.Marks[uid]; ok {
		return m.State, true
	}
	s, ok := l.Owners[uid]
	return s, ok
}

// Empty tells whether nothing is to be written.
func (l *Ledger) Empty() bool {
	return len(l.Deltas) == 0 && len(l.Held) == 0 && len(l.Marks) == 0 && len(l.Measured) == 0
}

// HeldKey names one object's seconds of one accelerator resource and model on one day.
type HeldKey struct {
	UID             string
	Day             int64
	Kind            accel.Kind
	Resource, Model string
}

// HeldSeconds are the seconds of one accelerator resource and model held: its units (the raw count)
// times the seconds, and the device equivalents times the seconds.
type HeldSeconds struct {
	CountSeconds, DeviceSeconds float64
}

func (h *HeldSeconds) add(o HeldSeconds) {
	h.CountSeconds += o.CountSeconds
	h.DeviceSeconds += o.DeviceSeconds
}

func (l *Ledger) held(k HeldKey) *HeldSeconds {
	h := l.Held[k]
	if h == nil {
		h = &HeldSeconds{}
		l.Held[k] = h
	}
	return h
}

// credit credits the accelerators of uid held for sec seconds of day.
func (l *Ledger) credit(uid string, day int64, held accel.Holdings, sec float64) {
	for _, x := range held {
		l.held(HeldKey{UID: uid, Day: day, Kind: x.Kind, Resource: x.Resource, Model: x.Model}).add(
			HeldSeconds{CountSeconds: x.Count * sec, DeviceSeconds: x.Devices * sec})
	}
}

func (l *Ledger) delta(uid string, day int64) *Figures {
	k := Key{UID: uid, Day: day}
	f := l.Deltas[k]
	if f == nil {
		f = &Figures{}
		l.Deltas[k] = f
	}
	return f
}

// Credit credits m's state from m.Since to `to`, split at UTC midnights, and moves m.Since to `to`. A
// time before m.Since credits nothing (the clock stepped back).
func (l *Ledger) Credit(m *Mark, to time.Time) {
	if !to.After(m.Since) {
		return
	}
	from := m.Since
	m.Since = to
	l.Marks[m.UID] = *m
	if !m.Holding {
		return
	}
	for from.Before(to) {
		day := DayOf(from)
		end := time.Unix(day+86400, 0)
		if end.After(to) {
			end = to
		}
		sec := end.Sub(from).Seconds()
		f := l.delta(m.UID, day)
		r := m.Requests
		f.HeldSeconds += sec
		f.CPUSeconds += r.CPU * sec
		f.MemoryByteSeconds += float64(r.MemoryBytes) * sec
		f.GPUSeconds += float64(r.GPU) * sec
		f.NPUSeconds += float64(r.NPU) * sec
		if m.Idle && m.Accelerators() {
			f.IdleSeconds += sec
			f.IdleGPUSeconds += float64(r.GPU) * sec
			f.IdleNPUSeconds += float64(r.NPU) * sec
		}
		l.credit(m.UID, day, r.Accelerators, sec)
		from = end
	}
}

// Change credits m up to at and gives it the state s from then on; a start is counted where it begins
// holding.
func (l *Ledger) Change(m *Mark, s State, at time.Time) {
	l.Credit(m, at)
	if s.Holding && !m.Holding {
		l.delta(m.UID, DayOf(at)).Starts++
	}
	if !reflect.DeepEqual(m.Requests.Accelerators, s.Requests.Accelerators) {
		l.HeldMarks[m.UID] = s.Requests.Accelerators
	}
	m.State = s
	l.Marks[m.UID] = *m
}

// Gone credits m up to at and ends it: nothing more is credited to it.
func (l *Ledger) Gone(m *Mark, at time.Time) {
	l.Credit(m, at)
	m.Gone = true
	l.Marks[m.UID] = *m
}

// Used credits what the object of m used on a day.
func (l *Ledger) Used(m *Mark, day int64, cpuSeconds, memoryByteSeconds, gpuSeconds, npuSeconds float64) {
	l.Owners[m.UID] = m.State
	f := l.delta(m.UID, day)
	f.UsedCPUSeconds += cpuSeconds
	f.UsedMemoryByteSeconds += memoryByteSeconds
	f.UsedGPUSeconds += gpuSeconds
	f.UsedNPUSeconds += npuSeconds
}

// Merge adds what l2 holds to l (a write that failed goes back into the ledger that follows it). A mark
// in both keeps l's, the newer.
func (l *Ledger) Merge(l2 *Ledger) {
	for k, f := range l2.Deltas {
		l.delta(k.UID, k.Day).Add(*f)
	}
	for k, h := range l2.Held {
		l.held(k).add(*h)
	}
	for uid, h := range l2.HeldMarks {
		if _, newer := l.HeldMarks[uid]; !newer {
			l.HeldMarks[uid] = h
		}
	}
	for uid, m := range l2.Marks {
		if _, newer := l.Marks[uid]; !newer {
			l.Marks[uid] = m
		}
	}
	maps.Copy(l.Owners, l2.Owners)
	for d, s := range l2.Measured {
		l.Measured[d] += s
	}
}

// Holding is the statuses in which a Ray cluster's pods hold their requests.
func Holding(status string) bool {
	switch status {
	case ray.StatusPending, ray.StatusRunning, ray.StatusRetrying, ray.StatusUpgrading, ray.StatusRollingBack:
		return true
	}
	return false
}

// Used is what a cluster's pods used over a span: core-seconds, byte-seconds of working set, and
// GPU- and NPU-seconds at full utilization.
type Used struct {
	CPUSeconds, MemoryByteSeconds, GPUSeconds, NPUSeconds float64
}
