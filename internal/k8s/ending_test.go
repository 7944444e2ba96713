package k8s

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

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
