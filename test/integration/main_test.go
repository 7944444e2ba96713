//go:build integration

// Package integration tests ray-service against the local stack (stack/up.sh): a real kube-apiserver,
// KubeRay operator and KWOK nodes, all on 127.0.0.1. The service runs as its own binary.
//
// Run through `make test`, which builds everything and runs this package inside a network namespace that
// has only the loopback interface. The test refuses to start where other interfaces are up, unless
// RAY_TEST_ALLOW_HOST_NETWORK=1.
//
// A test that owns its namespaces (or database) and changes nothing others see calls t.Parallel; Go
// runs those after the serial ones. Tests that start or stop service instances, change rights beyond a
// namespace of their own, inject faults, measure time or count across namespaces stay serial. What
// every test saw (the answers against docs/swagger, the logs against the tokens) is checked in TestMain
// once all of them have ended.
package integration

import (
	"bufio"
	"flag"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

// env is the running stack and service, shared by the tests of this package.
var env *stackEnv

type stackEnv struct {
	vars       map[string]string
	root       string // the repository
	state      string // the stack's state directory
	serviceURL string
	// dashboardURL is the origin of the service's Ray dashboards (its dashboard-listen).
	dashboardURL string
	admin        kubernetes.Interface
	adminDyn     dynamic.Interface
	tokens       map[string]string // user -> token
	dashboards   *standIn          // the Ray dashboards, behind the operator's and the service's proxy
}

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	if err := loopbackOnly(); err != nil {
		fmt.Fprintln(os.Stderr, "integration:", err)
		return 1
	}
	root, err := repoRoot()
	if err != nil {
		fmt.Fprintln(os.Stderr, "integration:", err)
		return 1
	}
	state := os.Getenv("STACK_STATE")
	if state == "" {
		dir, err := os.MkdirTemp("", "ray-stack-")
		if err != nil {
			fmt.Fprintln(os.Stderr, "integration:", err)
			return 1
		}
		defer os.RemoveAll(dir)
		state = dir
		up := exec.Command(filepath.Join(root, "stack", "up.sh"), state)
		up.Env = append(os.Environ(), "WITH_POSTGRES=1") // the history's tests run on PostgreSQL too
		up.Stdout, up.Stderr = os.Stderr, os.Stderr
		if err := up.Run(); err != nil {
			fmt.Fprintln(os.Stderr, "integration: stack/up.sh:", err)
			dumpLogs(state)
			stopStack(root, state)
			return 1
		}
		defer stopStack(root, state)
	}
	e, stop, err := startService(root, state)
	if err != nil {
		fmt.Fprintln(os.Stderr, "integration:", err)
		dumpLogs(state)
		return 1
	}
	defer stop()
	proxy, err := url.Parse(e.vars["OPERATOR_HTTP_PROXY"])
	if err != nil {
		fmt.Fprintln(os.Stderr, "integration:", err)
		return 1
	}
	if e.dashboards, err = startStandIn(proxy.Host, e.admin); err != nil {
		fmt.Fprintln(os.Stderr, "integration: stand-in Ray dashboard:", err)
		return 1
	}
	env = e
	code := m.Run()
	if !afterTests() {
		code = 1
	}
	if code != 0 {
		dumpLogs(state)
	}
	return code
}

// afterTests checks what every test that ran saw, once they have all ended: the answers against
// docs/swagger and the logs against the tokens. They are no tests, so that -test.run cannot leave them
// out: a subset is checked on what it did. It says whether both checks passed.
func afterTests() bool {
	if f := flag.Lookup("test.list"); f != nil && f.Value.String() != "" {
		return true // only listing the tests
	}
	ok := true
	report := func(what string, problems []string, err error) {
		if err != nil {
			problems = append(problems, err.Error())
		}
		for _, p := range problems {
			fmt.Printf("FAIL %s: %s\n", what, p)
			ok = false
		}
	}
	answers := recordedAnswers()
	problems, pairs, err := checkAnswers(env.root, answers)
	report("answers against docs/swagger", problems, err)
	// Which pairs were answered, in the file RAY_TEST_PAIRS names (make's: beside the run's log): two
	// runs' files tell what one of them did not reach (the fault tests' writes are answered 503 or 504
	// as the outage falls).
	var lines []string
	answered := 0
	for p, seen := range pairs {
		if seen {
			answered++
			lines = append(lines, "answered "+p)
		} else {
			lines = append(lines, "not seen "+p)
		}
	}
	slices.Sort(lines)
	fmt.Printf("answers against docs/swagger: %d answers checked, %d of %d documented route/status pairs answered\n",
		len(answers), answered, len(pairs))
	if file := os.Getenv("RAY_TEST_PAIRS"); file != "" {
		if err := os.WriteFile(file, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
			report("the answered pairs' list", nil, err)
		} else {
			fmt.Printf("answers against docs/swagger: the pairs, answered and not seen, in %s\n", file)
		}
	}
	for user, token := range env.tokens {
		holdSecret("the token of "+user, token)
	}
	for _, t := range env.dashboards.rayTokens() {
		holdSecret("a Ray token a dashboard took", t)
	}
	held, short, unread := heldSecrets()
	problems, err = checkLogsHoldNoTokens(env.state, held, launchedLogs())
	report("logs against tokens", append(unread, problems...), err)
	fmt.Printf("logs against tokens: %d values of Secrets too short to look for\n", short)
	return ok
}

