package usagetest

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"ray-service/internal/accel"
	"ray-service/internal/ray"
	"ray-service/internal/usage"
)

// The utilization accounting's figures add up per object and day and per group, are read back by any
// grouping within the caller's scope, credit an object holding now up to the time asked, survive a
// reopening, and are pruned by day.
func utilization(t *testing.T, open Open) {
	s, dsn := open(t)
	ctx := t.Context()
	day := t0.Truncate(24 * time.Hour)
	l := usage.NewLedger()
	job := &usage.Mark{UID: "c-job", Since: t0}
	l.Change(job, usage.State{Kind: "RayJob", Namespace: "a", Name: "train", Cluster: "train-x1", Creator: "alice", Holding: true,
		Requests: ray.Resources{CPU: 2, MemoryBytes: 1 << 30, GPU: 1}}, t0)
	l.Credit(job, t0.Add(90*time.Minute))
	l.Gone(job, t0.Add(90*time.Minute))
	other := &usage.Mark{UID: "c-b", Since: t0}
	l.Change(other, usage.State{Kind: "RayCluster", Namespace: "b", Name: "x", Cluster: "x", Creator: "bob", Holding: true,
		Requests: ray.Resources{CPU: 1}}, t0)
	l.Credit(other, t0.Add(time.Hour))
	require.NoError(t, s.PutUsage(ctx, l))
	// Written again in parts: the figures add.
	l2 := usage.NewLedger()
	l2.Credit(other, t0.Add(2*time.Hour))
	l2.Used(other, usage.DayOf(t0), 1800, 0, 0, 0)
	l2.Measured[usage.DayOf(t0)] = 7200
	require.NoError(t, s.PutMeasured(ctx, l2, t0.Add(2*time.Hour)))
	to, err := s.MeasuredTo(ctx)
	require.NoError(t, err)
	assert.Equal(t, t0.Add(2*time.Hour), to)

	q := usage.Query{From: day, To: day.Add(24 * time.Hour), GroupBy: usage.ByNamespace, Now: t0.Add(3 * time.Hour),
		Scopes: map[string][]string{"RayCluster": nil, "RayJob": nil, "RayService": nil}}
	byNS := func(q usage.Query) map[string]usage.Group {
		groups, _, err := report(ctx, s, q)
		require.NoError(t, err)
		out := map[string]usage.Group{}
		for _, g := range groups {
			key := g.Key.Namespace + g.Key.Creator + g.Key.Kind
			if g.Key.UID != "" {
				key = g.Key.UID
			}
			out[key] = g
		}
		return out
	}
	got := byNS(q)
	require.Len(t, got, 2)
	assert.InDelta(t, 2*5400.0, got["a"].Total.CPUSeconds, 1e-6)
	assert.InDelta(t, 5400.0, got["a"].Total.GPUSeconds, 1e-6)
	assert.InDelta(t, float64(1<<30)*5400, got["a"].Total.MemoryByteSeconds, 1)
	assert.Equal(t, int64(1), got["a"].Total.Starts)
	assert.Equal(t, int64(1), got["a"].Objects)
	// b held for 2 h written, and still holds: credited up to Now (3 h) from its mark.
	assert.InDelta(t, 3*3600.0, got["b"].Total.HeldSeconds, 1e-6)
	assert.InDelta(t, 1800.0, got["b"].Total.UsedCPUSeconds, 1e-6)
	require.Len(t, got["b"].Days, 1)

	// The caller's scope: RayJobs only in a; b's RayCluster not visible.
	q.Scopes = map[string][]string{"RayJob": {"a"}, "RayCluster": {}}
	got = byNS(q)
	require.Len(t, got, 1)
	assert.Contains(t, got, "a")
	// Creators, and the other groupings.
	q.Scopes = map[string][]string{"RayCluster": nil, "RayJob": nil}
	q.Creators = []string{"bob"}
	q.GroupBy = usage.ByCreator
	got = byNS(q)
	require.Len(t, got, 1)
	assert.InDelta(t, 3*3600.0, got["bob"].Total.CPUSeconds, 1e-6)
	q.Creators, q.GroupBy = nil, usage.ByCluster
	got = byNS(q)
	require.Len(t, got, 2)
	assert.Equal(t, "train", got["c-job"].Key.Name)
	assert.Equal(t, "train-x1", got["c-job"].Key.Cluster)
	assert.Equal(t, "RayJob", got["c-job"].Key.Kind)
	q.GroupBy = usage.ByKind
	got = byNS(q)
	assert.Contains(t, got, "RayJob")
	assert.Contains(t, got, "RayCluster")
	// Another day: nothing, and b's credit to come is not counted before it.
	q.From, q.To = day.Add(-48*time.Hour), day.Add(-24*time.Hour)
	assert.Empty(t, byNS(q))

	marks, err := s.UsageMarks(ctx)
	require.NoError(t, err)
	require.Len(t, marks, 1, "the gone cluster has no mark to resume")
	assert.Equal(t, t0.Add(2*time.Hour), marks["c-b"].Since)
	assert.True(t, marks["c-b"].Holding)
	assert.Equal(t, "bob", marks["c-b"].Creator)
	ns, err := s.UsageNamespaces(ctx)
	require.NoError(t, err)
	assert.ElementsMatch(t, []string{"a", "b"}, ns)

	// The gone job's last use, read the next day with no mark of it written: its days widen, so it is
	// counted that day too.
	next := day.Add(24 * time.Hour)
	l3 := usage.NewLedger()
	l3.Used(job, usage.DayOf(next), 600, 0, 0, 0)
	l3.Measured[usage.DayOf(next)] = 600
	require.NoError(t, s.PutMeasured(ctx, l3, next.Add(10*time.Minute)))
	got = byNS(usage.Query{From: next, To: next.Add(24 * time.Hour), GroupBy: usage.ByNamespace, Now: t0.Add(3 * time.Hour),
		Scopes: map[string][]string{"RayJob": nil}})
	require.Contains(t, got, "a")
	assert.InDelta(t, 600.0, got["a"].Total.UsedCPUSeconds, 1e-6)
	assert.Equal(t, int64(1), got["a"].Objects, "counted on the day its use was read")
	require.NoError(t, s.Close())

	s, err = usage.Open(ctx, dsn)
	require.NoError(t, err)
	defer func() { _ = s.Close() }()
	groups, measured, err := report(ctx, s, usage.Query{From: day, To: day.Add(24 * time.Hour), GroupBy: usage.ByNamespace,
		Now: t0.Add(2 * time.Hour), Scopes: map[string][]string{"RayJob": nil, "RayCluster": nil}})
	require.NoError(t, err)
	assert.Len(t, groups, 2, "kept across a reopening")
	assert.InDelta(t, 7200.0, measured[usage.DayOf(t0)], 1e-6)
	pruned, err := s.PruneUsage(ctx, day.Add(24*time.Hour), false)
	require.NoError(t, err)
	assert.Positive(t, pruned.Removed)
	groups, _, err = report(ctx, s, usage.Query{From: day, To: day.Add(24 * time.Hour), GroupBy: usage.ByNamespace,
		Now: day, Scopes: map[string][]string{"RayJob": nil, "RayCluster": nil}})
	require.NoError(t, err)
	assert.Empty(t, groups, "pruned")
	groups, _, err = report(ctx, s, usage.Query{From: day, To: day.Add(24 * time.Hour), GroupBy: usage.ByKind,
		Now: day, Scopes: map[string][]string{"RayJob": nil, "RayCluster": nil}})
	require.NoError(t, err)
	assert.Empty(t, groups, "pruned, the kinds' days too")
}

