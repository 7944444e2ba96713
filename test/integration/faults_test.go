//go:build integration

package integration

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"ray-service/internal/promql"
)

// statusCounts formats how many answers had each status.
func statusCounts(m map[int]int) string {
	var codes []int
	for c := range m {
		codes = append(codes, c)
	}
	sort.Ints(codes)
	var parts []string
	for _, c := range codes {
		parts = append(parts, fmt.Sprintf("%d: %d", c, m[c]))
	}
	return strings.Join(parts, ", ")
}

// Told to stop under load, the service says not ready and goes on serving for the delay, so that a load
// balancer stops sending first: requests sent after /readyz said not ready are still answered 200. Then
// it stops accepting, lets what is in flight finish and ends a log follow cleanly. No request it accepted
// gets a 5xx, and it exits, not before the delay. (How soon it says not ready, and how soon it exits
// after the delay, are speeds: not asserted here.)
func TestGracefulShutdownUnderLoad(t *testing.T) {
	ns := namespace(t, "drain")
	admin := env.tokens["admin"]
	runningCluster(t, ns, "dr")
	// The delay is the time the service serves on while saying not ready: long enough that, on a loaded
	// machine, /readyz's answer comes and load is sent after it, before the listener closes.
	const delay, timeout = 10 * time.Second, 10 * time.Second
	svc := startInstance(t, "ray-service-drain.log",
		"--shutdown-delay", delay.String(), "--shutdown-timeout", timeout.String())

	// A log follow, open across the shutdown.
	follow, sc := followHeadLog(t, svc.url, ns, "dr", "before shutdown")
	followEnded := make(chan error, 1)
	go func() {
		defer follow.Body.Close()
		for sc.Scan() {
		}
		followEnded <- sc.Err()
	}()

	// The load: lists and details through keep-alive connections, until the service stops accepting.
	var sent, answered, refused atomic.Int64
	var mu sync.Mutex
	codes := map[int]int{}
	type answer struct {
		sent   int64 // UnixNano
		status int
	}
	var afterTerm []answer // requests sent after SIGTERM, in the delay
	var termAt atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	paths := []string{nsPath(ns, "rayclusters"), "/rest/ray/v1/rayclusters?search=dr", itemPath(ns, "rayclusters", "dr")}
	for w := range 8 {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				sentAt := time.Now().UnixNano()
				sent.Add(1)
				r, err := sendTo(svc.url, "GET", paths[(w+i)%len(paths)], admin, "", nil)
				if err != nil { // refused once the listener is closed: never accepted
					refused.Add(1)
					time.Sleep(20 * time.Millisecond)
					continue
				}
				answered.Add(1)
				mu.Lock()
				codes[r.Status]++
				if term := termAt.Load(); term != 0 && sentAt > term {
					afterTerm = append(afterTerm, answer{sentAt, r.Status})
				}
				mu.Unlock()
			}
		})
	}
	// The load under way: every worker answered at least once.
	eventually(t, 60*time.Second, "the load answered", func() bool { return answered.Load() >= 8 })
	status, _, err := httpGet(context.Background(), svc.url+"/readyz")
	require.NoError(t, err)
	require.Equal(t, 200, status, "ready before SIGTERM")

	termAt.Store(time.Now().UnixNano())
	start := time.Now()
	require.NoError(t, svc.cmd.Process.Signal(syscall.SIGTERM))
	// A probe every 20 ms, each a request of its own (an answer slow under the load holds no later probe
	// back), until one is answered not ready, or the service is gone. The answer's arrival is the moment
	// the service is known to have said not ready.
	var notReadyAt atomic.Int64 // UnixNano of the first answer not ready
	var pwg sync.WaitGroup
