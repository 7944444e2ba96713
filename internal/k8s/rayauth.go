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
	"k8s.io/apimachinery/pkg/types"

	"ray-service/internal/ray"
)

// ErrNoRayToken is the error of a token-mode Ray cluster whose Secret does not (yet) hold a token.
var ErrNoRayToken = errors.New("no Ray token")

// DashboardToken is the token the dashboard of obj's current Ray cluster takes, read from the cluster's
// Secret with the caller's own token, so that only a caller Kubernetes lets read that Secret gets it.
// "" with no error when the dashboard takes no static token: authentication off, or delegated to
// Kubernetes (enableK8sTokenAuth), where no one's Kubernetes token is passed on for them. The caller's
// refusal is the apiserver's (a Forbidden naming the Secret); a Secret without the token, or not the
// cluster's own, is ErrNoRayToken. The token is never logged nor kept.
//
// The Secret is the one KubeRay reads for the cluster (authOptions.secretName, else the one named after
// the cluster), and is taken only where it is the cluster's own: it lists that RayCluster among its
// owners (ownedByCluster). The Secret's name is the object's author's choice, the rights it is read with
// are the caller's, and the token goes to the author's head: without the owner, an author who may not
// read a Secret (holding an auth_token) could name it, or name the cluster after it, and have the next
// caller who may read it send it to the head.
func (o *Objects) DashboardToken(ctx context.Context, obj *unstructured.Unstructured) (string, error) {
	sum := o.Kind.Summarize(obj)
	cluster := o.Kind.CurrentCluster(&sum)
	a := o.Kind.ClusterAuthOf(obj, cluster)
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
	uid := types.UID("")
	if obj.GetKind() == "RayCluster" && obj.GetName() == cluster {
		uid = obj.GetUID()
	}
	if !ownedByCluster(secret.OwnerReferences, cluster, uid) {
		return "", fmt.Errorf("%w: Secret %q is not the Ray cluster's own (it does not list RayCluster %q among its owners, "+
			"as the Secret KubeRay makes for the cluster does), so its token is not sent", ErrNoRayToken, a.Secret, cluster)
	}
	token := strings.TrimSpace(string(secret.Data[ray.AuthTokenKey]))
	if token == "" {
		return "", fmt.Errorf("%w: Secret %q has no %s", ErrNoRayToken, a.Secret, ray.AuthTokenKey)
	}
	return token, nil
}

// ownedByCluster tells whether owners name the RayCluster cluster (of uid, where known) of its
// namespace. KubeRay makes a cluster's Secret with the cluster as its controller (ray-project/kuberay
// v1.6.0 and v1.7.0, ray-operator/controllers/ray/raycluster_controller.go createAuthSecret:
// metav1.NewControllerRef(rayCluster, ...)); a Secret named by authOptions.secretName it leaves as it is
// (reconcileAuthSecret), so its owner adds the cluster to its owners to have the service send its token.
// An owner is namespaced like the Secret, and only whoever may update the Secret can add one.
func ownedByCluster(owners []metav1.OwnerReference, cluster string, uid types.UID) bool {
	for _, ref := range owners {
		gv, err := schema.ParseGroupVersion(ref.APIVersion)
		if err == nil && gv.Group == ray.RayGroupVersion.Group && ref.Kind == "RayCluster" && ref.Name == cluster && cluster != "" &&
			(uid == "" || ref.UID == uid) {
			return true
		}
	}
	return false
}

// secretsResource names what a refusal to read a Ray cluster's Secret is about.
var secretsResource = schema.GroupResource{Resource: "secrets"}