// A ledger of more clusters than one statement of SQLite writes (the writes go in parts of several
// sizes; PostgreSQL's is one statement of arrays) is written whole, each cluster once: its figures, its
// group's and its mark.
func utilizationMany(t *testing.T, open Open) {
	s, _ := open(t)
	ctx := t.Context()
	day := t0.Truncate(24 * time.Hour)
	const clusters = 1337
	l := usage.NewLedger()
	wantCPU := map[string]float64{}
	for i := range clusters {
		m := &usage.Mark{UID: fmt.Sprintf("many-%04d", i), Since: t0}
		ns := fmt.Sprintf("ns-%d", i%7)
		l.Change(m, usage.State{Kind: "RayCluster", Namespace: ns, Name: m.UID, Cluster: m.UID, Creator: fmt.Sprintf("user-%d", i%3),
			Holding: true, Requests: ray.Resources{CPU: float64(1 + i%4)}}, t0)
		l.Credit(m, t0.Add(time.Hour))
		wantCPU[ns] += float64(1+i%4) * 3600
	}
	require.NoError(t, s.PutUsage(ctx, l))
	q := usage.Query{From: day, To: day.Add(24 * time.Hour), GroupBy: usage.ByNamespace, Now: t0.Add(time.Hour),
		Scopes: map[string][]string{"RayCluster": nil}}
	groups, _, err := report(ctx, s, q)
	require.NoError(t, err)
	require.Len(t, groups, 7)
	objects := int64(0)
	for _, g := range groups {
		assert.InDelta(t, wantCPU[g.Key.Namespace], g.Total.CPUSeconds, 1e-6, g.Key.Namespace)
		objects += g.Objects
	}
	assert.Equal(t, int64(clusters), objects)
	q.GroupBy = usage.ByCluster
	groups, _, err = report(ctx, s, q)
	require.NoError(t, err)
	assert.Len(t, groups, clusters)
	marks, err := s.UsageMarks(ctx)
	require.NoError(t, err)
	assert.Len(t, marks, clusters)
}

