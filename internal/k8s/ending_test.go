package k8s

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"
	k8stesting "k8s.io/client-go/testing"

	"ray-service/internal/ray"
)

// logServer answers a pod's log with serve, as an apiserver would.
func logServer(t *testing.T, serve func(w http.ResponseWriter, r *http.Request)) kubernetes.Interface {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(serve))
	t.Cleanup(srv.Close)
	cs, err := kubernetes.NewForConfig(&rest.Config{Host: srv.URL})
	require.NoError(t, err)
	return cs
}

var tailPod = &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns"}}

// A log tail whose reading stalls ends at its deadline, with an error that says so.
func TestReadTailStalled(t *testing.T) {
	core := logServer(t, func(w http.ResponseWriter, r *http.Request) {
		_, _ = fmt.Fprintln(w, "a first line")
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	})
	started := time.Now()
	_, err := readTail(t.Context(), core, tailPod, "c", ray.EndingLimits{LogLines: 10, LogBytes: 1 << 10, LogTimeout: 300 * time.Millisecond})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "not within 300ms")
	assert.Less(t, time.Since(started), 5*time.Second)
}

// A log whose last lines are longer than what is read of them is read again, fewer lines; one that
// never ends is read no further than the bound.
func TestReadTailBounded(t *testing.T) {
	var asked []string
	core := logServer(t, func(w http.ResponseWriter, r *http.Request) {
		asked = append(asked, r.URL.Query().Get("tailLines"))
		lines := r.URL.Query().Get("tailLines")
		if lines == "2001" {
			_, _ = fmt.Fprint(w, strings.Repeat(strings.Repeat("x", 1023)+"\n", 4096)) // 4 MiB
			return
		}
		_, _ = fmt.Fprint(w, strings.Repeat("short\n", 251))
	})
	tail, err := readTail(t.Context(), core, tailPod, "c", ray.EndingLimits{LogLines: 2000, LogBytes: 256 << 10})
	require.NoError(t, err)
	assert.Equal(t, []string{"2001", "251"}, asked, "fewer lines the second time")
	assert.True(t, tail.Truncated)
	assert.Equal(t, 250, strings.Count(tail.Text, "\n"))

	endless := logServer(t, func(w http.ResponseWriter, r *http.Request) {
		line := []byte(strings.Repeat("y", 4095) + "\n")
		for r.Context().Err() == nil {
			if _, err := w.Write(line); err != nil {
				return
			}
		}
	})
	_, err = readTail(t.Context(), endless, tailPod, "c", ray.EndingLimits{LogLines: 2000, LogBytes: 64 << 10})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "longer than 256 KiB")
}

// An ending whose pods the apiserver refuses to list with a selector (400) is read without them, as
// one it may not list; any other failure to list them is an error, and the ending is read again.
func TestReadEndingWithoutPodsRefused(t *testing.T) {
	ctx := context.Background()
	core := fake.NewClientset(&corev1.Event{ObjectMeta: metav1.ObjectMeta{Name: "e", Namespace: "ns"},
		InvolvedObject: corev1.ObjectReference{Kind: "RayCluster", Name: "c"}, Reason: "Deleted"})
	refusal := error(apierrors.NewBadRequest("unable to parse requirement"))
	core.PrependReactor("list", "pods", func(k8stesting.Action) (bool, runtime.Object, error) { return true, nil, refusal })
	cluster := ray.NewKinds().Cluster()
	lim := ray.EndingLimits{Events: 10, LogLines: 10, LogBytes: 1 << 10}
	e, err := ReadEnding(ctx, core, cluster, "ns", "c", []string{"c"}, nil, lim)
	require.NoError(t, err)
	assert.Empty(t, e.Pods)
	require.Len(t, e.Events, 1)
	assert.Equal(t, "Deleted", e.Events[0].Reason)

	refusal = errors.New("connection refused")
	_, err = ReadEnding(ctx, core, cluster, "ns", "c", []string{"c"}, nil, lim)
	require.ErrorContains(t, err, "connection refused")
}
