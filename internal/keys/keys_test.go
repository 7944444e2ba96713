package keys

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

func TestFromSecretMakesTheKeyOnceAndKeepsIt(t *testing.T) {
	cs := fake.NewClientset()
	secrets := cs.CoreV1().Secrets("ray")
	first, err := FromSecret(context.Background(), secrets, "ray", "ray-service-template-key", DataKey)
	require.NoError(t, err)
	assert.Len(t, first, 2*MinLength)
	again, err := FromSecret(context.Background(), secrets, "ray", "ray-service-template-key", DataKey)
	require.NoError(t, err)
	assert.Equal(t, first, again, "a restart reads the key made before")
	s, err := secrets.Get(context.Background(), "ray-service-template-key", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, "ray-service", s.Labels[ManagedByLabel])
}

// A key kept by an earlier chart (the same Secret and data key) is what the service goes on with.
func TestFromSecretKeepsAKeyItDidNotMake(t *testing.T) {
	old := []byte("0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef")
	cs := fake.NewClientset(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "k", Namespace: "ray"}, Data: map[string][]byte{DataKey: old}})
	key, err := FromSecret(context.Background(), cs.CoreV1().Secrets("ray"), "ray", "k", DataKey)
	require.NoError(t, err)
	assert.Equal(t, old, key)
}

// Two replicas starting at once: the one whose create loses reads the winner's key.
func TestFromSecretLosingTheRaceReadsTheWinnersKey(t *testing.T) {
	winner := []byte("winner-winner-winner-winner-winner-winner")
	cs := fake.NewClientset()
	cs.PrependReactor("create", "secrets", func(k8stesting.Action) (bool, runtime.Object, error) {
		require.NoError(t, cs.Tracker().Add(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "k", Namespace: "ray"}, Data: map[string][]byte{DataKey: winner}}))
		return true, nil, apierrors.NewAlreadyExists(schema.GroupResource{Resource: "secrets"}, "k")
	})
	key, err := FromSecret(context.Background(), cs.CoreV1().Secrets("ray"), "ray", "k", DataKey)
	require.NoError(t, err)
	assert.Equal(t, winner, key)
}

func TestFromSecretRefusesWhatIsNoKey(t *testing.T) {
	cs := fake.NewClientset(
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "other", Namespace: "ray"}, Data: map[string][]byte{"password": []byte("x")}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "short", Namespace: "ray"}, Data: map[string][]byte{DataKey: []byte("short")}})
	_, err := FromSecret(context.Background(), cs.CoreV1().Secrets("ray"), "ray", "other", DataKey)
	require.ErrorContains(t, err, "has no such key")
	_, err = FromSecret(context.Background(), cs.CoreV1().Secrets("ray"), "ray", "short", DataKey)
	require.ErrorContains(t, err, "want at least 32")
	cs.PrependReactor("get", "secrets", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: "secrets"}, "k", nil)
	})
	_, err = FromSecret(context.Background(), cs.CoreV1().Secrets("ray"), "ray", "k", DataKey)
	assert.ErrorContains(t, err, "reading Secret ray/k")
}

func TestFromFile(t *testing.T) {
	f := filepath.Join(t.TempDir(), "key")
	require.NoError(t, os.WriteFile(f, []byte("0123456789abcdef0123456789abcdef"), 0o600))
	key, err := FromFile(f)
	require.NoError(t, err)
	assert.Len(t, key, 32)
	require.NoError(t, os.WriteFile(f, []byte("short"), 0o600))
	_, err = FromFile(f)
	assert.ErrorContains(t, err, "want at least 32")
}

func TestParseSecretRef(t *testing.T) {
	ns, name, err := ParseSecretRef("ray/ray-service-template-key")
	require.NoError(t, err)
	assert.Equal(t, []string{"ray", "ray-service-template-key"}, []string{ns, name})
	for _, bad := range []string{"", "name", "/name", "ns/", "a/b/c"} {
		_, _, err := ParseSecretRef(bad)
		assert.Error(t, err, bad)
	}
}