// Figures written pending (a change's credit between the minute's credits) read as the same figures
// written into the days, by every grouping and across a reopening; the minute's credit moves them
// there once (a second adds nothing); and they are pruned by day with the rest.
func utilizationPending(t *testing.T, open Open) {
	ctx := t.Context()
	day := t0.Truncate(24 * time.Hour)
	marks := map[string]*usage.Mark{}
	mark := func(i int) *usage.Mark {
		uid := fmt.Sprintf("pending-%d", i)
		if marks[uid] == nil {
			marks[uid] = &usage.Mark{UID: uid, Since: t0}
		}
		return marks[uid]
	}
	state := func(i int, holding bool) usage.State {
		return usage.State{Kind: []string{"RayJob", "RayCluster", "RayService"}[i%3], Namespace: []string{"a", "a", "b"}[i%3],
			Name: fmt.Sprintf("obj-%d", i), Cluster: fmt.Sprintf("obj-%d-x", i), Creator: []string{"alice", "bob", "bob"}[i%3],
			Holding: holding, Idle: i%2 == 1, Requests: ray.Resources{CPU: float64(i + 1), MemoryBytes: int64(i+1) << 30, GPU: float64(i % 2), NPU: float64(i % 3 / 2)}}
	}
	// Four clusters start, are credited and stop; the last holds across midnight.
	changes := func() *usage.Ledger {
		l := usage.NewLedger()
		for i := range 4 {
			start := t0.Add(time.Duration(i) * 10 * time.Minute)
			if i == 3 {
				start = day.Add(23*time.Hour + 50*time.Minute)
			}
			l.Change(mark(i), state(i, true), start)
			l.Change(mark(i), state(i, false), start.Add(time.Duration(i+1)*7*time.Minute))
		}
		return l
	}
	// Then each holds again for a minute's credit.
	credit := func() *usage.Ledger {
		l := usage.NewLedger()
		for i := range 4 {
			l.Change(mark(i), state(i, true), day.Add(36*time.Hour))
			l.Credit(mark(i), day.Add(36*time.Hour+time.Minute))
		}
		return l
	}
	direct, _ := open(t)
	pending, dsn := open(t)
	require.NoError(t, direct.PutUsage(ctx, changes()))
	clear(marks)
	require.NoError(t, pending.PutPending(ctx, changes()))

	window := usage.Query{From: day, To: day.Add(48 * time.Hour), Now: day.Add(36*time.Hour + time.Minute),
		Scopes: map[string][]string{"RayCluster": nil, "RayJob": nil, "RayService": nil}}
	read := func(s *usage.Store, by string) map[string]usage.Group {
		q := window
		q.GroupBy = by
		groups, _, err := report(ctx, s, q)
		require.NoError(t, err)
		out := map[string]usage.Group{}
		for _, g := range groups {
			out[fmt.Sprintf("%+v", g.Key)] = g
		}
		return out
	}
	same := func(s *usage.Store, msg string) {
		for _, by := range []string{usage.ByNamespace, usage.ByCreator, usage.ByKind, usage.ByCluster} {
			want, got := read(direct, by), read(s, by)
			require.Len(t, got, len(want), "%s, by %s", msg, by)
			for k, w := range want {
				g := got[k]
				assert.Equal(t, w.Objects, g.Objects, "%s, by %s: %s", msg, by, k)
				require.Len(t, g.Days, len(w.Days), "%s, by %s: %s", msg, by, k)
				for d, wf := range w.Days {
					require.Contains(t, g.Days, d, "%s, by %s: %s", msg, by, k)
					assert.InDeltaSlice(t, floats(wf.Values()), floats(g.Days[d].Values()), 1e-3, "%s, by %s: %s day %d", msg, by, k, d)
				}
			}
		}
	}
	byCluster := read(direct, usage.ByCluster)
	require.Len(t, byCluster, 4)
	for _, g := range byCluster {
		if g.Key.UID == "pending-3" {
			assert.Len(t, g.Days, 2, "the change across midnight has two days")
		}
	}
	same(pending, "pending")
	require.NoError(t, pending.Close())
	pending, err := usage.Open(ctx, dsn)
	require.NoError(t, err)
	defer func() { _ = pending.Close() }()
	same(pending, "pending, reopened")
	wantMarks, err := direct.UsageMarks(ctx)
	require.NoError(t, err)
	gotMarks, err := pending.UsageMarks(ctx)
	require.NoError(t, err)
	assert.Equal(t, wantMarks, gotMarks)

	// The minute's credit, on both: the pending figures move into the days, once.
	clear(marks)
	require.NoError(t, direct.PutUsage(ctx, credit()))
	clear(marks)
	require.NoError(t, pending.PutUsage(ctx, credit()))
	same(pending, "folded with a credit")
	require.NoError(t, pending.PutUsage(ctx, usage.NewLedger()))
	same(pending, "folded again")

	// Pending figures of days pruned go with them.
	clear(marks)
	require.NoError(t, pending.PutPending(ctx, changes()))
	_, err = pending.PruneUsage(ctx, day.Add(48*time.Hour), false)
	require.NoError(t, err)
	assert.Empty(t, read(pending, usage.ByNamespace), "pruned")
}

// floats are figures' values as float64s.
func floats(values []any) []float64 {
	out := make([]float64, len(values))
	for i, v := range values {
		switch n := v.(type) {
		case float64:
			out[i] = n
		case int64:
			out[i] = float64(n)
		}
	}
	return out
}

// A report reads one state of the history: while the minute's credits move pending figures into the
// days, every report of the same window gives the same figures.
func utilizationSnapshot(t *testing.T, open Open) {
	s, _ := open(t)
	ctx := t.Context()
	day := t0.Truncate(24 * time.Hour)
	q := usage.Query{From: day, To: day.Add(24 * time.Hour), GroupBy: usage.ByNamespace, Now: day.Add(23 * time.Hour),
		Scopes: map[string][]string{"RayCluster": nil}}
	cpu := func() float64 {
		groups, _, err := report(ctx, s, q)
		require.NoError(t, err)
		var sum float64
		for _, g := range groups {
			sum += g.Total.CPUSeconds
		}
		return sum
	}
	var want float64
	for round := range 30 {
		// Ten clusters run a minute each, and stop: written pending.
		l := usage.NewLedger()
		for i := range 10 {
			m := &usage.Mark{UID: fmt.Sprintf("snap-%d-%d", round, i), Since: t0}
			start := t0.Add(time.Duration(round) * time.Minute)
			l.Change(m, usage.State{Kind: "RayCluster", Namespace: fmt.Sprintf("ns-%d", i%3), Name: m.UID, Cluster: m.UID,
				Creator: "alice", Holding: true, Requests: ray.Resources{CPU: 2}}, start)
			l.Change(m, usage.State{Kind: "RayCluster", Namespace: fmt.Sprintf("ns-%d", i%3), Name: m.UID, Cluster: m.UID,
				Creator: "alice"}, start.Add(time.Minute))
			want += 2 * 60
		}
		require.NoError(t, s.PutPending(ctx, l))
		require.InDelta(t, want, cpu(), 1e-6)
		// The credit moves them while reports are read.
		done := make(chan error, 1)
		go func() { done <- s.PutUsage(ctx, usage.NewLedger()) }()
		for reading := true; reading; {
			select {
			case err := <-done:
				require.NoError(t, err)
				reading = false
			default:
			}
			require.InDelta(t, want, cpu(), 1e-6, "round %d: a report amid the credit", round)
		}
	}
}

