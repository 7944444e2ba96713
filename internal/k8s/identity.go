package k8s

import (
	"context"
	"sync"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
)

// TokenSource hands out tokens of one ServiceAccount of the service's (an identity it acts as for one
// purpose, bound narrowly), requested of the apiserver (TokenRequest) and renewed before they expire.
type TokenSource struct {
	Accounts        corev1client.ServiceAccountsGetter
	Namespace, Name string

	mu      sync.Mutex
	token   string
	renewAt time.Time
}

// tokenLifetime is what a token is asked for; it is renewed past two thirds of it.
const tokenLifetime = time.Hour

// User is the ServiceAccount's user name.
func (t *TokenSource) User() string { return "system:serviceaccount:" + t.Namespace + ":" + t.Name }

// Token returns a token of the ServiceAccount.
func (t *TokenSource) Token(ctx context.Context) (string, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.token != "" && time.Now().Before(t.renewAt) {
		return t.token, nil
	}
	secs := int64(tokenLifetime / time.Second)
	tr, err := t.Accounts.ServiceAccounts(t.Namespace).CreateToken(ctx, t.Name,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &secs}}, metav1.CreateOptions{})
	if err != nil {
		return "", err
	}
	t.token = tr.Status.Token
	t.renewAt = time.Now().Add(tokenLifetime * 2 / 3)
	if exp := tr.Status.ExpirationTimestamp.Time; !exp.IsZero() && exp.Before(t.renewAt) {
		t.renewAt = time.Now().Add(time.Until(exp) * 2 / 3)
	}
	return t.token, nil
}
