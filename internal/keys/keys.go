// Package keys holds the service's signing keys: read from a file, or kept in a Secret that the first
// replica to start makes and every replica after it reads. A key a chart renders (Helm's lookup, or a
// random value) is made again by every `helm template` or GitOps render and silently untrusts all that
// was signed before; a key the service makes once is never made again.
package keys

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
)

// MinLength is the least length of a key, in bytes.
const MinLength = 32

// DataKey is the key, in the Secret's data, of the template key.
const DataKey = "key"

// ManagedByLabel marks a Secret the service made for its keys.
const ManagedByLabel = "app.kubernetes.io/managed-by"

// FromFile reads a key from a file.
func FromFile(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading the key: %w", err)
	}
	return check(b, path)
}

func check(key []byte, where string) ([]byte, error) {
	if len(key) < MinLength {
		return nil, fmt.Errorf("the key in %s has %d bytes: want at least %d", where, len(key), MinLength)
	}
	return key, nil
}

// ParseSecretRef reads "namespace/name".
func ParseSecretRef(ref string) (namespace, name string, err error) {
	ns, name, ok := strings.Cut(ref, "/")
	if !ok || ns == "" || name == "" || strings.Contains(name, "/") {
		return "", "", fmt.Errorf("%q: want namespace/name", ref)
	}
	return ns, name, nil
}

// FromSecret returns the key under dataKey of the Secret name, making the Secret with a new random key
// when there is none. Replicas that start at once agree: one create wins, the others read what it made.
// A Secret that is there without dataKey is an error, not something to fill in: it was made by someone
// else, and a key added to it now would not be the one that signed what exists.
func FromSecret(ctx context.Context, secrets corev1client.SecretInterface, namespace, name, dataKey string) ([]byte, error) {
	where := fmt.Sprintf("Secret %s/%s (data %q)", namespace, name, dataKey)
	for range 3 {
		s, err := secrets.Get(ctx, name, metav1.GetOptions{})
		switch {
		case err == nil:
			key, ok := s.Data[dataKey]
			if !ok {
				return nil, fmt.Errorf("%s: the Secret has no such key", where)
			}
			return check(key, where)
		case !apierrors.IsNotFound(err):
			return nil, fmt.Errorf("reading %s: %w", where, err)
		}
		raw := make([]byte, MinLength)
		if _, err := rand.Read(raw); err != nil {
			return nil, err
		}
		// Hex, as `openssl rand -hex 32` makes one by hand: 64 bytes of key material.
		key := []byte(hex.EncodeToString(raw))
		_, err = secrets.Create(ctx, &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace, Labels: map[string]string{ManagedByLabel: "ray-service"}},
			Type:       corev1.SecretTypeOpaque,
			Data:       map[string][]byte{dataKey: key},
		}, metav1.CreateOptions{})
		switch {
		case err == nil:
			return key, nil
		case !apierrors.IsAlreadyExists(err):
			return nil, fmt.Errorf("making %s: %w", where, err)
		}
		// Another replica made it meanwhile: read it.
	}
	return nil, errors.New(where + ": made and removed again while being read")
}