// A report by cluster for a page (Query.Page) is the page that Build makes of the report that reads every
// cluster, by every kind of sort: the clusters on it whole, with their days, the count of all, and the
// whole the days of all; with no limit, every cluster sorted, without its days. Over every window of the
// days, with days written late, figures pending and clusters holding now, within the day and across
// midnights.
func utilizationPicked(t *testing.T, open Open) {
	s, _ := open(t)
	ctx := t.Context()
	day := t0.Truncate(24 * time.Hour)
	state := func(i int) usage.State {
		return usage.State{Kind: []string{"RayJob", "RayCluster", "RayService"}[i%3], Namespace: []string{"a", "a-b"}[i%2],
			Name: fmt.Sprintf("obj-%d", i), Cluster: fmt.Sprintf("obj-%d-x", i), Creator: []string{"alice", "bob", "carol"}[i%3],
			Holding: true, Idle: i%2 == 0, Requests: ray.Resources{CPU: float64(i + 1), MemoryBytes: int64(i+1) << 30, GPU: float64(i % 2), NPU: float64(i % 3 / 2)}}
	}
	marks := make([]*usage.Mark, 9)
	for i := range marks {
		marks[i] = &usage.Mark{UID: fmt.Sprintf("picked-%d", i), Since: t0}
	}
	// Every cluster holds from t0; 0 to 5 are credited each day up to the third, 6 and 7 once, the first
	// hour; 8 is gone then, its mark still holding (no tail of its own, nor in the whole's).
	l := usage.NewLedger()
	for i, m := range marks {
		l.Change(m, state(i), t0)
		l.Credit(m, t0.Add(time.Hour))
		l.Used(m, usage.DayOf(t0), float64(600*(i+1)), 1<<30, 0, 0)
	}
	l.Gone(marks[8], t0.Add(time.Hour))
	l.Measured[usage.DayOf(t0)] = 3600
	require.NoError(t, s.PutUsage(ctx, l))
	for d := 1; d <= 2; d++ {
		l := usage.NewLedger()
		for _, m := range marks[:6] {
			l.Credit(m, day.Add(time.Duration(d)*24*time.Hour+time.Duration(d)*time.Hour))
		}
		if d == 1 {
			// 0 asks for 20 cores from then on: its days are not those of the others scaled, and a
			// window's figure read from any day but its last sorts it elsewhere.
			st := state(0)
			st.Requests.CPU = 20
			l.Change(marks[0], st, day.Add(25*time.Hour))
		}
		require.NoError(t, s.PutUsage(ctx, l))
	}
	// Use of the first day read after the third was credited: late, for 1 and 2.
	l = usage.NewLedger()
	for _, m := range marks[1:3] {
		l.Used(m, usage.DayOf(t0), 120, 1<<29, 30, 0)
	}
	require.NoError(t, s.PutUsage(ctx, l))
	// Use of the first day read later still for 3, pending: its totals count it, its days not yet.
	l = usage.NewLedger()
	l.Used(marks[3], usage.DayOf(t0), 900, 1<<28, 0, 0)
	require.NoError(t, s.PutPending(ctx, l))
	// 4 and 5 stop on the third day, written pending; 6 and 7 still hold, last credited on the first day.
	l = usage.NewLedger()
	for i, m := range marks[4:6] {
		st := state(4 + i)
		st.Holding = false
		l.Change(m, st, day.Add(2*24*time.Hour+3*time.Hour))
	}
	require.NoError(t, s.PutPending(ctx, l))
	now := day.Add(2*24*time.Hour + 5*time.Hour)
	near := func(t *testing.T, want, got usage.Figures, msg string, args ...any) {
		t.Helper()
		assert.InDeltaSlice(t, floats(want.Values()), floats(got.Values()), 1e-3, append([]any{msg}, args...)...)
	}
	for _, scope := range []usage.Query{
		{Scopes: map[string][]string{"RayCluster": nil, "RayJob": nil, "RayService": nil}},
		{Scopes: map[string][]string{"RayCluster": {"a"}, "RayJob": nil}, Creators: []string{"alice", "bob"}},
		{Scopes: map[string][]string{"RayCluster": {}, "RayService": {"a", "a-b"}}},
		// Two kinds counted in every namespace (their kinds' days), one in some (its groups' days).
		{Scopes: map[string][]string{"RayCluster": {"a"}, "RayJob": nil, "RayService": nil}},
	} {
		for first := range 4 {
			for last := first + 1; last <= 4; last++ {
				q := scope
				q.From, q.To, q.Now, q.GroupBy = day.Add(time.Duration(first)*24*time.Hour), day.Add(time.Duration(last)*24*time.Hour), now, usage.ByCluster
				window := fmt.Sprintf("days %d to %d, %v", first, last, scope.Scopes)
				full, err := s.Utilization(ctx, q)
				require.NoError(t, err)
				require.Nil(t, full.Whole)
				want := map[string]usage.Group{}
				wantWhole := map[int64]*usage.Figures{}
				for _, g := range full.Groups {
					want[g.Key.UID] = g
					for d, f := range g.Days {
						if wantWhole[d] == nil {
							wantWhole[d] = &usage.Figures{}
						}
						wantWhole[d].Add(*f)
					}
				}
				for _, sort := range []usage.Page{{SortBy: "cpuCoreHours", Desc: true}, {SortBy: "gpuHours"}, {SortBy: "idleAcceleratorHours", Desc: true},
					{SortBy: "name", Desc: true}, {SortBy: "objects"}, {SortBy: "runs", Desc: true}, {SortBy: "usedCpuCoreHours"}} {
					order := "asc"
					if sort.Desc {
						order = "desc"
					}
					for page := 1; page <= len(want)/3+2; page++ {
						p := sort
						p.Offset, p.Limit = (page-1)*3, 3
						q.Page = &p
						got, err := s.Utilization(ctx, q)
						q.Page = nil
						require.NoError(t, err)
						what := fmt.Sprintf("%s, by %s %s, page %d", window, sort.SortBy, order, page)
						require.True(t, got.Paged, what)
						assert.Equal(t, len(want), got.Count, what)
						rep := usage.Build(q, full, sort.SortBy, order, page, 3)
						uids := make([]string, len(got.Groups))
						for i, g := range got.Groups {
							uids[i] = g.Key.UID
						}
						wantUIDs := make([]string, len(rep.Items))
						for i, r := range rep.Items {
							wantUIDs[i] = r.UID
						}
						require.Equal(t, wantUIDs, uids, "%s: the page, in the order Build sorts", what)
						for _, g := range got.Groups {
							w := want[g.Key.UID]
							assert.Equal(t, w.Key, g.Key)
							assert.Equal(t, w.Objects, g.Objects, "%s", g.Key.UID)
							near(t, w.Total, g.Total, "%s: %s", what, g.Key.UID)
							require.Len(t, g.Days, len(w.Days), "%s: %s", what, g.Key.UID)
							for d, wf := range w.Days {
								require.Contains(t, g.Days, d, "%s: %s", what, g.Key.UID)
								near(t, *wf, *g.Days[d], "%s: %s day %d", what, g.Key.UID, d)
							}
						}
						require.Len(t, got.Whole, len(wantWhole), what)
						for d, wf := range wantWhole {
							require.Contains(t, got.Whole, d, what)
							near(t, *wf, *got.Whole[d], "%s: the whole, day %d", what, d)
						}
						assert.Equal(t, full.Measured, got.Measured)
					}
				}
				// No limit (CSV): every cluster, sorted, each with every figure and no days.
				q.Page = &usage.Page{SortBy: "memoryGiBHours", Desc: true}
				all, err := s.Utilization(ctx, q)
				q.Page = nil
				require.NoError(t, err)
				rep := usage.Build(q, full, "memoryGiBHours", "desc", 1, 0)
				require.Len(t, all.Groups, len(rep.Items), window)
				assert.Equal(t, len(want), all.Count)
				for i, g := range all.Groups {
					require.Equal(t, rep.Items[i].UID, g.Key.UID, "%s: every cluster, sorted", window)
					w := want[g.Key.UID]
					assert.Equal(t, w.Key, g.Key, window)
					near(t, w.Total, g.Total, "%s: %s", window, g.Key.UID)
					assert.Empty(t, g.Days, window)
				}
			}
		}
	}
}