probing:
	for notReadyAt.Load() == 0 {
		pwg.Go(func() {
			status, _, err := httpGet(context.Background(), svc.url+"/readyz")
			if err == nil && status == 503 {
				notReadyAt.CompareAndSwap(0, time.Now().UnixNano())
			}
		})
		select {
		case <-svc.done:
			break probing
		case <-time.After(20 * time.Millisecond):
		}
	}
	pwg.Wait()
	select {
	case <-svc.done:
	case <-time.After(delay + timeout + 90*time.Second):
		t.Fatal("the service did not exit")
	}
	exited := time.Since(start)
	close(stop)
	wg.Wait()

	// The requests sent once the service was known to say not ready, and their answers.
	servedAfter := 0
	for _, a := range afterTerm {
		if notReadyAt.Load() != 0 && a.sent > notReadyAt.Load() && a.status == 200 {
			servedAfter++
		}
	}
	var notReadyAfter time.Duration // 0: never said
	if notReadyAt.Load() != 0 {
		notReadyAfter = time.Duration(notReadyAt.Load() - termAt.Load())
	}
	t.Logf("sent %d, answered %d (%s), refused after the listener closed %d; /readyz answered not ready %s after SIGTERM, "+
		"then %d requests sent were answered 200; exited after %s",
		sent.Load(), answered.Load(), statusCounts(codes), refused.Load(), notReadyAfter.Round(time.Millisecond), servedAfter,
		exited.Round(time.Millisecond))
	require.NotZero(t, notReadyAt.Load(), "/readyz said not ready before the service exited")
	assert.Positive(t, servedAfter, "requests sent after /readyz said not ready were still served: a load balancer has the delay to stop sending")
	assert.GreaterOrEqual(t, exited, delay, "the service served out the delay")
	for code := range codes {
		assert.Less(t, code, 500, "no accepted request gets a 5xx")
	}
	assert.NotEmpty(t, afterTerm, "requests sent after SIGTERM were still served during the delay")
	for _, a := range afterTerm {
		assert.Equal(t, 200, a.status)
	}
	select {
	case err := <-followEnded:
		require.NoError(t, err, "the log follow ended cleanly")
	case <-time.After(60 * time.Second):
		t.Fatal("the log follow did not end")
	}
}

// listEntries returns the entries named name in a replica's list of kind in ns.
func listEntries(t *testing.T, base, ns, kind, name string) []summary {
	t.Helper()
	r, err := sendTo(base, "GET", nsPath(ns, kind)+"?pageSize=500", env.tokens["admin"], "", nil)
	require.NoError(t, err)
	require.Equal(t, 200, r.Status, string(r.Raw))
	var out []summary
	for _, s := range decode[listData](t, r).Items {
		if s.Name == name {
			out = append(out, s)
		}
	}
	return out
}

// Two replicas of the service against one cluster: a write through one shows in the other's list (how
// soon is a speed, logged and not asserted); start and stop sent through both at once end in one consistent state, each action
// answered 200 or 409 (never a 5xx), the object listed once, its spec whole.
func TestTwoReplicas(t *testing.T) {
	ns := namespace(t, "replicas")
	admin := env.tokens["admin"]
	other := startInstance(t, "ray-service-replica.log")
	a, b := env.serviceURL, other.url

	// Visible through the other replica, either way round.
	for i, pair := range [][2]string{{a, b}, {b, a}} {
		name := fmt.Sprintf("seen-%d", i)
		r, err := sendTo(pair[0], "POST", nsPath(ns, "rayclusters"), admin, "application/yaml",
			[]byte(strings.Replace(minimalCluster, "NAME", name, 1)))
		require.NoError(t, err)
		require.Equal(t, 201, r.Status, string(r.Raw))
		start := time.Now()
		eventually(t, 60*time.Second, "the other replica lists "+name, func() bool {
			return len(listEntries(t, pair[1], ns, "rayclusters", name)) == 1
		})
		t.Logf("created through one replica, listed by the other after %s", time.Since(start).Round(time.Millisecond))
	}

	// A RayService stops by parking its spec as a template and starts by creating it again: the
	// action with the most steps. Both replicas act on it at once, several rounds.
	r, err := sendTo(a, "POST", nsPath(ns, "rayservices"), admin, "application/yaml", mustRename(t, "rayservice-minimal.yaml", "both"))
	require.NoError(t, err)
	require.Equal(t, 201, r.Status, string(r.Raw))
	want := specOf(t, a, ns, "both")
	codes := map[int]int{}
	for round := range 6 {
		action := []string{"stop", "start"}[round%2]
		var wg sync.WaitGroup
		results := make([]*response, 2)
		for i, base := range []string{a, b} {
			wg.Go(func() {
				r, err := sendTo(base, "POST", itemPath(ns, "rayservices", "both")+"/"+action, admin, "", nil)
				if assert.NoError(t, err) {
					results[i] = r
				}
			})
		}
		wg.Wait()
		ok := 0
		for _, r := range results {
			require.NotNil(t, r)
			codes[r.Status]++
			assert.Contains(t, []int{200, 409}, r.Status, "%s through both: %s", action, r.Raw)
			if r.Status == 200 {
				ok++
			}
		}
		assert.GreaterOrEqual(t, ok, 1, "%s through both: one of them succeeds", action)
		wantType := map[string]string{"stop": "template", "start": "instance"}[action]
		for _, base := range []string{a, b} {
			eventually(t, 60*time.Second, fmt.Sprintf("after %s, one %s entry in each replica's list", action, wantType), func() bool {
				entries := listEntries(t, base, ns, "rayservices", "both")
				return len(entries) == 1 && entries[0].Type == wantType
			})
		}
		assert.Equal(t, want, specOf(t, a, ns, "both"), "after %s through both, the spec is whole", action)
	}
	t.Logf("start and stop through both replicas at once, 6 rounds: %s", statusCounts(codes))
}

