package k8s

import (
	"context"
	"errors"
	"fmt"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"ray-service/internal/ray"
)

// ErrNoRayToken is the error of a token-mode Ray cluster whose Secret does not (yet) hold a token.
var ErrNoRayToken = errors.New("no Ray token")

// DashboardToken is the token the dashboard of obj's current Ray cluster takes, read from the cluster's
// Secret with the caller's own token, so that only a caller Kubernetes lets read that Secret gets it.
// "" with no error when the dashboard takes no static token: authentication off, or delegated to
// Kubernetes (enableK8sTokenAuth), where no one's Kubernetes token is passed on for them. The caller's
// refusal is the apiserver's (a Forbidden naming the Secret); a Secret without the token is
// ErrNoRayToken. The token is never logged nor kept.
func (o *Objects) DashboardToken(ctx context.Context, obj *unstructured.Unstructured) (string, error) {
	sum := o.Kind.Summarize(obj)
	a := o.Kind.ClusterAuthOf(obj, o.Kind.CurrentCluster(&sum))
	if !a.Token || a.Kubernetes {
		return "", nil
	}
	if a.Secret == "" {
		return "", fmt.Errorf("%w: it has no Ray cluster yet", ErrNoRayToken)
	}
	secret, err := o.Clients.Core.Secrets(obj.GetNamespace()).Get(ctx, a.Secret, metav1.GetOptions{})
	if err != nil {
		switch {
		case apierrors.IsNotFound(err):
			return "", fmt.Errorf("%w: Secret %q is not there", ErrNoRayToken, a.Secret)
		case apierrors.IsForbidden(err):
			return "", apierrors.NewForbidden(secretsResource, a.Secret,
				errors.New("the caller may not get it, and the Ray cluster's dashboard takes the token it holds"))
		}
		return "", err
	}
	token := strings.TrimSpace(string(secret.Data[ray.AuthTokenKey]))
	if token == "" {
		return "", fmt.Errorf("%w: Secret %q has no %s", ErrNoRayToken, a.Secret, ray.AuthTokenKey)
	}
	return token, nil
}

// secretsResource names what a refusal to read a Ray cluster's Secret is about.
var secretsResource = schema.GroupResource{Resource: "secrets"}