// The clusters holding now are credited from their last credit up to the report's Now, by group: their
// requests times that time, idle accelerators apart, each counted once.
func utilizationTails(t *testing.T, open Open) {
	s, _ := open(t)
	ctx := t.Context()
	day := t0.Truncate(24 * time.Hour)
	credited := day.Add(5 * time.Hour)
	putHolding(t, s, "tail", credited, credited, []usage.State{
		{Kind: "RayCluster", Namespace: "a", Name: "idle", Cluster: "idle", Creator: "alice", Holding: true, Idle: true,
			Requests: ray.Resources{CPU: 4, MemoryBytes: 8 << 30, GPU: 2}},
		{Kind: "RayCluster", Namespace: "a", Name: "busy", Cluster: "busy", Creator: "alice", Holding: true,
			Requests: ray.Resources{CPU: 2, MemoryBytes: 4 << 30, NPU: 1}},
		{Kind: "RayJob", Namespace: "a", Name: "cpu", Cluster: "cpu-x", Creator: "bob", Holding: true, Idle: true,
			Requests: ray.Resources{CPU: 1, MemoryBytes: 1 << 30}},
	})
	q := usage.Query{From: day, To: day.Add(24 * time.Hour), Now: credited.Add(10 * time.Minute), GroupBy: usage.ByNamespace,
		Scopes: map[string][]string{"RayCluster": nil, "RayJob": nil}}
	groups, _, err := report(ctx, s, q)
	require.NoError(t, err)
	require.Len(t, groups, 1)
	g := groups[0]
	const held = 600.0
	assert.Equal(t, int64(3), g.Objects)
	assert.InDelta(t, 3*held, g.Total.HeldSeconds, 1e-6)
	assert.InDelta(t, 7*held, g.Total.CPUSeconds, 1e-6)
	assert.InDelta(t, float64(13<<30)*held, g.Total.MemoryByteSeconds, 1)
	assert.InDelta(t, 2*held, g.Total.GPUSeconds, 1e-6)
	assert.InDelta(t, held, g.Total.NPUSeconds, 1e-6)
	assert.InDelta(t, held, g.Total.IdleSeconds, 1e-6, "idle with accelerators: the GPU cluster alone")
	assert.InDelta(t, 2*held, g.Total.IdleGPUSeconds, 1e-6)
	assert.Zero(t, g.Total.IdleNPUSeconds)
	require.Len(t, g.Days, 1)
	q.GroupBy = usage.ByCreator
	groups, _, err = report(ctx, s, q)
	require.NoError(t, err)
	byCreator := map[string]usage.Group{}
	for _, g := range groups {
		byCreator[g.Key.Creator] = g
	}
	assert.InDelta(t, 6*held, byCreator["alice"].Total.CPUSeconds, 1e-6)
	assert.Equal(t, int64(2), byCreator["alice"].Objects)
	assert.InDelta(t, held, byCreator["bob"].Total.CPUSeconds, 1e-6)
	assert.Zero(t, byCreator["bob"].Total.IdleSeconds, "idle without accelerators is not counted idle")
	q.GroupBy = usage.ByCluster
	groups, _, err = report(ctx, s, q)
	require.NoError(t, err)
	require.Len(t, groups, 3)
	for _, g := range groups {
		if g.Key.Name == "idle" {
			assert.InDelta(t, 2*held, g.Total.IdleGPUSeconds, 1e-6)
			assert.InDelta(t, 4*held, g.Total.CPUSeconds, 1e-6)
		}
	}
	// No writer since (two days and two hours later): each tail is split at midnights, from the
	// window's start where it was credited before it.
	q.From, q.To, q.Now = credited.Add(time.Hour), day.Add(4*24*time.Hour), day.Add(2*24*time.Hour+2*time.Hour)
	want := map[int64]float64{usage.DayOf(day): 18 * 3600, usage.DayOf(day) + 86400: 86400, usage.DayOf(day) + 2*86400: 2 * 3600}
	for _, by := range []string{usage.ByNamespace, usage.ByCluster} {
		q.GroupBy = by
		groups, _, err = report(ctx, s, q)
		require.NoError(t, err)
		// None has a day in the window: each is there and counted by its tail alone.
		require.Len(t, groups, map[string]int{usage.ByNamespace: 1, usage.ByCluster: 3}[by], by)
		for _, g := range groups {
			n := float64(3)
			if by == usage.ByCluster {
				n = 1
			}
			assert.Equal(t, int64(n), g.Objects, "%s %v: the objects", by, g.Key)
			got := map[int64]float64{}
			for d, f := range g.Days {
				got[d] = f.HeldSeconds / n
			}
			assert.Equal(t, want, got, "%s %v: the seconds held of each day", by, g.Key)
			if g.Key.Name == "idle" || by == usage.ByNamespace {
				assert.InDelta(t, 2*(18+24+2)*3600.0, g.Total.IdleGPUSeconds, 1e-6, "%s %v", by, g.Key)
			}
		}
	}
	// One credited inside the window, on a day before its last: its tail starts there.
	l := usage.NewLedger()
	since := day.Add(24*time.Hour + 20*time.Hour)
	late := &usage.Mark{UID: "tail-late", Since: since}
	l.Change(late, usage.State{Kind: "RayCluster", Namespace: "b", Name: "late", Cluster: "late", Creator: "carol", Holding: true,
		Requests: ray.Resources{CPU: 3}}, since)
	l.Credit(late, since)
	require.NoError(t, s.PutUsage(ctx, l))
	for _, by := range []string{usage.ByNamespace, usage.ByCluster} {
		q.GroupBy = by
		groups, _, err = report(ctx, s, q)
		require.NoError(t, err)
		var seen bool
		for _, g := range groups {
			if g.Key.Namespace != "b" {
				continue
			}
			seen = true
			got := map[int64]float64{}
			for d, f := range g.Days {
				got[d] = f.CPUSeconds
			}
			assert.Equal(t, map[int64]float64{usage.DayOf(day) + 86400: 3 * 4 * 3600, usage.DayOf(day) + 2*86400: 3 * 2 * 3600}, got, by)
		}
		assert.True(t, seen, by)
	}
}