// loopbackOnly refuses to run where a network interface other than loopback is up.
func loopbackOnly() error {
	if os.Getenv("RAY_TEST_ALLOW_HOST_NETWORK") == "1" {
		return nil
	}
	ifaces, err := net.Interfaces()
	if err != nil {
		return err
	}
	for _, i := range ifaces {
		if i.Flags&net.FlagLoopback == 0 && i.Flags&net.FlagUp != 0 {
			return fmt.Errorf("interface %s is up: run the integration tests through `make test` (a loopback-only network namespace)", i.Name)
		}
	}
	return nil
}

func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			if _, err := os.Stat(filepath.Join(dir, "stack", "up.sh")); err == nil {
				return dir, nil
			}
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no repository root above the working directory")
		}
		dir = parent
	}
}

// readEnvFile reads the `export K=V` lines that stack/up.sh writes.
func readEnvFile(path string) (map[string]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	vars := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimPrefix(sc.Text(), "export ")
		k, v, ok := strings.Cut(line, "=")
		if ok {
			vars[k] = strings.Trim(v, `"`)
		}
	}
	return vars, sc.Err()
}

// startService runs the service the tests share, and prepares the admin's clients.
func startService(root, state string) (*stackEnv, func(), error) {
	vars, err := readEnvFile(filepath.Join(state, "env"))
	if err != nil {
		return nil, nil, err
	}
	proc, err := launchService(root, state, vars, "ray-service.log", 60*time.Second)
	if err != nil {
		return nil, nil, err
	}
	stop := func() { proc.stop() }
	cfg, err := clientcmd.BuildConfigFromFlags("", vars["KUBECONFIG"])
	if err != nil {
		stop()
		return nil, nil, err
	}
	// The tests' own clients poll (e.g. for the moment between two steps of a start, which a slow link
	// holds open 150 ms): the default 5 requests a second would make each poll wait longer than that.
	cfg.QPS, cfg.Burst = 200, 400
	if err := holdStackSecrets(state, vars); err != nil {
		stop()
		return nil, nil, err
	}
	seeingCredentials(cfg)
	e := &stackEnv{vars: vars, serviceURL: proc.url, dashboardURL: proc.dashboardURL, root: root, state: state, tokens: map[string]string{
		"admin": vars["ADMIN_TOKEN"], "viewer": vars["VIEWER_TOKEN"], "nobody": vars["NOBODY_TOKEN"],
		"alice": vars["ALICE_TOKEN"], "bob": vars["BOB_TOKEN"], "carol": vars["CAROL_TOKEN"],
	}}
	if e.admin, err = kubernetes.NewForConfig(cfg); err != nil {
		stop()
		return nil, nil, err
	}
	if e.adminDyn, err = dynamic.NewForConfig(cfg); err != nil {
		stop()
		return nil, nil, err
	}
	return e, stop, nil
}

// dumpLogs prints the tail of every log of the stack and the service, for a failed run.
func dumpLogs(state string) {
	files, _ := filepath.Glob(filepath.Join(state, "logs", "*.log"))
	for _, f := range files {
		out, _ := exec.Command("tail", "-n", "15", f).Output()
		fmt.Fprintf(os.Stderr, "==> %s <==\n%s\n", filepath.Base(f), out)
	}
}