// specOf returns the spec of the object a detail shows (instance or template), less what the
// operator defaults.
func specOf(t *testing.T, base, ns, name string) map[string]any {
	t.Helper()
	r, err := sendTo(base, "GET", itemPath(ns, "rayservices", name), env.tokens["admin"], "", nil)
	require.NoError(t, err)
	require.Equal(t, 200, r.Status, string(r.Raw))
	spec, _ := decode[summary](t, r).Object["spec"].(map[string]any)
	return map[string]any{"serveConfigV2": spec["serveConfigV2"], "rayVersion": nested(spec, "rayClusterConfig", "rayVersion"),
		"workers": withoutEmpty(nested(spec, "rayClusterConfig", "workerGroupSpecs"))}
}

// withoutEmpty drops the empty objects of v, which say nothing: KubeRay v1.6.2 adds its finalizer to a
// RayService with a typed update of the whole object (ray-operator/controllers/ray/rayservice_controller.go:147-150),
// which writes its spec back with the empty structs of its Go types (a worker group's scaleStrategy, a
// template's metadata), whenever it comes.
func withoutEmpty(v any) any {
	switch x := v.(type) {
	case map[string]any:
		out := map[string]any{}
		for k, e := range x {
			if m, ok := e.(map[string]any); ok && len(m) == 0 {
				continue
			}
			out[k] = withoutEmpty(e)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = withoutEmpty(e)
		}
		return out
	}
	return v
}

// component is a process of the local stack, as its PID file names it.
type component struct {
	name    string
	argv    []string
	environ []string
	dir     string
}

// killComponent kills a stack component (its whole process group) with SIGKILL and returns how to
// start it again: the same command line, environment and directory.
func killComponent(t *testing.T, name string) *component {
	t.Helper()
	pidFile := filepath.Join(env.state, "pids", name+".pid")
	raw, err := os.ReadFile(pidFile)
	require.NoError(t, err)
	pid, err := strconv.Atoi(strings.TrimSpace(string(raw)))
	require.NoError(t, err)
	cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	require.NoError(t, err)
	environ, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
	require.NoError(t, err)
	dir, err := os.Readlink(fmt.Sprintf("/proc/%d/cwd", pid))
	require.NoError(t, err)
	c := &component{name: name, argv: strings.Split(strings.TrimRight(string(cmdline), "\x00"), "\x00"),
		environ: strings.Split(strings.TrimRight(string(environ), "\x00"), "\x00"), dir: dir}
	require.NoError(t, syscall.Kill(-pid, syscall.SIGKILL))
	for syscall.Kill(pid, 0) == nil {
		time.Sleep(10 * time.Millisecond)
	}
	return c
}

