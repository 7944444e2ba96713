//go:build integration

package integration

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// makeRun is `make run` started the way a process supervisor starts it: in its own process group, with
// every signal at its default action, on a second stack with its own state directory and ports.
type makeRun struct {
	cmd    *exec.Cmd
	out    *lockedBuffer
	state  string
	listen string
	done   chan struct{}

	mu   sync.Mutex
	pids map[string]int // every PID the stack recorded while it ran, by component
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// The second stack's ports: apart from the shared stack's, so both run at once.
var makeRunPorts = []string{"ETCD_PORT=22379", "APISERVER_PORT=26443", "KCM_PORT=26257", "SCHED_PORT=26259",
	"KWOK_PORT=27250", "OPERATOR_METRICS_PORT=28080", "OPERATOR_PROBE_PORT=28081", "PROM_PORT=29090"}

func startMakeRun(t *testing.T, state string, extraEnv ...string) *makeRun {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	listen := ln.Addr().String()
	require.NoError(t, ln.Close())
	// `-o build`: the binary was built by `make test` before it entered the network namespace.
	cmd := exec.Command("env", "--default-signal", "make", "--no-print-directory", "-C", env.root, "-o", "build", "run")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	environ := []string{}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "RAY_SERVICE_KUBECONFIG=") && !strings.HasPrefix(kv, "KUBERNETES_SERVICE_HOST=") {
			environ = append(environ, kv)
		}
	}
	cmd.Env = append(append(append(environ, "RAY_STACK_STATE="+state, "RAY_SERVICE_LISTEN="+listen, "RAY_SERVICE_DASHBOARD_LISTEN="+freeAddr(t),
		"RAY_SERVICE_METRICS_LISTEN="+freeAddr(t),
		"STACK_BIN="+env.vars["STACK_BIN"], "NUM_NODES=1"), makeRunPorts...), extraEnv...)
	m := &makeRun{cmd: cmd, out: &lockedBuffer{}, state: state, listen: listen, done: make(chan struct{}), pids: map[string]int{}}
	cmd.Stdout, cmd.Stderr = m.out, m.out
	require.NoError(t, cmd.Start())
	go func() { _ = cmd.Wait(); close(m.done) }()
	go m.recordPIDs()
	t.Cleanup(func() {
		select {
		case <-m.done:
		default:
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-m.done
		}
		stopStack(env.root, state) // whatever a failed test left behind
	})
	return m
}

