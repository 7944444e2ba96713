package history_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"ray-service/internal/benchtarget"
	"ray-service/internal/history"
	"ray-service/internal/history/historytest"
)

// benchRecords is how many records the history benchmark holds (HISTORY_BENCH_RECORDS to change it):
// 100,000, or 1,000 in runs for its checks alone.
func benchRecords() int {
	var n int
	if _, err := fmt.Sscan(os.Getenv("HISTORY_BENCH_RECORDS"), &n); err == nil && n > 0 {
		return n
	}
	return benchtarget.Size(100_000, 1_000)
}

// openBench opens the benchmark's history: HISTORY_BENCH_DSN (a PostgreSQL database to fill), else
// SQLite in a temporary directory. It returns the store and the SQLite file ("" for PostgreSQL).
func openBench(b *testing.B) (*history.Store, string) {
	if dsn := os.Getenv("HISTORY_BENCH_DSN"); dsn != "" {
		s, err := history.Open(b.Context(), dsn)
		if err != nil {
			b.Fatal(err)
		}
		return s, ""
	}
	file := filepath.Join(b.TempDir(), "history.db")
	s, err := history.Open(b.Context(), "sqlite:"+file)
	if err != nil {
		b.Fatal(err)
	}
	return s, file
}

// BenchmarkHistory fills a history with 100,000 records and reports: the write rate of records as the
// recorder writes them (one record and its transitions at a time), the database's size per record, and
// the latency of filtered, sorted history pages (p50, p99). Issue 17's target: a page's p99 ≤ 20 ms on
// SQLite.
func BenchmarkHistory(b *testing.B) {
	ctx := context.Background()
	s, file := openBench(b)
	defer func() { _ = s.Close() }()
	n := benchRecords()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	// The first 2,000 the recorder's way, timed; the rest in one transaction, to get there sooner.
	timed := min(2000, n)
	start := time.Now()
	for i := range timed {
		r, tl := historytest.BenchRecord(i, t0)
		if err := s.Put(ctx, r); err != nil {
			b.Fatal(err)
		}
		for _, t := range tl {
			if err := s.AddTransition(ctx, r.UID, t); err != nil {
				b.Fatal(err)
			}
		}
	}
	writeRate := float64(timed) / time.Since(start).Seconds()
	tx, err := history.DBOf(s).BeginTx(ctx, nil)
	if err != nil {
		b.Fatal(err)
	}
	for i := timed; i < n; i++ {
		r, tl := historytest.BenchRecord(i, t0)
		if _, err := tx.ExecContext(ctx, `INSERT INTO records (uid, kind, namespace, name, creator, status, reason, message,
			created_at, finished_at, deleted_at, generation) VALUES ($1, $2, $3, $4, $5, $6, '', '', $7, $8, NULL, 1)`,
			r.UID, r.Kind, r.Namespace, r.Name, r.Creator, r.Status, r.CreatedAt.UnixNano(), history.UnixOrNil(r.FinishedAt)); err != nil {
			b.Fatal(err)
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO manifests (uid, spec) VALUES ($1, $2)`, r.UID, r.Spec); err != nil {
			b.Fatal(err)
		}
		for _, t := range tl {
			if _, err := tx.ExecContext(ctx, `INSERT INTO transitions (uid, status, at) VALUES ($1, $2, $3)`, r.UID, t.Status, t.At.UnixNano()); err != nil {
				b.Fatal(err)
			}
		}
	}
	if err := tx.Commit(); err != nil {
		b.Fatal(err)
	}
	if err := s.Optimize(ctx); err != nil {
		b.Fatal(err)
	}
	perRecord := 0.0
	if file != "" {
		if _, err := history.DBOf(s).ExecContext(ctx, `PRAGMA wal_checkpoint(TRUNCATE)`); err != nil {
			b.Fatal(err)
		}
		if st, err := os.Stat(file); err == nil {
			perRecord = float64(st.Size()) / float64(n)
		}
	}

	// The pages a console asks for: a namespace or a few, a status, a creator or a search, sorted by
	// when they finished (newest first) or by name, one of the first pages.
	rng := rand.New(rand.NewPCG(1, 2))
	query := func() history.Query {
		q := history.Query{Kind: []string{"RayJob", "RayCluster", "RayService"}[rng.IntN(3)], SortBy: []string{"finishedAt", "createdAt", "name"}[rng.IntN(3)],
			Desc: rng.IntN(2) == 0, Page: 1 + rng.IntN(5), PageSize: 20}
		switch rng.IntN(4) {
		case 0:
			q.Namespaces = []string{fmt.Sprintf("team-%02d", rng.IntN(50))}
		case 1:
			q.Namespaces = []string{fmt.Sprintf("team-%02d", rng.IntN(50)), fmt.Sprintf("team-%02d", rng.IntN(50)), fmt.Sprintf("team-%02d", rng.IntN(50))}
		}
		switch rng.IntN(4) {
		case 0:
			q.Statuses = []string{"Failed"}
		case 1:
			q.Creators = []string{fmt.Sprintf("user-%02d", rng.IntN(20))}
		case 2:
			q.Search = fmt.Sprintf("%03d", rng.IntN(1000))
		}
		if rng.IntN(3) == 0 {
			after := t0.Add(time.Duration(rng.IntN(n)) * time.Second)
			q.FinishedAfter = &after
		}
		return q
	}
	var took []time.Duration
	b.ResetTimer()
	for b.Loop() {
		q := query()
		t := time.Now()
		if _, _, err := s.List(ctx, q); err != nil {
			b.Fatal(err)
		}
		took = append(took, time.Since(t))
	}
	b.StopTimer()
	// Reported after the loop: the timer's reset at its start clears what was reported before.
	if perRecord > 0 {
		b.ReportMetric(perRecord, "bytes/record")
	}
	b.ReportMetric(writeRate, "records-written/s")
	slices.Sort(took)
	p99 := float64(took[len(took)*99/100].Microseconds()) / 1000
	b.ReportMetric(float64(took[len(took)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(p99, "p99-ms")
	// Issue 17's target, with a slack: on the development machine (2 cores, shared) a page's p99 was
	// 18.1 and 19.5 ms in two runs of -benchtime 5000x on 2026-12-06, and 22.6 ms while other work ran.
	if file != "" {
		benchtarget.Check(b, benchtarget.AtMost("p99-ms (SQLite)", 20, "ms").Within(10), p99)
	}
}