// putHolding writes clusters in states, holding from since, credited up to credited (their UIDs prefix-0,
// prefix-1, …).
func putHolding(t *testing.T, s *usage.Store, prefix string, since, credited time.Time, states []usage.State) {
	t.Helper()
	l := usage.NewLedger()
	for i, st := range states {
		m := &usage.Mark{UID: fmt.Sprintf("%s-%d", prefix, i), Since: since}
		l.Change(m, st, since)
		l.Credit(m, credited)
	}
	require.NoError(t, s.PutUsage(t.Context(), l))
}

// report is s's report for q: its groups and the seconds measured.
func report(ctx context.Context, s *usage.Store, q usage.Query) ([]usage.Group, map[int64]float64, error) {
	res, err := s.Utilization(ctx, q)
	return res.Groups, res.Measured, err
}

// utilizationKinds: a report that counts every namespace of each kind the marks have reads them with no
// condition on their kind; one that leaves a kind out, or scopes one to namespaces, leaves out its
// clusters: their days, their tails and their count, grouped and by cluster on a page.
func utilizationKinds(t *testing.T, open Open) {
	s, dsn := open(t)
	day := t0.Truncate(24 * time.Hour)
	// Held from the day's start, credited up to 5 h, reported 6 h after it.
	now := day.Add(6 * time.Hour)
	putHolding(t, s, "kind", day, now.Add(-time.Hour), []usage.State{
		{Kind: "RayCluster", Namespace: "a", Name: "c", Cluster: "c", Creator: "alice", Holding: true, Requests: ray.Resources{CPU: 1}},
		{Kind: "RayJob", Namespace: "b", Name: "j", Cluster: "j-x", Creator: "bob", Holding: true, Requests: ray.Resources{CPU: 2}},
		{Kind: "RayService", Namespace: "c", Name: "s", Cluster: "s-x", Creator: "alice", Holding: true, Requests: ray.Resources{CPU: 4}},
	})
	// Each cluster held 5 h written and 1 h since (its tail), its cores times 6 h.
	const held = 6 * 3600.0
	cases := []struct {
		scopes   map[string][]string
		creators []string
		want     map[string]float64 // cores by namespace
	}{
		{scopes: map[string][]string{"RayCluster": nil, "RayJob": nil, "RayService": nil}, want: map[string]float64{"a": 1, "b": 2, "c": 4}},
		{scopes: map[string][]string{"RayCluster": nil, "RayJob": nil}, want: map[string]float64{"a": 1, "b": 2}},
		{scopes: map[string][]string{"RayCluster": nil, "RayService": nil, "Other": nil}, want: map[string]float64{"a": 1, "c": 4}},
		{scopes: map[string][]string{"RayCluster": nil, "RayJob": {}, "RayService": nil}, want: map[string]float64{"a": 1, "c": 4}},
		{scopes: map[string][]string{"RayCluster": nil, "RayJob": {"a"}, "RayService": nil}, want: map[string]float64{"a": 1, "c": 4}},
		{scopes: map[string][]string{"RayCluster": nil, "RayJob": nil, "RayService": nil}, creators: []string{"alice"},
			want: map[string]float64{"a": 1, "c": 4}},
	}
	for i, c := range append(cases, cases...) {
		if i == len(cases) {
			// The same, the store opened again: the kinds are those its marks have.
			require.NoError(t, s.Close())
			var err error
			s, err = usage.Open(t.Context(), dsn)
			require.NoError(t, err)
			defer func() { _ = s.Close() }()
		}
		msg := fmt.Sprintf("%v, creators %v, opened %d times", c.scopes, c.creators, 1+i/len(cases))
		q := usage.Query{From: day, To: day.Add(24 * time.Hour), Now: now, GroupBy: usage.ByNamespace,
			Scopes: c.scopes, Creators: c.creators}
		groups, _, err := report(t.Context(), s, q)
		require.NoError(t, err)
		got := map[string]float64{}
		for _, g := range groups {
			got[g.Key.Namespace] = g.Total.CPUSeconds / held
			assert.Equal(t, int64(1), g.Objects, msg)
		}
		assert.InDeltaMapValues(t, c.want, got, 1e-9, msg)
		q.GroupBy, q.Page = usage.ByCluster, &usage.Page{SortBy: "cpuCoreHours", Desc: true, Limit: 2}
		res, err := s.Utilization(t.Context(), q)
		require.NoError(t, err)
		assert.Equal(t, len(c.want), res.Count, msg)
		require.Len(t, res.Groups, min(2, len(c.want)), msg)
		for _, g := range res.Groups {
			assert.InDelta(t, c.want[g.Key.Namespace]*held, g.Total.CPUSeconds, 1e-6, msg)
		}
		whole := 0.0
		for _, f := range res.Whole {
			whole += f.CPUSeconds
		}
		sum := 0.0
		for _, v := range c.want {
			sum += v
		}
		assert.InDelta(t, sum*held, whole, 1e-6, "%s: the whole", msg)
	}
}