// recordPIDs collects the PID files as up.sh writes them, until make exits: down.sh removes them.
func (m *makeRun) recordPIDs() {
	for {
		files, _ := filepath.Glob(filepath.Join(m.state, "pids", "*.pid"))
		for _, f := range files {
			data, err := os.ReadFile(f)
			if pid, perr := strconv.Atoi(strings.TrimSpace(string(data))); err == nil && perr == nil {
				m.mu.Lock()
				m.pids[strings.TrimSuffix(filepath.Base(f), ".pid")] = pid
				m.mu.Unlock()
			}
		}
		select {
		case <-m.done:
			return
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func (m *makeRun) waitReady(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 180*time.Second)
	defer cancel()
	for {
		if status, _, err := httpGet(ctx, "http://"+m.listen+"/readyz"); err == nil && status == 200 {
			return
		}
		select {
		case <-m.done:
			t.Fatalf("make run exited before it was ready:\n%s", m.out)
		case <-ctx.Done():
			t.Fatalf("make run was not ready in time:\n%s", m.out)
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// waitExit waits for make to exit and checks that nothing the stack recorded is still alive.
func (m *makeRun) waitExit(t *testing.T, within time.Duration) {
	t.Helper()
	select {
	case <-m.done:
	case <-time.After(within):
		t.Fatalf("make run still runs %s after the signal:\n%s", within, m.out)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	require.NotEmpty(t, m.pids, "the stack recorded no PIDs")
	var alive []string
	for name, pid := range m.pids {
		if !errors.Is(syscall.Kill(pid, 0), syscall.ESRCH) {
			alive = append(alive, fmt.Sprintf("%s (PID %d)", name, pid))
		}
	}
	assert.Empty(t, alive, "still alive after make run ended")
	left, _ := filepath.Glob(filepath.Join(m.state, "pids", "*.pid"))
	assert.Empty(t, left, "PID files left behind")
	_, _, err := httpGet(context.Background(), "http://"+m.listen+"/healthz")
	assert.Error(t, err, "the service still answers")
}

// `make run` stops the service and every stack process whichever of SIGINT, SIGTERM and SIGHUP reaches
// it, sent to its process group (a terminal, systemd, timeout) or to make alone (a supervisor that
// signals the PID it started): one case for each path a signal takes (a stack start is ~25 s).
func TestMakeRunStopsOnSignals(t *testing.T) {
	// Beside the other parallel tests: its stack has ports and a state of its own, and it mostly waits
	// for that stack to start and stop. TestMakeRunFailedStartStopsTheStack, which takes its port, is
	// serial, done before.
	t.Parallel()
	state := filepath.Join(t.TempDir(), "stack")
	cases := []struct {
		sig   syscall.Signal
		group bool
	}{
		// To make alone: make passes SIGTERM on to its children, SIGINT (and SIGHUP, the same way) to
		// nobody, where run.sh's watcher of make's caught signals stops the stack.
		{syscall.SIGTERM, false}, {syscall.SIGINT, false},
		// To the process group: Ctrl-C in a terminal, and the terminal closing; a group SIGTERM reaches
		// run.sh's trap as a group SIGINT does.
		{syscall.SIGINT, true}, {syscall.SIGHUP, true},
	}
	for i, tc := range cases {
		to := "make alone"
		if tc.group {
			to = "the process group"
		}
		t.Run(tc.sig.String()+" to "+to, func(t *testing.T) {
			m := startMakeRun(t, state)
			m.waitReady(t)
			if i == 0 {
				m.checkServes(t)
			}
			pid := m.cmd.Process.Pid
			if tc.group {
				pid = -pid
			}
			start := time.Now()
			require.NoError(t, syscall.Kill(pid, tc.sig))
			m.waitExit(t, 60*time.Second)
			assert.Contains(t, m.out.String(), "stopping the local stack")
			t.Logf("stopped %d processes in %s", len(m.pids), time.Since(start).Round(10*time.Millisecond))
		})
	}
}

// A start of the stack that fails half-way stops what it had started: here kube-apiserver cannot
// bind its port, after etcd is up.
func TestMakeRunFailedStartStopsTheStack(t *testing.T) {
	state := filepath.Join(t.TempDir(), "stack")
	ln, err := net.Listen("tcp", "127.0.0.1:26443")
	require.NoError(t, err)
	defer ln.Close()
	m := startMakeRun(t, state)
	m.waitExit(t, 180*time.Second)
	assert.NotZero(t, m.cmd.ProcessState.ExitCode(), "make run must fail:\n%s", m.out)
	assert.Contains(t, m.out.String(), "kube-apiserver exited")
	assert.Contains(t, m.pids, "etcd", "etcd was started before the failure")
}

// checkServes checks what `make run`'s service serves beside its API, as its .run/env says: idle
// policies (it stops idle clusters as an identity of its own) and its metrics on their own address.
func (m *makeRun) checkServes(t *testing.T) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(filepath.Dir(m.state), "env"))
	require.NoError(t, err)
	vars := map[string]string{}
	for line := range strings.SplitSeq(string(b), "\n") {
		if k, v, ok := strings.Cut(strings.TrimPrefix(line, "export "), "="); ok {
			vars[k] = v
		}
	}
	r, err := sendTo(vars["RAY_SERVICE_URL"], "PUT", "/rest/ray/v1/namespaces/default/idle-policy", vars["ADMIN_TOKEN"],
		"application/json", []byte(`{"stopAfter":"2h"}`))
	require.NoError(t, err)
	assert.Equal(t, 201, r.Status, "an idle policy is set on make run's service: %s", r.Raw)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	status, body, err := httpGet(ctx, vars["RAY_SERVICE_METRICS_URL"])
	require.NoError(t, err)
	assert.Equal(t, 200, status)
	assert.Contains(t, string(body), "ray_service_ready 1")
}