// start starts the component again in its own process group, its output appended to its log, and
// records its PID for down.sh.
func (c *component) start(t *testing.T) {
	t.Helper()
	logf, err := os.OpenFile(filepath.Join(env.state, "logs", c.name+".log"), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	require.NoError(t, err)
	defer logf.Close()
	cmd := exec.Command(c.argv[0], c.argv[1:]...)
	cmd.Env, cmd.Dir, cmd.Stdout, cmd.Stderr = c.environ, c.dir, logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	require.NoError(t, cmd.Start())
	go func() { _ = cmd.Wait() }()
	require.NoError(t, os.WriteFile(filepath.Join(env.state, "pids", c.name+".pid"), []byte(strconv.Itoa(cmd.Process.Pid)+"\n"), 0o644))
}

// apiserverReady tells whether the apiserver answers its readiness check.
func apiserverReady() bool {
	client := &http.Client{Timeout: time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // a loopback health check
	res, err := client.Get(env.vars["KUBE_APISERVER_URL"] + "/readyz")
	if err != nil {
		return false
	}
	res.Body.Close()
	return res.StatusCode == 200
}

// objectState is what the fault load's writes leave of an object.
type objectState struct {
	exists    bool
	gen       string
	suspended bool
}

// stateAfter is the state the writes leave, each applied in order up to a refused one; a write whose
// answer failed otherwise counts as applied (the caller allows for either).
func stateAfter(ops []opRecord) objectState {
	s := objectState{}
	for _, op := range ops {
		if refused(op.status) {
			break
		}
		switch op.op {
		case "create":
			s = objectState{exists: true, gen: "1"}
		case "replace":
			s.gen = "2"
		case "stop":
			s.suspended = true
		case "start":
			s.suspended = false
		case "delete":
			s = objectState{}
		}
	}
	return s
}

// refused tells an answer that says the write was not applied.
func refused(status int) bool { return status == 409 || status == 422 }

// opRecord is one write of the fault load and its answer.
type opRecord struct {
	op, object string
	status     int // 0: no answer
	took       time.Duration
	reason     string
}

// faultLoad runs workers that each create RayClusters and replace, stop, start and delete them through
// the service, with lists in between, until stop closes. Each object has one worker; a worker moves to
// a new object when a write is not answered 2xx, so every object's writes up to its first failure are
// known. acked counts the writes answered 2xx so far.
func faultLoad(ns string, workers int, stop <-chan struct{}, acked *atomic.Int64) []opRecord {
	admin := env.tokens["admin"]
	var mu sync.Mutex
	var out []opRecord
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for n := 0; ; n++ {
				name := fmt.Sprintf("f%d-%d", w, n)
				body := func(gen int) []byte {
					y := strings.Replace(strings.Replace(minimalCluster, "NAME", name, 1), "metadata:\n",
						fmt.Sprintf("metadata:\n  labels: {gen: \"%d\"}\n", gen), 1)
					j, _ := yaml.YAMLToJSON([]byte(y))
					return j
				}
				steps := []struct{ op, method, path string }{
					{"create", "POST", nsPath(ns, "rayclusters")},
					{"replace", "PUT", itemPath(ns, "rayclusters", name)},
					{"stop", "POST", itemPath(ns, "rayclusters", name) + "/stop"},
					{"start", "POST", itemPath(ns, "rayclusters", name) + "/start"},
					{"delete", "DELETE", itemPath(ns, "rayclusters", name)},
				}
				if n%2 == 0 {
					steps = steps[:4] // every other object is kept
				}
				for _, s := range steps {
					select {
					case <-stop:
						return
					default:
					}
					start := time.Now()
					var b []byte
					var r *response
					var err error
					switch s.op {
					case "create":
						b = body(1)
					case "replace": // as a client does: the object as read, changed
						if r, err = send("GET", s.path, admin, "", nil); err == nil && r.Status == 200 {
							var d struct {
								Data struct {
									Object map[string]any `json:"object"`
								} `json:"data"`
							}
							if err = json.Unmarshal(r.Raw, &d); err == nil {
								_ = unstructured.SetNestedField(d.Data.Object, "2", "metadata", "labels", "gen")
								b, err = json.Marshal(d.Data.Object)
							}
						}
					}
					if err == nil && (r == nil || r.Status == 200) {
						r, err = send(s.method, s.path, admin, "application/json", b)
					}
					rec := opRecord{op: s.op, object: name, took: time.Since(start)}
					if err == nil {
						rec.status, rec.reason = r.Status, r.Reason
					}
					mu.Lock()
					out = append(out, rec)
					mu.Unlock()
					if rec.status >= 200 && rec.status <= 299 {
						acked.Add(1)
					}
					_, _ = send("GET", nsPath(ns, "rayclusters")+"?search=f", admin, "", nil)
					time.Sleep(100 * time.Millisecond) // a bounded load: at most ten writes a second per worker
					if rec.status < 200 || rec.status > 299 {
						break
					}
				}
			}
		})
	}
	wg.Wait()
	return out
}

// The apiserver, then etcd, is killed (SIGKILL) under a mixed load of writes and lists, and started
// again once it has been down 10 s and the service has said it is not ready. Every write the service
// acknowledged holds in the apiserver as acknowledged; every other write was answered 503 or 504 with a
// reason; /readyz says not ready while the cluster cannot serve, and ready again once it is back; the list
// comes to agree with the apiserver; the service's goroutines go back to their baseline. (How soon after
// the return each comes is a speed: logged, not asserted.)
func TestKilledControlPlane(t *testing.T) {
	for _, name := range []string{"kube-apiserver", "etcd"} {
		t.Run(name, func(t *testing.T) { killedUnderLoad(t, name) })
	}
}