// utilizationFractions: device equivalents are fractions (a vNPU, a MIG instance, a shared GPU's
// replica), kept as such in a mark and in the figures.
func utilizationFractions(t *testing.T, open Open) {
	s, _ := open(t)
	ctx := t.Context()
	day := t0.Truncate(24 * time.Hour)
	frac := &usage.Mark{UID: "c-frac", Since: t0}
	lf := usage.NewLedger()
	lf.Change(frac, usage.State{Kind: "RayCluster", Namespace: "f", Name: "slices", Cluster: "slices", Creator: "carol", Holding: true,
		Requests: ray.Resources{CPU: 1, GPU: 6.0 / 7, NPU: 0.125}}, t0)
	lf.Credit(frac, t0.Add(time.Hour))
	require.NoError(t, s.PutUsage(ctx, lf))
	marks, err := s.UsageMarks(ctx)
	require.NoError(t, err)
	require.Contains(t, marks, "c-frac")
	assert.InDelta(t, 6.0/7, marks["c-frac"].Requests.GPU, 1e-12)
	assert.InDelta(t, 0.125, marks["c-frac"].Requests.NPU, 1e-12)
	q := usage.Query{From: day, To: day.Add(24 * time.Hour), GroupBy: usage.ByNamespace, Now: t0.Add(time.Hour),
		Scopes: map[string][]string{"RayCluster": {"f"}}}
	groups, _, err := report(ctx, s, q)
	require.NoError(t, err)
	require.Len(t, groups, 1)
	assert.InDelta(t, 3600*6.0/7, groups[0].Total.GPUSeconds, 1e-6)
	assert.InDelta(t, 3600*0.125, groups[0].Total.NPUSeconds, 1e-6)
}

// utilizationAccelerators: each accelerator resource and model a cluster holds is counted beside the
// device equivalents, raw (units times seconds) and in devices, credited and pending, and credited from
// the mark up to now for a cluster holding now; grouped, by cluster on a page and for the whole; a new
// writer takes the mark's accelerators up; a prune removes their days.
func utilizationAccelerators(t *testing.T, open Open) {
	s, _ := open(t)
	ctx := t.Context()
	day := t0.Truncate(24 * time.Hour)
	var vnpus, migs accel.Holdings
	vnpus.Add("huawei.com/Ascend910-4c", accel.Unit{Kind: accel.NPU, Model: "Ascend910", Share: 1.0 / 8, Exact: true}, 8)
	migs.Add("nvidia.com/mig-3g.40gb", accel.Unit{Kind: accel.GPU, Model: "H100-80GB-HBM3", Share: 3.0 / 7, Exact: true}, 2)
	migs.Add(accel.DRAPrefix+"gpu.nvidia.com", accel.Unit{Kind: accel.GPU, Model: "NVIDIA H100 80GB HBM3", Share: 1, Exact: true}, 4)
	state := func(ns string, held accel.Holdings) usage.State {
		return usage.State{Kind: "RayCluster", Namespace: ns, Name: ns, Cluster: ns, Creator: "carol", Holding: true,
			Requests: ray.Resources{CPU: 1, GPU: held.Devices(accel.GPU), NPU: held.Devices(accel.NPU), Accelerators: held}}
	}
	// vnpu: held from t0, credited 1 h, then 1 h pending (a change to more CPU), and 1 h since (its tail).
	// gpus: held from t0 for 2 h, then stopped.
	l := usage.NewLedger()
	npu := &usage.Mark{UID: "c-vnpu", Since: t0}
	gpu := &usage.Mark{UID: "c-gpus", Since: t0}
	l.Change(npu, state("vnpu", vnpus), t0)
	l.Change(gpu, state("gpus", migs), t0)
	l.Credit(npu, t0.Add(time.Hour))
	l.Credit(gpu, t0.Add(time.Hour))
	require.NoError(t, s.PutUsage(ctx, l))
	l = usage.NewLedger()
	more := state("vnpu", vnpus)
	more.Requests.CPU = 2
	l.Change(npu, more, t0.Add(2*time.Hour))
	stopped := state("gpus", migs)
	stopped.Holding = false
	l.Change(gpu, stopped, t0.Add(2*time.Hour))
	require.NoError(t, s.PutPending(ctx, l))

	marks, err := s.UsageMarks(ctx)
	require.NoError(t, err)
	require.Contains(t, marks, "c-vnpu")
	assert.Equal(t, vnpus, marks["c-vnpu"].Requests.Accelerators, "a new writer takes the mark's accelerators up")

	now := t0.Add(3 * time.Hour)
	want := map[string][]usage.AcceleratorHours{
		"vnpu": {{Kind: accel.NPU, Resource: "huawei.com/Ascend910-4c", Model: "Ascend910", Hours: 8 * 3, DeviceHours: 3}},
		"gpus": {{Kind: accel.GPU, Resource: "dra:gpu.nvidia.com", Model: "NVIDIA H100 80GB HBM3", Hours: 4 * 2, DeviceHours: 4 * 2},
			{Kind: accel.GPU, Resource: "nvidia.com/mig-3g.40gb", Model: "H100-80GB-HBM3", Hours: 2 * 2, DeviceHours: 2 * 2 * 3.0 / 7}},
	}
	near := func(msg string, want, got []usage.AcceleratorHours) {
		t.Helper()
		require.Len(t, got, len(want), msg)
		for i := range want {
			w, g := want[i], got[i]
			assert.Equal(t, [3]string{string(w.Kind), w.Resource, w.Model}, [3]string{string(g.Kind), g.Resource, g.Model}, msg)
			assert.InDelta(t, w.Hours, g.Hours, 1e-9, msg)
			assert.InDelta(t, w.DeviceHours, g.DeviceHours, 1e-9, msg)
		}
	}
	q := usage.Query{From: day, To: day.Add(24 * time.Hour), GroupBy: usage.ByNamespace, Now: now,
		Scopes: map[string][]string{"RayCluster": nil}}
	res, err := s.Utilization(ctx, q)
	require.NoError(t, err)
	rep := usage.Build(q, res, "name", "asc", 1, 10)
	require.Len(t, rep.Items, 2)
	for _, r := range rep.Items {
		near(r.Namespace, want[r.Namespace], r.Accelerators)
		var gpus, npus float64
		for _, a := range r.Accelerators {
			if a.Kind == accel.GPU {
				gpus += a.DeviceHours
			} else {
				npus += a.DeviceHours
			}
		}
		assert.InDelta(t, r.Allocated.GPUHours, gpus, 1e-9, "%s: the device-hours sum to the GPU-hours", r.Namespace)
		assert.InDelta(t, r.Allocated.NPUHours, npus, 1e-9, "%s: the device-hours sum to the NPU-hours", r.Namespace)
	}
	near("whole", append(slices.Clone(want["gpus"]), want["vnpu"]...), rep.Whole.Accelerators)

	// By cluster, a page of one: the page's row, and the whole.
	q.GroupBy, q.Page = usage.ByCluster, &usage.Page{SortBy: "npuHours", Desc: true, Limit: 1}
	res, err = s.Utilization(ctx, q)
	require.NoError(t, err)
	rep = usage.Build(q, res, "npuHours", "desc", 1, 1)
	require.Len(t, rep.Items, 1)
	near("the page", want["vnpu"], rep.Items[0].Accelerators)
	near("the page's whole", append(slices.Clone(want["gpus"]), want["vnpu"]...), rep.Whole.Accelerators)

	// A scope without the namespace counts none of it.
	q.GroupBy, q.Page, q.Scopes = usage.ByNamespace, nil, map[string][]string{"RayCluster": {"gpus"}}
	res, err = s.Utilization(ctx, q)
	require.NoError(t, err)
	rep = usage.Build(q, res, "name", "asc", 1, 10)
	near("scoped", want["gpus"], rep.Whole.Accelerators)

	// Pruned: the days go, the tail stays.
	_, err = s.PruneUsage(ctx, day.Add(24*time.Hour), false)
	require.NoError(t, err)
	q.Scopes = map[string][]string{"RayCluster": nil}
	res, err = s.Utilization(ctx, q)
	require.NoError(t, err)
	rep = usage.Build(q, res, "name", "asc", 1, 10)
	near("pruned", []usage.AcceleratorHours{{Kind: accel.NPU, Resource: "huawei.com/Ascend910-4c", Model: "Ascend910", Hours: 8, DeviceHours: 1}},
		rep.Whole.Accelerators)
}

