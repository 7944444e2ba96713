package cache

import (
	"errors"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	k8stesting "k8s.io/client-go/testing"

	"ray-service/internal/ray"
)

// A watch the apiserver refuses is counted, as often as the informer tries it again; the cache still
// syncs from its list.
func TestFailedWatchesAreCounted(t *testing.T) {
	kinds := ray.NewKinds()
	dyn, core := fakeClients(kinds)
	core.PrependWatchReactor("pods", func(k8stesting.Action) (bool, watch.Interface, error) {
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: "pods"}, "", errors.New("no"))
	})
	store, err := NewStore(dyn, core, kinds, signer(t), 0)
	require.NoError(t, err)
	store.Start(t.Context())
	require.True(t, store.WaitForSync(t.Context()))
	require.Eventually(t, func() bool { return store.WatchErrors() >= 2 }, 10*time.Second, 10*time.Millisecond,
		"the pods' watch fails each time it is tried")
}

func TestWatchFailure(t *testing.T) {
	for err, want := range map[error]bool{
		io.EOF:                          false,
		fmt.Errorf("watch: %w", io.EOF): false,
		apierrors.NewResourceExpired("too old resource version"):                          false,
		&apierrors.StatusError{ErrStatus: metav1.Status{Reason: metav1.StatusReasonGone}}: false, // what servers before 1.18 answered
		io.ErrUnexpectedEOF:                            true,
		apierrors.NewInternalError(errors.New("etcd")): true,
		errors.New("connection refused"):               true,
	} {
		assert.Equal(t, want, watchFailure(err), err.Error())
	}
}