func killedUnderLoad(t *testing.T, name string) {
	ns := namespace(t, "fault")
	baseline := goroutines(t)

	var readyMu sync.Mutex
	type sample struct {
		at              time.Time
		ready, notReady bool // answered 200, answered 503 (neither: no answer)
	}
	var samples []sample
	notReadySince := func(from time.Time) bool {
		readyMu.Lock()
		defer readyMu.Unlock()
		for _, s := range samples {
			if s.notReady && s.at.After(from) {
				return true
			}
		}
		return false
	}
	watchDone := make(chan struct{})
	stopWatch := make(chan struct{})
	go func() {
		defer close(watchDone)
		for {
			select {
			case <-stopWatch:
				return
			case <-time.After(100 * time.Millisecond):
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			status, _, err := httpGet(ctx, env.serviceURL+"/readyz")
			cancel()
			readyMu.Lock()
			samples = append(samples, sample{time.Now(), err == nil && status == 200, err == nil && status == 503})
			readyMu.Unlock()
		}
	}()

	stop := make(chan struct{})
	var recs []opRecord
	var acked atomic.Int64
	loadDone := make(chan struct{})
	go func() { recs = faultLoad(ns, 4, stop, &acked); close(loadDone) }()
	// The load under way: a write of each worker acknowledged, and the service ready.
	eventually(t, 60*time.Second, "writes acknowledged before the kill", func() bool { return acked.Load() >= 4 })
	eventually(t, 60*time.Second, "the service ready before the kill", func() bool {
		status, _, err := httpGet(context.Background(), env.serviceURL+"/readyz")
		return err == nil && status == 200
	})

	killed := time.Now()
	c := killComponent(t, name)
	// Down for 10 s at least (a sleep makes the outage's length; nothing is awaited in it), and until the
	// service has said it is not ready.
	time.Sleep(10 * time.Second)
	eventually(t, 90*time.Second, "/readyz saying not ready while "+name+" is down", func() bool { return notReadySince(killed) })
	restarting := time.Now()
	c.start(t)
	eventually(t, 90*time.Second, name+" back and the apiserver ready", apiserverReady)
	back := time.Now()
	eventually(t, 60*time.Second, "the service ready again", func() bool {
		status, _, err := httpGet(context.Background(), env.serviceURL+"/readyz")
		return err == nil && status == 200
	})
	readyAfter := time.Since(back)
	// The load goes on against the recovered cluster: more writes acknowledged, one a worker.
	ackedBack := acked.Load()
	eventually(t, 120*time.Second, "writes acknowledged after the return", func() bool { return acked.Load() >= ackedBack+4 })
	close(stop)
	<-loadDone
	close(stopWatch)
	<-watchDone

	// Answers.
	codes := map[int]int{}
	var slowest time.Duration
	for _, r := range recs {
		codes[r.status]++
		slowest = max(slowest, r.took)
		switch {
		case r.status >= 200 && r.status < 300:
		case r.status == 503 || r.status == 504:
			assert.NotEmpty(t, r.reason, "%s %s: %d without a reason", r.op, r.object, r.status)
		case r.status == 409 && (r.op == "replace" || r.op == "delete"):
			// the operator changed the object between the client's read and its write: refused, as
			// optimistic concurrency has it
		default:
			t.Errorf("%s %s: answered %d (%s), not 2xx, 503 or 504", r.op, r.object, r.status, r.reason)
		}
	}

	// Readiness: not ready while the cluster could not serve (between the kill and the start again).
	downSeen := false
	for _, s := range samples {
		if s.notReady && s.at.After(killed) && s.at.Before(restarting) {
			downSeen = true
		}
	}
	assert.True(t, downSeen, "/readyz said not ready while %s was down", name)

	// Nothing acknowledged is lost: each object's writes up to its first failure hold.
	byObject := map[string][]opRecord{}
	var order []string
	for _, r := range recs {
		if byObject[r.object] == nil {
			order = append(order, r.object)
		}
		byObject[r.object] = append(byObject[r.object], r)
	}
	held, err := env.adminDyn.Resource(rayClusters).Namespace(ns).List(context.Background(), metav1.ListOptions{})
	require.NoError(t, err)
	holds := map[string]objectState{}
	for _, o := range held.Items {
		if o.GetDeletionTimestamp() == nil {
			suspended, _, _ := unstructured.NestedBool(o.Object, "spec", "suspend")
			holds[o.GetName()] = objectState{exists: true, gen: o.GetLabels()["gen"], suspended: suspended}
		}
	}
	checked, uncertain, lost := 0, 0, 0
	for _, obj := range order {
		ops := byObject[obj]
		allowed := []objectState{stateAfter(ops)}
		if last := ops[len(ops)-1]; (last.status < 200 || last.status > 299) && !refused(last.status) {
			// A failed write may or may not have been applied (an answer lost with the apiserver):
			// the object is as before it, or as after it.
			uncertain++
			allowed = append(allowed, stateAfter(ops[:len(ops)-1]))
		}
		checked++
		if got := holds[obj]; !slices.Contains(allowed, got) {
			lost++
			t.Errorf("%s: after %v the apiserver holds %+v, not one of %+v", obj, ops, holds[obj], allowed)
		}
	}

	// The list comes to agree with the apiserver.
	listStart := time.Now()
	eventually(t, 60*time.Second, "the service lists what the apiserver holds", func() bool {
		list, err := env.adminDyn.Resource(rayClusters).Namespace(ns).List(context.Background(), metav1.ListOptions{})
		require.NoError(t, err)
		var want []string
		for _, o := range list.Items {
			if o.GetDeletionTimestamp() == nil {
				want = append(want, o.GetName())
			}
		}
		r := call(t, "GET", nsPath(ns, "rayclusters")+"?pageSize=500&sortBy=name&order=asc", env.tokens["admin"], "", nil)
		var got []string
		for _, s := range decode[listData](t, r).Items {
			got = append(got, s.Name)
		}
		sort.Strings(want)
		return strings.Join(want, ",") == strings.Join(got, ",")
	})

	listAgreed := time.Since(listStart)
	var after int
	goStart := time.Now()
	eventually(t, 90*time.Second, "goroutines back to the baseline", func() bool {
		after = goroutines(t)
		return after <= baseline+5
	})
	goBack := time.Since(goStart)
	t.Logf("%s killed for %s under load: %d writes sent, answered %s; %d objects checked, %d whose last write may or may not have applied, %d lost; "+
		"slowest answer %s; ready %s after the cluster's return; list agreed after %s; goroutines %d before, %d after %s",
		name, restarting.Sub(killed).Round(time.Second), len(recs), statusCounts(codes), checked, uncertain, lost, slowest.Round(time.Millisecond), readyAfter.Round(time.Millisecond),
		listAgreed.Round(time.Millisecond), baseline, after, goBack.Round(time.Second))
}

// Prometheus slowed past the service's query timeout, then stopped, then started again: the overview
// answers 200 throughout, while Prometheus still holds every query (slowed) or is still down (stopped),
// so without waiting for it; its counts and allocated totals exact and a warning for each figure it could
// not get; the figures return when Prometheus does. (How soon it answers is a speed: logged.)
func TestPrometheusFaults(t *testing.T) {
	ns := namespace(t, "promfault")
	admin := env.tokens["admin"]
	runningCluster(t, ns, "pf") // settled, so that the counts cannot change during the test
	const timeout = 2 * time.Second
	prom := &slowPrometheus{}
	// The idle detection off: the overview's queries are then the only ones Prometheus sees.
	svc := startInstance(t, "ray-service-promfault.log",
		"--prometheus-url", prom.start(t), "--prometheus-timeout", timeout.String(), "--idle-window=0")

	// overview answers one overview of ns (a new window each time, so that no answer is cached) and
	// how long it took.
	round := 0
	overview := func() (overviewData, time.Duration, int) {
		t.Helper()
		round++
		end := time.Now().Add(-time.Duration(round) * time.Minute).Truncate(time.Second)
		q := fmt.Sprintf("namespace=%s&start=%d&end=%d&step=60s", ns, end.Add(-10*time.Minute).Unix(), end.Unix())
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		start := time.Now()
		status, body, err := httpGetHeaders(ctx, svc.url+"/rest/ray/v1/overview?"+q, map[string]string{"Authorization": "Bearer " + admin})
		took := time.Since(start)
		require.NoError(t, err)
		require.Equal(t, 200, status, "%s", body)
		d := decode[overviewData](t, &response{Data: dataOf(t, body)})
		failed := 0
		for _, w := range d.Warnings {
			if strings.Contains(w, "Prometheus query failed") {
				failed++
			}
		}
		return d, took, failed
	}
	// Every figure at once, as on a healthy stack (a query slower than the timeout on a loaded machine is
	// asked again).
	var healthy overviewData
	eventually(t, 60*time.Second, "an overview with every figure", func() bool {
		d, _, failed := overview()
		healthy = d
		return failed == 0
	})
	require.NotNil(t, healthy.Counts)
	exprs, err := promql.Expressions(promql.Scope{}, time.Minute)
	require.NoError(t, err)
	figures := len(exprs) // the overview's queries, one warning each when Prometheus fails

	// Slowed: Prometheus holds each query a minute, longer than the test waits for an answer; the answer
	// comes before any is forwarded to it.
	prom.setDelay(time.Minute)
	forwarded := prom.forwardedCount()
	slow, took, failed := overview()
	assert.Equal(t, forwarded, prom.forwardedCount(), "slowed: answered while Prometheus still held every query")
	assert.Equal(t, figures, failed, "slowed: a warning for each figure: %v", slow.Warnings)
	assert.Equal(t, *healthy.Counts, *slow.Counts, "slowed: counts exact")
	assert.InDelta(t, healthy.Allocated.CPU, slow.Allocated.CPU, 1e-9, "slowed: allocated exact")
	prom.setDelay(0)

	// Stopped: answered while it is still down (it is started again only after).
	c := killComponent(t, "prometheus")
	down, tookDown, failed := overview()
	assert.Equal(t, figures, failed, "stopped: a warning for each figure: %v", down.Warnings)
	assert.Equal(t, *healthy.Counts, *down.Counts, "stopped: counts exact")
	assert.InDelta(t, healthy.Allocated.CPU, down.Allocated.CPU, 1e-9, "stopped: allocated exact")

	c.start(t)
	restarted := time.Now()
	eventually(t, 60*time.Second, "the figures back with Prometheus", func() bool {
		_, _, failed := overview()
		return failed == 0
	})
	t.Logf("overview with Prometheus slowed past the %s timeout: %s; stopped: %s; figures back %s after its restart",
		timeout, took.Round(time.Millisecond), tookDown.Round(time.Millisecond), time.Since(restarted).Round(time.Second))
}

// The KubeRay operator stopped: writes are still accepted and shown, each as its object says (nothing
// reconciles them), and nothing the service does waits on the operator: every write is answered while
// the operator is still down (a write that waited on it would get no answer until it is started again,
// after them). Started again, it reconciles.
func TestOperatorStopped(t *testing.T) {
	ns := namespace(t, "nooperator")
	admin := env.tokens["admin"]
	c := killComponent(t, "ray-operator")
	restarted := false
	defer func() {
		if !restarted {
			c.start(t)
		}
	}()

	start := time.Now()
	require.Equal(t, 201, createCluster(t, admin, ns, "idle", nil).Status)
	r := call(t, "POST", nsPath(ns, "rayservices")+"?start=false", admin, "application/yaml", mustRename(t, "rayservice-minimal.yaml", "parked"))
	require.Equal(t, 201, r.Status, "%s", r.Raw)
	require.Equal(t, 200, call(t, "POST", itemPath(ns, "rayclusters", "idle")+"/stop", admin, "", nil).Status)
	require.Equal(t, 200, call(t, "POST", itemPath(ns, "rayclusters", "idle")+"/start", admin, "", nil).Status)
	writes := time.Since(start)

	eventually(t, 60*time.Second, "both listed", func() bool {
		return len(listEntries(t, env.serviceURL, ns, "rayclusters", "idle")) == 1 &&
			len(listEntries(t, env.serviceURL, ns, "rayservices", "parked")) == 1
	})
	s, code := statusOf(t, ns, "rayclusters", "idle")
	require.Equal(t, 200, code)
	assert.Equal(t, "Pending", s.Status, "nothing reconciled it: the object says no more than Pending")
	assert.Empty(t, clusterPods(t, ns, "idle"), "no pods without the operator")
	tpl, code := statusOf(t, ns, "rayservices", "parked")
	require.Equal(t, 200, code)
	assert.Equal(t, "Stopped", tpl.Status)

	c.start(t)
	restarted = true
	waitStatus(t, ns, "rayclusters", "idle", "Running")
	t.Logf("writes without the operator were answered in %s; it reconciled once started again", writes.Round(time.Millisecond))
}

// A RayService stop (its spec stored as a template, then the instance deleted) and start (the instance
// created, then the template deleted) are interrupted half-way: the service that runs them is killed
// (SIGKILL) after the first step, which a slow link to the apiserver leaves time to see, and the link
// holds whatever it still carries. Throughout, the list shows the object once; repeating the action
// through another instance completes it; the spec is whole.
func TestInterruptedStopAndStart(t *testing.T) {
	ns := namespace(t, "interrupt")
	admin := env.tokens["admin"]
	r := call(t, "POST", nsPath(ns, "rayservices"), admin, "application/yaml", mustRename(t, "rayservice-minimal.yaml", "half"))
	require.Equal(t, 201, r.Status, "%s", r.Raw)
	want := specOf(t, env.serviceURL, ns, "half")
	cmName := "ray-template.rayservice.half"

	templateExists := func() bool {
		_, err := env.admin.CoreV1().ConfigMaps(ns).Get(context.Background(), cmName, metav1.GetOptions{})
		return err == nil
	}
	instanceExists := func() bool {
		o, err := getRay(t, rayServices, ns, "half")
		return err == nil && o.GetDeletionTimestamp() == nil
	}
	listedOnce := func(what string) {
		entries := listEntries(t, env.serviceURL, ns, "rayservices", "half")
		assert.Len(t, entries, 1, "%s: the list shows the object once", what)
	}

	// interrupt runs action through an instance behind a slow link and, once caught(), the first step
	// done, holds, holds the link and kills the instance; it says whether the kill came before the second
	// step. The link is slowed once the instance is ready: each chunk towards the apiserver then arrives
	// 10 s after it was sent, so the second step's request is still on the link (and dropped there) unless
	// seeing the first step took the test that long.
	interrupt := func(action string, caught, secondDone func() bool) bool {
		f := forward(t, strings.TrimPrefix(env.vars["KUBE_APISERVER_URL"], "https://"))
		svc, err := instance{log: "ray-service-interrupt-" + action + ".log", readyWithin: 90 * time.Second,
			args: []string{"--kubeconfig", kubeconfigVia(t, f.ln.Addr().String())}}.start(t)
		require.NoError(t, err)
		f.slow(10 * time.Second)
		go func() { _, _ = sendTo(svc.url, "POST", itemPath(ns, "rayservices", "half")+"/"+action, admin, "", nil) }()
		eventually(t, 120*time.Second, action+": the first step", caught)
		f.hold()
		require.NoError(t, svc.cmd.Process.Kill())
		<-svc.done
		f.stop()
		return !secondDone()
	}

	// Stop, killed between storing the template and deleting the instance.
	halfway := interrupt("stop", templateExists, func() bool { return !instanceExists() })
	t.Logf("stop interrupted between its steps: %v (template and instance both there)", halfway)
	assert.True(t, halfway, "the kill came between the steps")
	listedOnce("stop interrupted")
	r = call(t, "POST", itemPath(ns, "rayservices", "half")+"/stop", admin, "", nil)
	require.Equal(t, 200, r.Status, "repeating the stop: %s", r.Raw)
	eventually(t, 30*time.Second, "the stop completed", func() bool { return !instanceExists() && templateExists() })
	eventually(t, 5*time.Second, "listed once, as a template", func() bool {
		e := listEntries(t, env.serviceURL, ns, "rayservices", "half")
		return len(e) == 1 && e[0].Type == "template"
	})
	assert.Equal(t, want, specOf(t, env.serviceURL, ns, "half"), "the spec is whole after the stop")

	// Start, killed between creating the instance and deleting the template.
	halfway = interrupt("start", instanceExists, func() bool { return !templateExists() })
	t.Logf("start interrupted between its steps: %v (instance and template both there)", halfway)
	assert.True(t, halfway, "the kill came between the steps")
	listedOnce("start interrupted")
	r = call(t, "POST", itemPath(ns, "rayservices", "half")+"/start", admin, "", nil)
	require.Equal(t, 200, r.Status, "repeating the start: %s", r.Raw)
	eventually(t, 30*time.Second, "the start completed", func() bool { return instanceExists() && !templateExists() })
	eventually(t, 5*time.Second, "listed once, as an instance", func() bool {
		e := listEntries(t, env.serviceURL, ns, "rayservices", "half")
		return len(e) == 1 && e[0].Type == "instance"
	})
	assert.Equal(t, want, specOf(t, env.serviceURL, ns, "half"), "the spec is whole after the start")
}
