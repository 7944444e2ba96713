package k8s

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
)

// PatientDial connects once the address listens again, within its wait, and gives up after it.
func TestPatientDialWaitsForTheListener(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close()) // refused from now on

	go func() {
		time.Sleep(300 * time.Millisecond)
		if l, err := net.Listen("tcp", addr); err == nil {
			defer l.Close()
			if c, err := l.Accept(); err == nil {
				c.Close()
			}
		}
	}()
	start := time.Now()
	c, err := PatientDial(5*time.Second, 50*time.Millisecond)(context.Background(), "tcp", addr)
	require.NoError(t, err, "connected once the address listened again")
	c.Close()
	assert.GreaterOrEqual(t, time.Since(start), 250*time.Millisecond)

	ln2, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	closed := ln2.Addr().String()
	require.NoError(t, ln2.Close())
	start = time.Now()
	_, err = PatientDial(200*time.Millisecond, 50*time.Millisecond)(context.Background(), "tcp", closed)
	require.Error(t, err, "refused past the wait")
	assert.Less(t, time.Since(start), 2*time.Second)

	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	_, err = PatientDial(10*time.Second, 50*time.Millisecond)(ctx, "tcp", closed)
	require.ErrorIs(t, err, context.DeadlineExceeded, "the caller's context bounds the wait")

	// The context ends within a dial: one to a listener whose queue is full hangs, unanswered.
	full := fullListener(t)
	ctx, cancel = context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	_, err = PatientDial(10*time.Second, 50*time.Millisecond)(ctx, "tcp", full)
	require.ErrorIs(t, err, context.DeadlineExceeded, "the caller's context ended the dial")
	assert.ErrorContains(t, err, full, "the dial's own error is kept")
}

// fullListener is the address of a socket that listens with a queue of none and never accepts, its
// queue filled: a connection to it is not answered (Linux drops the SYN) until the dialer gives up.
func fullListener(t *testing.T) string {
	t.Helper()
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM, 0)
	require.NoError(t, err)
	t.Cleanup(func() { _ = syscall.Close(fd) })
	require.NoError(t, syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}))
	require.NoError(t, syscall.Listen(fd, 0))
	sa, err := syscall.Getsockname(fd)
	require.NoError(t, err)
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(sa.(*syscall.SockaddrInet4).Port))
	for range 4 { // the queue holds one or two, whatever the backlog says
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		c, err := (&net.Dialer{}).DialContext(ctx, "tcp", addr)
		cancel()
		if err != nil {
			break
		}
		t.Cleanup(func() { _ = c.Close() })
	}
	return addr
}

// An answer that breaks off after its status line (the apiserver killed mid-write) is marked as a lost
// connection, so that it maps to a transient 503 and not to an internal error; a watch's reads are left
// as client-go's decoder expects them.
func TestAnswerCutOffIsALostConnection(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Length", "4096")
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write([]byte(`{"apiVersion":"ray.io/v1",`))
		w.(http.Flusher).Flush()
		conn, _, err := http.NewResponseController(w).Hijack()
		if err == nil {
			_ = conn.Close()
		}
	}))
	defer srv.Close()
	f, err := NewClientFactory(&rest.Config{Host: srv.URL})
	require.NoError(t, err)
	c, err := f.ForToken("t")
	require.NoError(t, err)
	gvr := schema.GroupVersionResource{Group: "ray.io", Version: "v1", Resource: "rayclusters"}
	obj := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "ray.io/v1", "kind": "RayCluster",
		"metadata": map[string]any{"name": "a"}}}
	_, err = c.Dynamic.Resource(gvr).Namespace("n").Create(context.Background(), obj, metav1.CreateOptions{})
	require.Error(t, err)
	require.ErrorIs(t, err, ErrConnectionLost)
	require.ErrorIs(t, err, io.ErrUnexpectedEOF, "the cause stays in the chain")

	// The same cut on a watch's body is not marked.
	resp, err := f.transport.RoundTrip(httptest.NewRequest(http.MethodGet, srv.URL+"/apis/ray.io/v1/rayclusters?watch=true", nil).WithContext(context.Background()))
	require.NoError(t, err)
	_, err = io.ReadAll(resp.Body)
	resp.Body.Close()
	assert.Equal(t, io.ErrUnexpectedEOF, err)
}
