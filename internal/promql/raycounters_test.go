package promql

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// rayCounters are the Ray metrics exported as Prometheus counters, without the "ray_" namespace and
// without "_total". Ray records them as ray::stats::COUNT (ray-project/ray src/ray/stats/metric_defs.cc:
// grpc_server_req_new, grpc_server_req_handling, grpc_server_req_finished, gcs_storage_operation_count,
// memory_manager_worker_eviction_total from Ray 2.9 on; operation_count a COUNT, labelled Name, in the
// versions that made operation_run_time_ms and operation_queue_time_ms histograms, a GAUGE before), and
// its exporter turns a count into a CounterMetricFamily (python/ray/_private/prometheus_exporter.py
// Collector.to_metric, CountAggregationData), whose sample prometheus_client names <name>_total: a
// counter named ..._total keeps one _total. So a query must name each as ray_<name>_total.
var rayCounters = []string{
	"grpc_server_req_new",
	"grpc_server_req_handling",
	"grpc_server_req_finished",
	"gcs_storage_operation_count",
	"memory_manager_worker_eviction",
	"operation_count",
}

// rayMetricName matches a Ray metric's name where a query, a recording or an emulation writes one.
var rayMetricName = regexp.MustCompile(`\bray_[a-z0-9_]+`)

// Every PromQL query of the service, every emulated Ray series of the stack and the tests, and the
// chart's dashboards name a Ray counter with its _total: without it Prometheus holds no such series and
// the figure is silently missing.
func TestRayCountersAreNamedWithTotal(t *testing.T) {
	root := filepath.Join("..", "..")
	self, err := filepath.Abs("raycounters_test.go")
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	for _, dir := range []string{"internal", "stack", "test", "charts"} {
		err := filepath.WalkDir(filepath.Join(root, dir), func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() {
				return nil
			}
			switch filepath.Ext(path) {
			case ".go", ".yaml", ".yml", ".json", ".tpl", ".sh", ".om", ".txt":
			default:
				return nil
			}
			if abs, _ := filepath.Abs(path); abs == self {
				return nil
			}
			b, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			checked++
			for _, name := range rayMetricName.FindAllString(string(b), -1) {
				if bad, counter := withoutTotal(name); bad {
					t.Errorf("%s names the Ray counter ray_%s as %s: Ray exports it as ray_%s_total", path, counter, name, counter)
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if checked < 50 {
		t.Fatalf("only %d files were read: the walk missed the sources", checked)
	}
}

// withoutTotal tells whether the metric name names a Ray counter without its _total, and which.
func withoutTotal(name string) (bool, string) {
	base := strings.TrimPrefix(name, "ray_")
	for _, c := range rayCounters {
		if base == c || base == c+"_bucket" || base == c+"_sum" || base == c+"_count" {
			return true, c
		}
	}
	return false, ""
}

// The check itself tells a counter without _total from one with it and from other Ray metrics.
func TestWithoutTotal(t *testing.T) {
	for name, want := range map[string]bool{
		"ray_grpc_server_req_finished":             true,
		"ray_grpc_server_req_finished_total":       false,
		"ray_operation_count":                      true,
		"ray_operation_count_total":                false,
		"ray_operation_queue_time_ms_count":        false,
		"ray_memory_manager_worker_eviction":       true,
		"ray_memory_manager_worker_eviction_total": false,
		"ray_resources":                            false,
		"ray_gcs_storage_operation_count":          true,
	} {
		if got, _ := withoutTotal(name); got != want {
			t.Errorf("withoutTotal(%q) = %v, want %v", name, got, want)
		}
	}
}