// Attack: a tenant edits its Ray cluster again and again, naming other accelerator resources each
// time (nvidia.com/mig-1g.<n>gb takes any n; a summary bounds only the names held at once): each
// credit wrote a row per name, without bound per object and day. Past accel.MaxHeld names in an
// object's day, the rest of its seconds are kept as accel.OtherResource of their kind; the sums stay.
func acceleratorNamesBounded(t *testing.T, open Open) {
	s, dsn := open(t)
	ctx := t.Context()
	day := t0.Truncate(24 * time.Hour)
	m := &usage.Mark{UID: "c-churn", Since: t0}
	const edits, names = 20, 16
	for e := range edits {
		var held accel.Holdings
		for i := range names {
			held.Add(fmt.Sprintf("nvidia.com/mig-1g.%dgb", e*names+i+1), accel.Unit{Kind: accel.GPU, Share: 1.0 / 7}, 1)
		}
		l := usage.NewLedger()
		l.Change(m, usage.State{Kind: "RayCluster", Namespace: "churn", Name: "churn", Cluster: "churn", Creator: "mallory",
			Holding: true, Requests: ray.Resources{GPU: held.Devices(accel.GPU), Accelerators: held}}, t0.Add(time.Duration(e)*time.Minute))
		require.NoError(t, s.PutUsage(ctx, l))
	}
	l := usage.NewLedger()
	l.Credit(m, t0.Add(edits*time.Minute))
	require.NoError(t, s.PutUsage(ctx, l))

	var rows int
	require.NoError(t, DB(t, dsn).QueryRowContext(ctx, `SELECT COUNT(*) FROM usage_accelerators WHERE uid = 'c-churn'`).Scan(&rows))
	assert.LessOrEqual(t, rows, accel.MaxHeld+1, "an object's day keeps a bounded number of accelerator names")

	q := usage.Query{From: day, To: day.Add(24 * time.Hour), GroupBy: usage.ByNamespace, Now: t0.Add(edits * time.Minute),
		Scopes: map[string][]string{"RayCluster": nil}}
	res, err := s.Utilization(ctx, q)
	require.NoError(t, err)
	rep := usage.Build(q, res, "name", "asc", 1, 10)
	require.Len(t, rep.Items, 1)
	var units, devices float64
	for _, a := range rep.Items[0].Accelerators {
		units, devices = units+a.Hours, devices+a.DeviceHours
	}
	assert.InDelta(t, float64(edits*names)/60, units, 1e-9, "every unit-hour is kept")
	assert.InDelta(t, rep.Items[0].Allocated.GPUHours, devices, 1e-9, "the device-hours sum to the GPU-hours")
}
